//! FIFO replay + realized P&L, and the portfolio summary, over 1,000,000 fills in memory;
//! loading (JSON parse + validation) is `benches/load.rs`.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use tradedesk_core::{Currency, DateRange, ledger};
use tradedesk_tools::accounts::get_portfolio_summary;
use tradedesk_tools::args::GroupBy;
use tradedesk_tools::realized::{RealizedQuery, get_realized_pnl};
use tradedesk_tools::select::select;
use tradedesk_tools::valuation::{Scope, value_book};

mod common;

fn fifo(c: &mut Criterion) {
    let mut group = c.benchmark_group("fifo");
    group.sample_size(10);
    for n in [100_000usize, 1_000_000] {
        let book = common::generate(n);
        let (start, end) = common::full_range(&book);
        let sel = select(&book, None, None, None).unwrap_or_else(|e| panic!("{e}"));
        let query = RealizedQuery {
            range: DateRange::new_checked(start, end).unwrap_or_else(|e| panic!("{e}")),
            currency: Currency::USD,
            group_by: GroupBy::Symbol,
            include_lots: false,
            page: tradedesk_tools::realized::LotPage::FIRST,
            fingerprint: 0,
        };
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::new("replay_only", n), &book, |b, book| {
            b.iter(|| black_box(ledger::replay(book, |_, _| {}).map(|l| l.fifo.open_lot_count())));
        });
        let mut split = book.clone();
        common::with_splits(&mut split, 1_000);
        group.bench_with_input(
            BenchmarkId::new("replay_only_1000_splits", n),
            &split,
            |b, book| {
                b.iter(|| {
                    black_box(ledger::replay(book, |_, _| {}).map(|l| l.fifo.open_lot_count()))
                });
            },
        );
        group.bench_with_input(
            BenchmarkId::new("replay_realized_pnl", n),
            &book,
            |b, book| {
                b.iter(|| black_box(get_realized_pnl(book, &sel, &query).map(|r| r.net_pnl)));
            },
        );
        group.bench_with_input(
            BenchmarkId::new("portfolio_summary", n),
            &book,
            |b, book| {
                b.iter(|| {
                    black_box(
                        value_book(book, Currency::USD, Scope::ACCOUNTS)
                            .and_then(|v| get_portfolio_summary(book, &v))
                            .map(|s| s.total_value),
                    )
                });
            },
        );
    }
    group.finish();
}

criterion_group!(benches, fifo);
criterion_main!(benches);
