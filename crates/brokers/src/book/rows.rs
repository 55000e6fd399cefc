//! A book as typed rows: each section's items with the fields of
//! docs/methodology/book-format.md, as text where the file has text (decimals, dates,
//! times), so an adapter that builds a book (the Flex import) hands its rows straight to
//! the validator, which checks them with the same rules, and names the same paths, as
//! for a file. The same rows serialize to the `tradedesk-book/1` file they stand for:
//! fields in the order written here, absent ones left out.

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};

use super::{FORMAT, Field, Fields, Item, Sections, Validator};

/// The `format` line, always [`FORMAT`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FormatLine;

impl Serialize for FormatLine {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(FORMAT)
    }
}

/// A whole book of rows (no `opening_positions`: a statement that builds its book from
/// the broker's history has none to state).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BookRows {
    pub format: FormatLine,
    pub base_currency: String,
    pub as_of: String,
    pub accounts: Vec<AccountRow>,
    pub instruments: Vec<InstrumentRow>,
    pub fills: Vec<FillRow>,
    pub cash: Vec<CashRow>,
    pub marks: Vec<MarkRow>,
    pub fx_rates: Vec<FxRow>,
    pub reported_positions: Vec<PositionRow>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub corporate_actions: Vec<KeyedRow>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AccountRow {
    pub id: String,
    pub broker: String,
    pub currency: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InstrumentRow {
    pub symbol: String,
    pub exchange: String,
    pub currency: String,
    pub asset_class: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub multiplier: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sector: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub country: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FillRow {
    pub id: String,
    pub account: String,
    pub exchange: String,
    pub symbol: String,
    pub side: String,
    pub quantity: String,
    pub price: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commission: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commission_currency: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commission_known: Option<bool>,
    pub time: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub closes: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CashRow {
    pub account: String,
    pub kind: String,
    pub amount: String,
    pub currency: String,
    pub time: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MarkRow {
    pub exchange: String,
    pub symbol: String,
    pub price: String,
    pub date: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FxRow {
    pub base: String,
    pub quote: String,
    pub rate: String,
    pub date: String,
}

/// A `reported_positions` item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PositionRow {
    pub account: String,
    pub exchange: String,
    pub symbol: String,
    pub quantity: String,
}

/// A row whose fields depend on its kind (a corporate action): its fields in the order
/// they were set, each once; setting a field again replaces its value in place.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyedRow(Vec<(&'static str, String)>);

impl KeyedRow {
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `key` to `value`: in place when the row has it, else last.
    pub fn insert(&mut self, key: &'static str, value: impl Into<String>) {
        let value = value.into();
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => *v = value,
            None => self.0.push((key, value)),
        }
    }

    #[must_use]
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.as_str())
    }
}

impl Serialize for KeyedRow {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (key, value) in &self.0 {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

impl Fields for KeyedRow {
    fn field(&self, key: &str) -> Field<'_> {
        self.get(key).map_or(Field::Absent, Field::Str)
    }

    fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(k, _)| *k)
    }
}

fn text(value: &str) -> Field<'_> {
    Field::Str(value)
}

fn optional(value: Option<&String>) -> Field<'_> {
    value.map_or(Field::Absent, |v| Field::Str(v))
}

fn flag(value: Option<bool>) -> Field<'static> {
    value.map_or(Field::Absent, Field::Bool)
}

/// Each typed row is an object of its own fields, each once: there are no keys to check.
macro_rules! typed_rows {
    ($($row:ty => |$r:ident, $key:ident| $body:expr;)*) => {$(
        impl Item for $row {
            type Obj = Self;
            fn object(&self) -> Option<&Self> {
                Some(self)
            }
        }
        impl Fields for $row {
            fn field(&self, $key: &str) -> Field<'_> {
                let $r = self;
                $body
            }
            fn keys(&self) -> impl Iterator<Item = &str> {
                std::iter::empty()
            }
        }
    )*};
}

impl Item for KeyedRow {
    type Obj = Self;
    fn object(&self) -> Option<&Self> {
        Some(self)
    }
}

typed_rows! {
    AccountRow => |r, key| match key {
        "id" => text(&r.id),
        "broker" => text(&r.broker),
        "currency" => text(&r.currency),
        "name" => optional(r.name.as_ref()),
        _ => Field::Absent,
    };
    InstrumentRow => |r, key| match key {
        "symbol" => text(&r.symbol),
        "exchange" => text(&r.exchange),
        "currency" => text(&r.currency),
        "asset_class" => text(&r.asset_class),
        "multiplier" => optional(r.multiplier.as_ref()),
        "name" => optional(r.name.as_ref()),
        "sector" => optional(r.sector.as_ref()),
        "country" => optional(r.country.as_ref()),
        _ => Field::Absent,
    };
    FillRow => |r, key| match key {
        "id" => text(&r.id),
        "account" => text(&r.account),
        "exchange" => text(&r.exchange),
        "symbol" => text(&r.symbol),
        "side" => text(&r.side),
        "quantity" => text(&r.quantity),
        "price" => text(&r.price),
        "commission" => optional(r.commission.as_ref()),
        "commission_currency" => optional(r.commission_currency.as_ref()),
        "commission_known" => flag(r.commission_known),
        "time" => text(&r.time),
        "closes" => flag(r.closes),
        _ => Field::Absent,
    };
    CashRow => |r, key| match key {
        "account" => text(&r.account),
        "kind" => text(&r.kind),
        "amount" => text(&r.amount),
        "currency" => text(&r.currency),
        "time" => text(&r.time),
        _ => Field::Absent,
    };
    MarkRow => |r, key| match key {
        "exchange" => text(&r.exchange),
        "symbol" => text(&r.symbol),
        "price" => text(&r.price),
        "date" => text(&r.date),
        _ => Field::Absent,
    };
    FxRow => |r, key| match key {
        "base" => text(&r.base),
        "quote" => text(&r.quote),
        "rate" => text(&r.rate),
        "date" => text(&r.date),
        _ => Field::Absent,
    };
    PositionRow => |r, key| match key {
        "account" => text(&r.account),
        "exchange" => text(&r.exchange),
        "symbol" => text(&r.symbol),
        "quantity" => text(&r.quantity),
        _ => Field::Absent,
    };
}

impl Fields for BookRows {
    fn field(&self, key: &str) -> Field<'_> {
        match key {
            "format" => Field::Str(FORMAT),
            "base_currency" => text(&self.base_currency),
            "as_of" => text(&self.as_of),
            _ => Field::Absent,
        }
    }

    fn keys(&self) -> impl Iterator<Item = &str> {
        std::iter::empty()
    }
}

impl Sections for BookRows {
    type Account = AccountRow;
    type Instrument = InstrumentRow;
    type Fill = FillRow;
    type Cash = CashRow;
    type Mark = MarkRow;
    type Fx = FxRow;
    type Position = PositionRow;
    type Opening = KeyedRow;
    type Action = KeyedRow;

    fn accounts(&self, _: &mut Validator) -> &[AccountRow] {
        &self.accounts
    }
    fn instruments(&self, _: &mut Validator) -> &[InstrumentRow] {
        &self.instruments
    }
    fn fills(&self, _: &mut Validator) -> &[FillRow] {
        &self.fills
    }
    fn cash(&self, _: &mut Validator) -> &[CashRow] {
        &self.cash
    }
    fn marks(&self, _: &mut Validator) -> &[MarkRow] {
        &self.marks
    }
    fn fx_rates(&self, _: &mut Validator) -> &[FxRow] {
        &self.fx_rates
    }
    fn reported_positions(&self, _: &mut Validator) -> &[PositionRow] {
        &self.reported_positions
    }
    fn opening_positions(&self, _: &mut Validator) -> &[KeyedRow] {
        &[]
    }
    fn corporate_actions(&self, _: &mut Validator) -> &[KeyedRow] {
        &self.corporate_actions
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use crate::book::{
        BookError, assemble_rows, assemble_rows_fast, assemble_rows_validating, fingerprint,
        parse_book_validating,
    };

    fn rows() -> BookRows {
        let mut split = KeyedRow::new();
        split.insert("id", "ca-1");
        split.insert("account", "A");
        split.insert("date", "2024-06-10");
        split.insert("exchange", "NASDAQ");
        split.insert("symbol", "NVDA");
        split.insert("kind", "split");
        split.insert("new_units", "10");
        split.insert("old_units", "1");
        BookRows {
            format: FormatLine,
            base_currency: "USD".into(),
            as_of: "2024-12-31".into(),
            accounts: vec![AccountRow {
                id: "A".into(),
                broker: "ibkr".into(),
                currency: "USD".into(),
                name: Some("Trader".into()),
            }],
            instruments: vec![InstrumentRow {
                symbol: "NVDA".into(),
                exchange: "NASDAQ".into(),
                currency: "USD".into(),
                asset_class: "equity".into(),
                multiplier: None,
                name: None,
                sector: None,
                country: None,
            }],
            fills: vec![FillRow {
                id: "E1".into(),
                account: "A".into(),
                exchange: "NASDAQ".into(),
                symbol: "NVDA".into(),
                side: "buy".into(),
                quantity: "2".into(),
                price: "900.5".into(),
                commission: Some("1".into()),
                commission_currency: Some("USD".into()),
                commission_known: None,
                time: "2024-03-04T10:15:00-05:00".into(),
                closes: None,
            }],
            cash: vec![CashRow {
                account: "A".into(),
                kind: "deposit".into(),
                amount: "5000".into(),
                currency: "USD".into(),
                time: "2024-01-02T00:00:00-05:00".into(),
            }],
            marks: vec![MarkRow {
                exchange: "NASDAQ".into(),
                symbol: "NVDA".into(),
                price: "134.29".into(),
                date: "2024-12-31".into(),
            }],
            fx_rates: vec![FxRow {
                base: "EUR".into(),
                quote: "USD".into(),
                rate: "1.04".into(),
                date: "2024-12-31".into(),
            }],
            reported_positions: vec![PositionRow {
                account: "A".into(),
                exchange: "NASDAQ".into(),
                symbol: "NVDA".into(),
                quantity: "20".into(),
            }],
            corporate_actions: vec![split],
        }
    }

    /// The rows' verdict and the verdict on the file they write, side by side.
    fn both(rows: &BookRows) -> (Result<String, BookError>, Result<String, BookError>) {
        let text = serde_json::to_string(rows).unwrap();
        let show = |b: tradedesk_core::Book| crate::book::write_book(&b);
        (
            assemble_rows("book.json", rows).map(show),
            parse_book_validating("book.json", &text).map(show),
        )
    }

    #[test]
    fn rows_write_the_file_in_the_formats_field_order() {
        let mut one = rows();
        one.fills[0].closes = Some(true);
        let text = serde_json::to_string(&one).unwrap();
        assert!(text.starts_with(
            r#"{"format":"tradedesk-book/1","base_currency":"USD","as_of":"2024-12-31","accounts":[{"id":"A","broker":"ibkr","currency":"USD","name":"Trader"}],"instruments":[{"symbol":"NVDA","exchange":"NASDAQ","currency":"USD","asset_class":"equity"}],"fills":[{"id":"E1","account":"A","exchange":"NASDAQ","symbol":"NVDA","side":"buy","quantity":"2","price":"900.5","commission":"1","commission_currency":"USD","time":"2024-03-04T10:15:00-05:00","closes":true}]"#
        ), "{text}");
        assert!(
            text.ends_with(r#""corporate_actions":[{"id":"ca-1","account":"A","date":"2024-06-10","exchange":"NASDAQ","symbol":"NVDA","kind":"split","new_units":"10","old_units":"1"}]}"#),
            "{text}"
        );
        one.corporate_actions.clear();
        let text = serde_json::to_string(&one).unwrap();
        assert!(!text.contains("corporate_actions"), "{text}");
    }

    #[test]
    fn a_keyed_row_sets_a_field_again_in_place() {
        let mut row = KeyedRow::new();
        row.insert("id", "a");
        row.insert("kind", "split");
        row.insert("id", "b");
        assert_eq!(
            serde_json::to_string(&row).unwrap(),
            r#"{"id":"b","kind":"split"}"#
        );
        assert_eq!(row.get("id"), Some("b"));
        assert_eq!(row.get("fill"), None);
    }

    #[test]
    fn valid_rows_assemble_to_the_book_their_file_loads_to() {
        let (typed, loaded) = both(&rows());
        assert!(typed.is_ok(), "{typed:?}");
        assert_eq!(typed, loaded);
    }

    type Edit = fn(&mut BookRows);

    /// The broken-row kinds: each edit breaks one rule of good rows.
    fn broken() -> [(&'static str, Edit); 12] {
        [
            ("a price that is no decimal", |r| {
                r.fills[0].price = "9e2".into();
            }),
            ("a negative quantity", |r| r.fills[0].quantity = "-2".into()),
            ("an unknown account", |r| r.fills[0].account = "B".into()),
            ("an unlisted instrument", |r| {
                r.marks[0].symbol = "AMD".into();
            }),
            ("a side", |r| r.fills[0].side = "BUY".into()),
            ("a time without offset", |r| {
                r.fills[0].time = "2024-03-04T10:15:00".into();
            }),
            ("a fee paid in", |r| r.cash[0].kind = "fee".into()),
            ("an empty as_of", |r| r.as_of = " ".into()),
            ("a lower-case currency", |r| r.base_currency = "usd".into()),
            ("a rate of one currency", |r| {
                r.fx_rates[0].quote = "EUR".into();
            }),
            ("a duplicate fill id", |r| {
                let again = r.fills[0].clone();
                r.fills.push(again);
            }),
            ("an action of no kind", |r| {
                r.corporate_actions[0].insert("kind", "merger");
            }),
        ]
    }

    #[test]
    fn broken_rows_are_refused_as_their_file_is() {
        for (what, edit) in broken() {
            let mut broken = rows();
            edit(&mut broken);
            let (typed, loaded) = both(&broken);
            assert!(typed.is_err(), "{what}: accepted");
            assert_eq!(typed, loaded, "{what}");
        }
    }

    /// Good rows in the forms the fast pass reads on its own paths: the fill's
    /// commission currency taken from its instrument, a closing fill, an unknown
    /// commission, a time in UTC and one with a fraction, several fills of two
    /// instruments, no corporate actions.
    fn good() -> [(&'static str, Edit); 7] {
        [
            ("the rows as they are", |_| {}),
            ("no commission currency", |r| {
                r.fills[0].commission_currency = None;
            }),
            ("a closing fill", |r| r.fills[0].closes = Some(true)),
            ("an unknown commission", |r| {
                r.fills[0].commission = None;
                r.fills[0].commission_known = Some(false);
            }),
            ("times in UTC and with a fraction", |r| {
                r.fills[0].time = "2024-03-04T15:15:00Z".into();
                r.cash[0].time = "2024-01-02T00:00:00.250+01:00".into();
            }),
            ("several fills of two instruments", |r| {
                let mut amd = r.instruments[0].clone();
                amd.symbol = "AMD".into();
                r.instruments.push(amd);
                for (i, symbol) in ["AMD", "NVDA", "AMD"].into_iter().enumerate() {
                    let mut fill = r.fills[0].clone();
                    fill.id = format!("E{}", i + 2);
                    fill.symbol = symbol.into();
                    fill.time = format!("2024-03-0{}T10:15:00-05:00", i + 5);
                    r.fills.push(fill);
                }
            }),
            ("no corporate actions", |r| r.corporate_actions.clear()),
        ]
    }

    #[test]
    fn the_fast_pass_builds_the_book_the_validator_builds() {
        for (what, edit) in good() {
            let mut good = rows();
            edit(&mut good);
            let fast = assemble_rows_fast(&good)
                .unwrap_or_else(|| panic!("{what}: the fast pass refuses good rows"));
            let validated = assemble_rows_validating("book.json", &good)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(fingerprint(&fast), fingerprint(&validated), "{what}");
            let (typed, loaded) = both(&good);
            assert_eq!(typed, loaded, "{what}");
        }
    }

    #[test]
    fn the_fast_pass_leaves_each_broken_row_to_the_validator_and_its_error() {
        for (what, edit) in broken() {
            let mut broken = rows();
            edit(&mut broken);
            assert!(assemble_rows_fast(&broken).is_none(), "{what}: accepted");
            let validated = assemble_rows_validating("book.json", &broken).map(|b| fingerprint(&b));
            assert!(validated.is_err(), "{what}: the validator accepts it");
            assert_eq!(
                assemble_rows("book.json", &broken).map(|b| fingerprint(&b)),
                validated,
                "{what}"
            );
        }
    }
}
