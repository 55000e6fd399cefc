//! Corporate actions and option events: what changes a holding without a trade
//! (`docs/methodology/corporate-actions.md`).
//!
//! Actions that reshape lots (splits, mergers into stock, symbol changes, spin-offs) are
//! applied to the open lots by the replay at their date. Actions that pay cash for a
//! holding (cash mergers and tenders, cash in lieu of fractions, expiries at zero) are
//! turned into closing fills of kind [`crate::FillKind::Action`] when the book is
//! assembled, so their proceeds and realized P&L appear as any trade's do. Exercise and
//! assignment take the option's lots out unrealized and move their value into the
//! delivered stock trade.

use chrono::NaiveDate;
use rust_decimal::Decimal;

use crate::book::{AccountIdx, InstrumentIdx};

/// What happened to the holding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ActionKind {
    /// `new` units for every `old`: a 2-for-1 split is 2 for 1, a 1-for-25 reverse split
    /// 1 for 25.
    Split { new: Decimal, old: Decimal },
    /// The holding becomes `new` units of `into` for every `old`, cost carried whole.
    StockMerger {
        into: InstrumentIdx,
        new: Decimal,
        old: Decimal,
    },
    /// The instrument is known by another symbol or identifier from the date on.
    SymbolChange { into: InstrumentIdx },
    /// The holding (or `quantity` of it, for a partial tender) is bought for
    /// `cash_per_unit` in the instrument's currency.
    CashMerger {
        cash_per_unit: Decimal,
        quantity: Option<Decimal>,
    },
    /// `new` units of `child` for every `old` held, with `cost_fraction` of each lot's cost.
    SpinOff {
        child: InstrumentIdx,
        new: Decimal,
        old: Decimal,
        cost_fraction: Decimal,
    },
    /// `quantity` units (a fraction left by a split) paid out as `amount`.
    CashInLieu { quantity: Decimal, amount: Decimal },
    /// An option (or the `quantity` of contracts given) expires worthless.
    Expiry { quantity: Option<Decimal> },
    /// A long option exercised, delivering the stock trade `fill`.
    Exercise {
        quantity: Option<Decimal>,
        fill: FillRef,
    },
    /// A short option assigned, delivering the stock trade `fill`.
    Assignment {
        quantity: Option<Decimal>,
        fill: FillRef,
    },
}

impl ActionKind {
    /// The name used in the book file.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Split { .. } => "split",
            Self::StockMerger { .. } => "stock_merger",
            Self::SymbolChange { .. } => "symbol_change",
            Self::CashMerger { .. } => "cash_merger",
            Self::SpinOff { .. } => "spin_off",
            Self::CashInLieu { .. } => "cash_in_lieu",
            Self::Expiry { .. } => "expiry",
            Self::Exercise { .. } => "exercise",
            Self::Assignment { .. } => "assignment",
        }
    }

    /// Whether the action is settled by a closing fill made when the book is assembled.
    pub fn pays_out(&self) -> bool {
        matches!(
            self,
            Self::CashMerger { .. } | Self::CashInLieu { .. } | Self::Expiry { .. }
        )
    }
}

/// The stock trade an exercise or assignment delivered: its id, and its index in the
/// book's fills once the book is assembled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FillRef {
    pub id: String,
    /// `None` until assembled, or when no fill has that id.
    pub index: Option<u32>,
}

impl FillRef {
    pub fn new(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            index: None,
        }
    }
}

/// One corporate action or option event on one account's holding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorporateAction {
    pub id: String,
    pub account: AccountIdx,
    pub instrument: InstrumentIdx,
    /// The effective (ex) date: the action applies before every fill of that trade date.
    pub date: NaiveDate,
    pub kind: ActionKind,
}

impl CorporateAction {
    /// Renumbers every instrument the action names (when books are merged).
    pub fn map_instruments(&mut self, map: impl Fn(InstrumentIdx) -> InstrumentIdx) {
        self.instrument = map(self.instrument);
        match &mut self.kind {
            ActionKind::StockMerger { into, .. } | ActionKind::SymbolChange { into } => {
                *into = map(*into);
            }
            ActionKind::SpinOff { child, .. } => *child = map(*child),
            _ => {}
        }
    }

    /// The id of the closing fill a paying action is settled by.
    pub fn fill_id(&self) -> String {
        format!("action:{}", self.id)
    }
}
