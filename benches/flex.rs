//! Loading an IBKR Activity Flex statement into a book, as the `ibkr` account does:
//! the XML read, every row mapped, the book validated and assembled. The statement is
//! generated here (our own rows in the shape IBKR writes: one account, executions over
//! 100 instruments, cash transactions, open positions and conversion rates) at 20,000
//! and 200,000 executions (`cargo bench --bench flex`).
//!
//! `import_to_book` is the account's path: typed rows straight into the validator.
//! `import_via_text` adds what the path did before the rows were typed: the book written
//! as JSON text and parsed back by the book loader.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use std::fmt::Write as _;
use std::hint::black_box;
use tradedesk_brokers::flex::{FlexOptions, flex_to_book};
use tradedesk_brokers::parse_book;

/// A statement of `n` executions: a deterministic walk of buys and sells that keeps each
/// position long, one deposit and dividend a month, positions and rates at the end.
fn statement(n: usize) -> String {
    let mut xml = String::with_capacity(n * 460 + 4096);
    xml.push_str(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<FlexQueryResponse queryName="bench" type="AF">
<FlexStatements count="1">
<FlexStatement accountId="U7654321" fromDate="20200101" toDate="20251231" period="Custom" whenGenerated="20260102;083000">
<AccountInformation accountId="U7654321" acctAlias="" currency="USD" name="Bench Trader" accountType="Individual"/>
<Trades>
"#,
    );
    let mut held = [0i64; 100];
    let mut state: u64 = 42;
    let start = chrono::NaiveDate::from_ymd_opt(2020, 1, 2).unwrap_or_default();
    for i in 0..n {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let r = state >> 33;
        let k = usize::try_from(r % 100).unwrap_or(0);
        let quantity = 1 + i64::try_from(r % 50).unwrap_or(0);
        let sell = held[k] >= quantity && r.is_multiple_of(3);
        held[k] += if sell { -quantity } else { quantity };
        let day = start + chrono::Duration::days(i64::try_from(i * 2000 / n.max(1)).unwrap_or(0));
        let date = day.format("%Y%m%d");
        let seconds = 34_200 + (i % 23_000);
        let (h, m, s) = (seconds / 3600, seconds / 60 % 60, seconds % 60);
        let price = 100 + (r % 9_000) / 100;
        let cents = r % 100;
        let _ = writeln!(
            xml,
            r#"<Trade accountId="U7654321" currency="USD" fxRateToBase="1" assetCategory="STK" symbol="S{k:03}" description="STOCK {k}" conid="{conid}" listingExchange="NASDAQ" exchange="ISLAND" multiplier="1" tradeID="{i}" ibExecID="0000{i:08}.01.01" ibOrderID="{i}" dateTime="{date};{h:02}{m:02}{s:02}" tradeDate="{date}" quantity="{signed}" tradePrice="{price}.{cents:02}" ibCommission="-1.{fee:02}" ibCommissionCurrency="USD" buySell="{side}" openCloseIndicator="{oc}" levelOfDetail="EXECUTION" transactionType="ExchTrade"/>"#,
            conid = 100_000 + k,
            signed = if sell { -quantity } else { quantity },
            fee = r % 100,
            side = if sell { "SELL" } else { "BUY" },
            oc = if sell { "C" } else { "O" },
        );
    }
    xml.push_str("</Trades>\n<CashTransactions>\n");
    for month in 0..66 {
        let day = start + chrono::Duration::days(month * 30);
        let date = day.format("%Y%m%d");
        let _ = writeln!(
            xml,
            r#"<CashTransaction accountId="U7654321" currency="USD" type="Deposits/Withdrawals" description="CASH RECEIPTS" dateTime="{date}" amount="1000" transactionID="d{month}" levelOfDetail="DETAIL"/>
<CashTransaction accountId="U7654321" currency="USD" type="Dividends" description="S001 CASH DIVIDEND" dateTime="{date};202000" amount="12.50" transactionID="v{month}" levelOfDetail="DETAIL"/>"#
        );
    }
    xml.push_str("</CashTransactions>\n<OpenPositions>\n");
    for (k, position) in held.iter().enumerate().filter(|(_, p)| **p != 0) {
        let _ = writeln!(
            xml,
            r#"<OpenPosition accountId="U7654321" currency="USD" assetCategory="STK" symbol="S{k:03}" conid="{conid}" listingExchange="NASDAQ" multiplier="1" reportDate="20251231" position="{position}" markPrice="150.25" levelOfDetail="SUMMARY"/>"#,
            conid = 100_000 + k,
        );
    }
    xml.push_str(
        r#"</OpenPositions>
<ConversionRates>
<ConversionRate reportDate="20251231" fromCurrency="EUR" toCurrency="USD" rate="1.1745"/>
</ConversionRates>
</FlexStatement>
</FlexStatements>
</FlexQueryResponse>
"#,
    );
    xml
}

fn flex(c: &mut Criterion) {
    let mut group = c.benchmark_group("flex");
    group.sample_size(10);
    let options = FlexOptions::default();
    for n in [20_000usize, 200_000] {
        let xml = statement(n);
        // Both paths timed below must build the whole book, not time a refusal.
        let whole = |book: Result<tradedesk_core::Book, _>| book.is_ok_and(|b| b.fills.len() == n);
        assert!(
            flex_to_book(&xml, &options).is_ok_and(|import| {
                whole(import.to_book("bench"))
                    && whole(parse_book("bench", &import.to_json().to_string()))
            }),
            "the statement of {n} executions does not import whole"
        );
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::new("import_to_book", n), &xml, |b, xml| {
            b.iter(|| {
                let import = flex_to_book(xml, &options).ok()?;
                black_box(import.to_book("bench").ok().map(|book| book.fills.len()))
            });
        });
        group.bench_with_input(BenchmarkId::new("import_via_text", n), &xml, |b, xml| {
            b.iter(|| {
                let import = flex_to_book(xml, &options).ok()?;
                let text = import.to_json().to_string();
                black_box(parse_book("bench", &text).ok().map(|book| book.fills.len()))
            });
        });
    }
    group.finish();
}

criterion_group!(benches, flex);
criterion_main!(benches);
