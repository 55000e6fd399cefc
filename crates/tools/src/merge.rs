//! Merging several sources' books into the one book the tools read.

use std::collections::HashMap;
use std::sync::Arc;

use tradedesk_core::fx::by_precedence;
use tradedesk_core::{
    AccountIdx, Book, BookParts, Currency, Error, FxQuote, InstrumentIdx, InstrumentKey, Result,
};

/// Merges books, keeping only the selected accounts of each. Instruments are matched by
/// key and must agree on currency, class and multiplier. The merged `as_of` is the
/// latest of the sources'. Rates come in order of precedence (docs/methodology/fx.md):
/// `extra_fx` (the config's fx_file), then the books' own (what the brokers report), then
/// `reference_fx` (the ECB's); for the same pair and date the first source's rate is kept.
///
/// # Errors
/// `invalid_argument` when a selected account is missing from its book, an account id is
/// served twice, or two books disagree about an instrument.
pub fn merge_books(
    parts: &[(Arc<Book>, Option<Vec<String>>)],
    base: Option<Currency>,
    extra_fx: &[FxQuote],
    reference_fx: &[FxQuote],
) -> Result<Book> {
    let base_currency = base
        .or_else(|| parts.first().map(|(b, _)| b.base_currency))
        .unwrap_or(Currency::USD);
    let as_of = parts.iter().map(|(b, _)| b.as_of).max().unwrap_or_default();
    let mut accounts = Vec::new();
    let mut instruments = Vec::new();
    let mut instrument_ids: HashMap<InstrumentKey, InstrumentIdx> = HashMap::new();
    let mut fills = Vec::new();
    let mut cash = Vec::new();
    let mut marks = Vec::new();
    let mut fx: Vec<FxQuote> = Vec::new();
    let mut reported = Vec::new();
    let mut actions = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    let mut unknown_specs: Vec<tradedesk_core::UnknownSpec> = Vec::new();
    let mut tickets: Vec<tradedesk_core::BrokerTicket> = Vec::new();
    let mut margin_modes: Vec<(AccountIdx, tradedesk_core::MarginMode)> = Vec::new();
    let mut seq_offset: u32 = 0;

    for (book, selection) in parts {
        for note in &book.notes {
            if !notes.contains(note) {
                notes.push(note.clone());
            }
        }
        let mut account_map: HashMap<AccountIdx, AccountIdx> = HashMap::new();
        if let Some(ids) = selection {
            for id in ids {
                if book.account_index(id).is_none() {
                    let known: Vec<&str> = book.accounts.iter().map(|a| a.id.as_str()).collect();
                    return Err(Error::invalid_argument(
                        format!("account '{id}' is not in its book"),
                        format!("the book's accounts are {known:?}; fix the id in tradedesk.toml"),
                    ));
                }
            }
        }
        for (i, account) in book.accounts.iter().enumerate() {
            let wanted = selection
                .as_ref()
                .is_none_or(|ids| ids.contains(&account.id));
            if !wanted {
                continue;
            }
            if accounts
                .iter()
                .any(|a: &tradedesk_core::Account| a.id == account.id)
            {
                return Err(Error::invalid_argument(
                    format!("account '{}' is configured twice", account.id),
                    "give each account one entry in tradedesk.toml",
                ));
            }
            let new = AccountIdx::try_from(accounts.len())
                .map_err(|_| Error::internal("too many accounts"))?;
            account_map.insert(
                AccountIdx::try_from(i).map_err(|_| Error::internal("too many accounts"))?,
                new,
            );
            accounts.push(account.clone());
        }
        let mut instrument_map: Vec<InstrumentIdx> = Vec::with_capacity(book.instruments.len());
        for inst in &book.instruments {
            let idx = if let Some(&idx) = instrument_ids.get(&inst.key) {
                let existing: &tradedesk_core::Instrument = &instruments[idx as usize];
                if existing.currency != inst.currency
                    || existing.asset_class != inst.asset_class
                    || existing.multiplier != inst.multiplier
                {
                    return Err(Error::invalid_argument(
                        format!(
                            "instrument {} differs between two books (currency, class or multiplier)",
                            inst.key
                        ),
                        "make the books agree on the instrument's definition",
                    ));
                }
                idx
            } else {
                let idx = InstrumentIdx::try_from(instruments.len())
                    .map_err(|_| Error::internal("too many instruments"))?;
                instrument_ids.insert(inst.key.clone(), idx);
                instruments.push(inst.clone());
                idx
            };
            instrument_map.push(idx);
        }
        for f in &book.fills {
            if let Some(&account) = account_map.get(&f.account) {
                let mut f = f.clone();
                f.account = account;
                f.instrument = instrument_map[f.instrument as usize];
                f.seq = f.seq.saturating_add(seq_offset);
                fills.push(f);
            }
        }
        seq_offset = seq_offset.saturating_add(u32::try_from(book.fills.len()).unwrap_or(u32::MAX));
        for c in &book.cash {
            if let Some(&account) = account_map.get(&c.account) {
                let mut c = c.clone();
                c.account = account;
                cash.push(c);
            }
        }
        for r in &book.reported_positions {
            if let Some(&account) = account_map.get(&r.account) {
                let mut r = r.clone();
                r.account = account;
                r.instrument = instrument_map[r.instrument as usize];
                reported.push(r);
            }
        }
        unknown_specs.extend(
            book.unknown_specs
                .iter()
                .map(|u| tradedesk_core::UnknownSpec {
                    instrument: instrument_map[u.instrument as usize],
                    ..u.clone()
                }),
        );
        for t in &book.tickets {
            if let Some(&account) = account_map.get(&t.account) {
                tickets.push(tradedesk_core::BrokerTicket {
                    account,
                    instrument: instrument_map[t.instrument as usize],
                    ..t.clone()
                });
            }
        }
        margin_modes.extend(
            book.margin_modes
                .iter()
                .filter_map(|(a, m)| Some((*account_map.get(a)?, *m))),
        );
        for a in &book.corporate_actions {
            if let Some(&account) = account_map.get(&a.account) {
                let mut a = a.clone();
                a.account = account;
                a.map_instruments(|i| instrument_map[i as usize]);
                actions.push(a);
            }
        }
        for (old, &new) in instrument_map.iter().enumerate() {
            let old = InstrumentIdx::try_from(old)
                .map_err(|_| Error::internal("too many instruments"))?;
            // Each book's marks and rates count only up to its own as_of.
            marks.extend(
                book.marks
                    .series(old)
                    .iter()
                    .filter(|(date, _)| *date <= book.as_of)
                    .map(|&(date, price)| (new, date, price)),
            );
        }
        fx.extend(
            book.fx
                .all_quotes()
                .into_iter()
                .filter(|q| q.date <= book.as_of),
        );
    }
    let fx = by_precedence(&[extra_fx, &fx, reference_fx]);
    Ok(Book::assemble(BookParts {
        base_currency,
        as_of,
        accounts,
        instruments,
        fills,
        cash,
        marks,
        fx_rates: fx,
        reported_positions: reported,
        corporate_actions: actions,
        notes,
        unknown_specs,
        tickets,
        margin_modes,
    }))
}
