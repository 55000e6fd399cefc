//! The normalized data model: what every broker adapter produces and every tool reads.
//! Accounts and instruments are referred to by index, so the hot loops compare integers.

use chrono::{DateTime, FixedOffset, NaiveDate};
use rust_decimal::Decimal;
use serde::Serialize;

use crate::actions::CorporateAction;
use crate::currency::Currency;
use crate::fx::{FxQuote, FxTable};
use crate::instrument::{Instrument, InstrumentKey};

/// Index of an account in [`Book::accounts`].
pub type AccountIdx = u32;
/// Index of an instrument in [`Book::instruments`].
pub type InstrumentIdx = u32;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Book,
    Paper,
    Live,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Book => "book",
            Self::Paper => "paper",
            Self::Live => "live",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    pub id: String,
    /// Lower-case vendor name (`ibkr`, `moomoo`, ...): what tools report and filter on.
    pub broker: String,
    pub currency: Currency,
    pub name: Option<String>,
    pub mode: Mode,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    Buy,
    Sell,
}

impl Side {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Buy => "buy",
            Self::Sell => "sell",
        }
    }
}

/// Where a fill comes from, and so how the replay treats it (`docs/methodology/book-format.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FillKind {
    /// An execution: opens or closes lots, and may flip a position.
    #[default]
    Trade,
    /// An execution the broker marks as closing (Flex `C`, MetaTrader 5 `entry_out`): it
    /// closes lots and never opens the other way; what finds no lot to close is reported
    /// as an unexplained close.
    Close,
    /// A position held when the history starts: opens lots at the broker's cost and
    /// moves no cash (the opening cash already holds it).
    Opening,
    /// Made from a corporate action or option event (a cash merger, a tender, cash in
    /// lieu, an expiry): closes lots like a [`FillKind::Close`] and moves cash.
    Action,
    /// Shares that left the account without a sale (a transfer or journal out): takes
    /// them off the lots first in, first out, each lot's cost leaving with its shares. It
    /// realizes nothing and moves no cash; its price is the broker's figure for the
    /// transfer, never used for P&L (docs/methodology/realized-pnl.md).
    TransferOut,
}

impl FillKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Trade => "trade",
            Self::Close => "close",
            Self::Opening => "opening",
            Self::Action => "action",
            Self::TransferOut => "transfer_out",
        }
    }

    /// Whether the fill only closes: its unmatched part opens nothing.
    pub fn closes_only(self) -> bool {
        matches!(self, Self::Close | Self::Action | Self::TransferOut)
    }

    /// Whether the fill moves cash (all but opening positions).
    pub fn moves_cash(self) -> bool {
        !matches!(self, Self::Opening | Self::TransferOut)
    }

    /// Whether the lots it takes off realize P&L (all but a transfer out).
    pub fn realizes(self) -> bool {
        !matches!(self, Self::TransferOut)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fill {
    /// The broker's id, once in the book; short ones kept in the fill (`FillId`).
    pub id: crate::FillId,
    pub account: AccountIdx,
    pub instrument: InstrumentIdx,
    pub side: Side,
    /// Always > 0.
    pub quantity: Decimal,
    pub price: Decimal,
    /// In `commission_currency`; zero when not known.
    pub commission: Decimal,
    pub commission_currency: Currency,
    /// False where the broker reports no fees (Moomoo/Bursa deals): P&L is gross of fees.
    pub commission_known: bool,
    pub time: DateTime<FixedOffset>,
    /// The calendar date of `time` in its own offset.
    pub trade_date: NaiveDate,
    /// Position in the source (file order), the tie-break for equal instants.
    pub seq: u32,
    pub kind: FillKind,
    /// The position the fill belongs to within its (account, instrument): 0 for the
    /// usual one position, else the broker's own position id (a MetaTrader hedging
    /// account's ticket). Lots are matched first in, first out within one position,
    /// never across two (docs/methodology/realized-pnl.md).
    pub position: u32,
}

/// What a fill tradedesk makes itself is made of (a position held when the history
/// starts, the settlement of a corporate action): no commission, dated by its time.
#[derive(Debug, Clone)]
pub struct MadeFill {
    pub id: String,
    pub account: AccountIdx,
    pub instrument: InstrumentIdx,
    pub side: Side,
    pub quantity: Decimal,
    pub price: Decimal,
    /// The instrument's currency (the commission is zero in it).
    pub currency: Currency,
    pub time: DateTime<FixedOffset>,
    pub kind: FillKind,
    /// False where the price is not the broker's cost (fees unknown).
    pub commission_known: bool,
    pub seq: u32,
}

impl From<MadeFill> for Fill {
    fn from(m: MadeFill) -> Self {
        Self {
            id: m.id.into(),
            account: m.account,
            instrument: m.instrument,
            side: m.side,
            quantity: m.quantity,
            price: m.price,
            commission: Decimal::ZERO,
            commission_currency: m.currency,
            commission_known: m.commission_known,
            trade_date: m.time.date_naive(),
            time: m.time,
            seq: m.seq,
            kind: m.kind,
            position: 0,
        }
    }
}

/// An open position as the broker itself lists it by its own id (a MetaTrader ticket):
/// what a hedging account holds apart, shown under its instrument's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerTicket {
    pub account: AccountIdx,
    pub instrument: InstrumentIdx,
    pub ticket: String,
    pub side: Side,
    /// Unsigned, in the broker's units (lots).
    pub quantity: Decimal,
    pub open_price: Decimal,
    pub open_time: Option<DateTime<FixedOffset>>,
    pub stop_loss: Option<Decimal>,
    pub take_profit: Option<Decimal>,
    /// Swap, commission and profit as the broker states them, in the account's currency.
    pub swap: Decimal,
    pub commission: Decimal,
    pub profit: Decimal,
    pub magic: Option<i64>,
    pub comment: String,
}

impl BrokerTicket {
    /// The ticket's quantity, negative for a sell.
    pub fn signed_quantity(&self) -> Decimal {
        match self.side {
            Side::Buy => self.quantity,
            Side::Sell => -self.quantity,
        }
    }
}

/// How an account holds positions: one per instrument (netting) or one per ticket
/// (hedging, where a buy and a sell of one symbol stay open side by side).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MarginMode {
    Netting,
    Hedging,
}

impl MarginMode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Netting => "netting",
            Self::Hedging => "hedging",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CashKind {
    Deposit,
    Withdrawal,
    Dividend,
    Interest,
    Fee,
    /// Tax withheld (negative) or refunded (positive): withholding on dividends and
    /// interest, and its reclaims.
    Tax,
}

impl CashKind {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "deposit" => Some(Self::Deposit),
            "withdrawal" => Some(Self::Withdrawal),
            "dividend" => Some(Self::Dividend),
            "interest" => Some(Self::Interest),
            "fee" => Some(Self::Fee),
            "tax" => Some(Self::Tax),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CashEntry {
    pub account: AccountIdx,
    pub kind: CashKind,
    /// Signed as seen by the account.
    pub amount: Decimal,
    pub currency: Currency,
    pub time: DateTime<FixedOffset>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportedPosition {
    pub account: AccountIdx,
    pub instrument: InstrumentIdx,
    /// Signed: negative for a short.
    pub quantity: Decimal,
}

/// An instrument whose contract size (multiplier) or profit currency its source could not
/// state: the book carries the figure assumed, and every answer on a position or lot of
/// the instrument says so (never a silent 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownSpec {
    pub instrument: InstrumentIdx,
    /// What is not known and what was assumed instead, e.g. "contract size not stated by
    /// the EA: 1 assumed, profit in the account currency".
    pub detail: String,
    /// How to state it, e.g. the config key.
    pub fix: String,
}

/// Closing prices per instrument, sorted by date.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Marks {
    by_instrument: Vec<Vec<(NaiveDate, Decimal)>>,
}

impl Marks {
    pub fn new(
        instrument_count: usize,
        marks: impl IntoIterator<Item = (InstrumentIdx, NaiveDate, Decimal)>,
    ) -> Self {
        let mut by_instrument = vec![Vec::new(); instrument_count];
        for (i, date, price) in marks {
            if let Some(series) = by_instrument.get_mut(i as usize) {
                series.push((date, price));
            }
        }
        for series in &mut by_instrument {
            series.sort_by_key(|(date, _)| *date);
        }
        Self { by_instrument }
    }

    /// Every mark of an instrument, oldest first.
    pub fn series(&self, instrument: InstrumentIdx) -> &[(NaiveDate, Decimal)] {
        self.by_instrument
            .get(instrument as usize)
            .map_or(&[], Vec::as_slice)
    }

    /// The latest mark on or before `on`, with its date.
    pub fn latest(&self, instrument: InstrumentIdx, on: NaiveDate) -> Option<(NaiveDate, Decimal)> {
        let series = self.by_instrument.get(instrument as usize)?;
        let n = series.partition_point(|(date, _)| *date <= on);
        n.checked_sub(1).map(|i| series[i])
    }
}

/// A brokerage history: the in-memory form of a `tradedesk-book/1` file, or of what the
/// live adapters fetched.
#[derive(Debug, Clone)]
pub struct Book {
    pub base_currency: Currency,
    pub as_of: NaiveDate,
    pub accounts: Vec<Account>,
    pub instruments: Vec<Instrument>,
    /// In replay order: by instant, then `seq`.
    pub fills: Vec<Fill>,
    pub cash: Vec<CashEntry>,
    pub marks: Marks,
    pub fx: FxTable,
    pub reported_positions: Vec<ReportedPosition>,
    /// By date, then source order; paying ones are settled by fills of kind
    /// [`FillKind::Action`] (see [`Book::action_fills`]).
    pub corporate_actions: Vec<CorporateAction>,
    /// Per corporate action: the index of the fill that settles it, for those that pay out
    /// and found a holding.
    pub action_fills: Vec<Option<u32>>,
    /// Caveats from the source (an adapter's): what it could not see or had to assume.
    pub notes: Vec<String>,
    /// Instruments whose contract size or profit currency is assumed, at most one entry
    /// per instrument.
    pub unknown_specs: Vec<UnknownSpec>,
    /// Open positions by the broker's own ids, where the broker lists them so.
    pub tickets: Vec<BrokerTicket>,
    /// Accounts whose broker says how they hold positions.
    pub margin_modes: Vec<(AccountIdx, MarginMode)>,
}

/// The parts a book is assembled from; every index already checked by the caller.
#[derive(Debug, Clone)]
pub struct BookParts {
    pub base_currency: Currency,
    pub as_of: NaiveDate,
    pub accounts: Vec<Account>,
    pub instruments: Vec<Instrument>,
    /// In any order: assembling sorts them into replay order.
    pub fills: Vec<Fill>,
    pub cash: Vec<CashEntry>,
    pub marks: Vec<(InstrumentIdx, NaiveDate, Decimal)>,
    pub fx_rates: Vec<FxQuote>,
    pub reported_positions: Vec<ReportedPosition>,
    /// In any order; fills of kind [`FillKind::Action`] are made for them on assembly and
    /// must not be given.
    pub corporate_actions: Vec<CorporateAction>,
    /// Caveats from the source, carried into every answer built on the book.
    pub notes: Vec<String>,
    /// Instruments whose contract size or profit currency is assumed.
    pub unknown_specs: Vec<UnknownSpec>,
    /// Open positions by the broker's own ids (empty where the broker has none).
    pub tickets: Vec<BrokerTicket>,
    /// Accounts whose broker says whether they net or hedge.
    pub margin_modes: Vec<(AccountIdx, MarginMode)>,
}

impl Book {
    /// Puts the fills into replay order (by instant, then source order) and indexes the
    /// marks and rates.
    pub fn assemble(parts: BookParts) -> Self {
        let BookParts {
            base_currency,
            as_of,
            accounts,
            instruments,
            mut fills,
            cash,
            marks,
            fx_rates,
            reported_positions,
            mut corporate_actions,
            notes,
            mut unknown_specs,
            tickets,
            margin_modes,
        } = parts;
        unknown_specs.sort_by_key(|u| u.instrument);
        unknown_specs.dedup_by_key(|u| u.instrument);
        fills.retain(|f| f.kind != FillKind::Action);
        fills.sort_by(|a, b| a.time.cmp(&b.time).then(a.seq.cmp(&b.seq)));
        corporate_actions.sort_by_key(|a| a.date);
        let action_count = corporate_actions.len();
        let mut book = Self {
            base_currency,
            as_of,
            marks: Marks::new(instruments.len(), marks),
            fx: FxTable::new(base_currency, fx_rates),
            accounts,
            instruments,
            fills,
            cash,
            reported_positions,
            corporate_actions,
            action_fills: vec![None; action_count],
            notes,
            unknown_specs,
            tickets,
            margin_modes,
        };
        if action_count > 0 {
            crate::ledger::settle_actions(&mut book);
        }
        book
    }

    /// Points each exercise's and assignment's delivered fill at its index.
    pub(crate) fn index_deliveries(&mut self) {
        use crate::actions::ActionKind;
        let ids: std::collections::HashMap<&str, u32> = self
            .fills
            .iter()
            .enumerate()
            .filter_map(|(i, f)| Some((f.id.as_str(), u32::try_from(i).ok()?)))
            .collect();
        let mut found = Vec::with_capacity(self.corporate_actions.len());
        for action in &self.corporate_actions {
            found.push(match &action.kind {
                ActionKind::Exercise { fill, .. } | ActionKind::Assignment { fill, .. } => {
                    ids.get(fill.id.as_str()).copied()
                }
                _ => None,
            });
        }
        for (action, index) in self.corporate_actions.iter_mut().zip(found) {
            if let ActionKind::Exercise { fill, .. } | ActionKind::Assignment { fill, .. } =
                &mut action.kind
            {
                fill.index = index;
            }
        }
    }

    /// The parts this book was assembled from (fills in replay order): what an adapter
    /// extends when it merges a second source into a book.
    pub fn to_parts(&self) -> BookParts {
        BookParts {
            base_currency: self.base_currency,
            as_of: self.as_of,
            accounts: self.accounts.clone(),
            instruments: self.instruments.clone(),
            fills: self.fills.clone(),
            cash: self.cash.clone(),
            marks: (0..self.instruments.len())
                .filter_map(|i| InstrumentIdx::try_from(i).ok())
                .flat_map(|i| self.marks.series(i).iter().map(move |(d, p)| (i, *d, *p)))
                .collect(),
            fx_rates: self.fx.all_quotes(),
            reported_positions: self.reported_positions.clone(),
            corporate_actions: self.corporate_actions.clone(),
            notes: self.notes.clone(),
            unknown_specs: self.unknown_specs.clone(),
            tickets: self.tickets.clone(),
            margin_modes: self.margin_modes.clone(),
        }
    }

    pub fn account(&self, idx: AccountIdx) -> &Account {
        &self.accounts[idx as usize]
    }

    pub fn instrument(&self, idx: InstrumentIdx) -> &Instrument {
        &self.instruments[idx as usize]
    }

    /// What is assumed about the instrument's contract size or profit currency, if anything.
    pub fn unknown_spec(&self, idx: InstrumentIdx) -> Option<&UnknownSpec> {
        self.unknown_specs
            .binary_search_by_key(&idx, |u| u.instrument)
            .ok()
            .map(|i| &self.unknown_specs[i])
    }

    pub fn instrument_index(&self, key: &InstrumentKey) -> Option<InstrumentIdx> {
        self.instruments
            .iter()
            .position(|i| &i.key == key)
            .and_then(|i| InstrumentIdx::try_from(i).ok())
    }

    /// How the account holds positions, where its broker says.
    pub fn margin_mode(&self, account: AccountIdx) -> Option<MarginMode> {
        self.margin_modes
            .iter()
            .find(|(a, _)| *a == account)
            .map(|(_, m)| *m)
    }

    pub fn account_index(&self, id: &str) -> Option<AccountIdx> {
        self.accounts
            .iter()
            .position(|a| a.id == id)
            .and_then(|i| AccountIdx::try_from(i).ok())
    }
}
