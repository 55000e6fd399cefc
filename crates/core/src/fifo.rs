//! The FIFO lot engine.
//!
//! Each (account, instrument) keeps a queue of open lots, all on one side. A fill in the
//! direction of the position opens a lot; a fill against it closes the oldest lots first
//! and, when larger than the position, closes it and opens a lot the other way (a flip).
//! Commissions are prorated by matched quantity: each closed portion carries its share
//! of the opening fill's commission and of the closing fill's commission. Shares are
//! taken from what remains, so the last portion gets exactly the remainder and no
//! fraction of a commission is lost or counted twice.
//!
//! A lot may carry a P&L **adjustment**: cost moved into it by a corporate action (what a
//! split's rounded price leaves over, a spin-off's allocated cost, an exercised option's
//! premium). It is shared out with the quantity, like a commission, and added to the gross
//! P&L of every portion closed (`docs/methodology/corporate-actions.md`).
//!
//! Closed lots are handed to a callback, never stored: memory is proportional to open
//! lots, not to history. The loop runs on integers: quantities and prices at the scale
//! their instrument's fills use, P&L and commission shares as [`Fixed`] (18 places).

use std::collections::{HashMap, VecDeque};

use chrono::NaiveDate;
use rust_decimal::Decimal;
use serde::Serialize;

use crate::book::{AccountIdx, Fill, InstrumentIdx, Side};
use crate::error::{Error, Result};
use crate::fixed::{self, Fixed};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LotSide {
    Long,
    Short,
}

impl LotSide {
    fn opened_by(side: Side) -> Self {
        match side {
            Side::Buy => Self::Long,
            Side::Sell => Self::Short,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Long => "long",
            Self::Short => "short",
        }
    }
}

/// What remains open of one opening fill. Quantity and price are integers at the
/// queue's scales; the commission is [`Fixed`].
#[derive(Debug, Clone, PartialEq, Eq)]
struct Lot {
    fill: u32,
    quantity: i128,
    price: i128,
    price_decimal: Decimal,
    commission: Fixed,
    /// How much of the opening fill's commission went to earlier portions (closes the
    /// fill made, earlier partial closes of this lot): where this lot's shares start, so
    /// shares rounded cumulatively add up to the fill's commission.
    allocated: Fixed,
    /// Added to the gross P&L when the lot closes (shared with the quantity); zero but
    /// after a corporate action or an option delivery.
    adjustment: Fixed,
    open_date: NaiveDate,
    commission_known: bool,
}

/// An open lot as callers see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenLot {
    /// Index of the opening fill in the replayed slice.
    pub fill: u32,
    /// Unsigned quantity still open.
    pub quantity: Decimal,
    pub price: Decimal,
    /// The opening commission not yet consumed by closes, in the instrument currency.
    pub commission: Decimal,
    /// Added to the gross P&L when the lot closes: the lot's true cost is
    /// `quantity x price x multiplier - adjustment` for a long, its true proceeds
    /// `quantity x price x multiplier + adjustment` for a short.
    pub adjustment: Decimal,
    pub open_date: NaiveDate,
    pub commission_known: bool,
}

/// The open lots of one (account, instrument); empty when flat. Quantities are held at
/// `quantity_scale` places and prices at `price_scale`, the most any fill of the
/// instrument has used so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LotQueue {
    pub side: LotSide,
    lots: VecDeque<Lot>,
    quantity_scale: u32,
    price_scale: u32,
}

fn to_decimal(mantissa: i128, scale: u32) -> Decimal {
    Decimal::try_from_i128_with_scale(mantissa, scale).unwrap_or_else(|_| {
        Fixed::from_scaled(mantissa, scale)
            .unwrap_or_default()
            .to_decimal()
    })
}

/// A lot taken out of its queue as decimals, while a corporate action reshapes it.
#[derive(Debug, Clone)]
struct LooseLot {
    fill: u32,
    quantity: Decimal,
    price: Decimal,
    commission: Fixed,
    allocated: Fixed,
    adjustment: Fixed,
    open_date: NaiveDate,
    commission_known: bool,
}

/// The mantissa of `value` at `scale` places (`scale` at least the value's own).
fn rescale(value: Decimal, scale: u32) -> Result<i128> {
    value
        .mantissa()
        .checked_mul(
            fixed::pow10_checked(scale.saturating_sub(value.scale())).ok_or_else(overflow)?,
        )
        .ok_or_else(overflow)
}

/// Places kept for a price a corporate action divides (what they leave over goes to the
/// lot's adjustment, so no cost is lost).
const ACTION_PRICE_PLACES: u32 = 10;

/// `quantity x price x multiplier` as [`Fixed`].
fn value_of(quantity: Decimal, price: Decimal, multiplier: Decimal) -> Result<Fixed> {
    let scale = quantity.scale() + price.scale() + multiplier.scale();
    fixed::product3(
        price.mantissa(),
        quantity.mantissa(),
        multiplier.mantissa(),
        scale,
    )
    .ok_or_else(overflow)
}

/// `value x num / den` as [`Fixed`], for a ratio given as two decimals.
fn scaled_by(value: Fixed, num: Decimal, den: Decimal) -> Result<Fixed> {
    let (n, ns, d, ds) = (num.mantissa(), num.scale(), den.mantissa(), den.scale());
    // value x (n / 10^ns) / (d / 10^ds) = value x n x 10^ds / (d x 10^ns)
    let n = n.checked_mul(fixed::pow10_checked(ds).ok_or_else(overflow)?);
    let d = d.checked_mul(fixed::pow10_checked(ns).ok_or_else(overflow)?);
    match (n, d) {
        (Some(n), Some(d)) if d != 0 => fixed::mul_div(value.0, n, d)
            .map(Fixed)
            .ok_or_else(overflow),
        _ => Err(overflow()),
    }
}

/// `quantity x new / old`, exact when it has at most 18 places, else rounded to 18.
fn ratio_quantity(quantity: Decimal, new: Decimal, old: Decimal) -> Result<Decimal> {
    quantity
        .checked_mul(new)
        .and_then(|q| q.checked_div(old))
        .map(|q| q.round_dp(fixed::SCALE).normalize())
        .ok_or_else(overflow)
}

/// A price a corporate action divides, to [`ACTION_PRICE_PLACES`] places.
fn action_price(value: Decimal) -> Decimal {
    value
        .round_dp_with_strategy(
            ACTION_PRICE_PLACES,
            rust_decimal::RoundingStrategy::MidpointAwayFromZero,
        )
        .normalize()
}

impl LotQueue {
    const EMPTY: Self = Self {
        side: LotSide::Long,
        lots: VecDeque::new(),
        quantity_scale: 0,
        price_scale: 0,
    };

    pub fn is_empty(&self) -> bool {
        self.lots.is_empty()
    }

    /// The open lots, oldest first.
    pub fn lots(&self) -> impl Iterator<Item = OpenLot> + '_ {
        self.lots.iter().map(|l| OpenLot {
            fill: l.fill,
            quantity: to_decimal(l.quantity, self.quantity_scale),
            price: l.price_decimal,
            commission: l.commission.to_decimal(),
            adjustment: l.adjustment.to_decimal(),
            open_date: l.open_date,
            commission_known: l.commission_known,
        })
    }

    /// +1 for a long, -1 for a short.
    fn sign(&self) -> i128 {
        match self.side {
            LotSide::Long => 1,
            LotSide::Short => -1,
        }
    }

    /// Empties the queue into lots held as decimals, oldest first.
    fn drain(&mut self) -> Vec<LooseLot> {
        let (qs, ps) = (self.quantity_scale, self.price_scale);
        self.lots
            .drain(..)
            .map(|l| LooseLot {
                fill: l.fill,
                quantity: to_decimal(l.quantity, qs),
                price: to_decimal(l.price, ps),
                commission: l.commission,
                allocated: l.allocated,
                adjustment: l.adjustment,
                open_date: l.open_date,
                commission_known: l.commission_known,
            })
            .collect()
    }

    /// Puts lots held as decimals back, keeping the queue ordered by opening (date, then
    /// fill), widening the scales as needed.
    fn refill(&mut self, side: LotSide, mut lots: Vec<LooseLot>) -> Result<()> {
        if lots.is_empty() {
            return Ok(());
        }
        if !self.lots.is_empty() && self.side != side {
            return Err(Error::invalid_argument(
                "a corporate action moves a long into a short (or a short into a long) of the same instrument",
                "book the two positions' netting as trades before the action",
            ));
        }
        self.side = side;
        let qs = lots.iter().map(|l| l.quantity.scale()).max().unwrap_or(0);
        let ps = lots.iter().map(|l| l.price.scale()).max().unwrap_or(0);
        self.widen(qs, ps)?;
        let mut all = self.drain();
        all.append(&mut lots);
        all.sort_by_key(|l| (l.open_date, l.fill));
        let (qs, ps) = (self.quantity_scale, self.price_scale);
        for l in all {
            self.lots.push_back(Lot {
                fill: l.fill,
                quantity: rescale(l.quantity, qs)?,
                price: rescale(l.price, ps)?,
                price_decimal: l.price,
                commission: l.commission,
                allocated: l.allocated,
                adjustment: l.adjustment,
                open_date: l.open_date,
                commission_known: l.commission_known,
            });
        }
        Ok(())
    }

    /// Signed open quantity: negative for a short.
    pub fn signed_quantity(&self) -> Decimal {
        let q: i128 = self.lots.iter().map(|l| l.quantity).sum();
        let q = to_decimal(q, self.quantity_scale);
        match self.side {
            LotSide::Long => q,
            LotSide::Short => -q,
        }
    }

    /// Raises the scales so that a fill with these scales is held exactly.
    fn widen(&mut self, quantity_scale: u32, price_scale: u32) -> Result<()> {
        if quantity_scale > self.quantity_scale {
            let k = fixed::pow10(quantity_scale - self.quantity_scale);
            for lot in &mut self.lots {
                lot.quantity = lot.quantity.checked_mul(k).ok_or_else(overflow)?;
            }
            self.quantity_scale = quantity_scale;
        }
        if price_scale > self.price_scale {
            let k = fixed::pow10(price_scale - self.price_scale);
            for lot in &mut self.lots {
                lot.price = lot.price.checked_mul(k).ok_or_else(overflow)?;
            }
            self.price_scale = price_scale;
        }
        Ok(())
    }
}

/// One closed portion of a lot. P&L is in the instrument currency, at 18 places.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClosedLot {
    pub account: AccountIdx,
    pub instrument: InstrumentIdx,
    pub side: LotSide,
    /// Unsigned quantity matched, at `quantity_scale` places.
    quantity_units: i128,
    quantity_scale: u32,
    pub open_fill: u32,
    pub close_fill: u32,
    pub open_date: NaiveDate,
    pub close_date: NaiveDate,
    pub open_price: Decimal,
    pub close_price: Decimal,
    pub gross_pnl: Fixed,
    /// Opening share plus closing share.
    pub commissions: Fixed,
    /// The opening fill's share, and how much of that fill's commission earlier portions
    /// took (so shares rounded cumulatively, `round(before + share) - round(before)`, add
    /// up exactly to the fill's commission).
    pub open_commission: Fixed,
    pub open_commission_before: Fixed,
    /// The closing fill's share, and how much of its commission earlier lots it closed took.
    pub close_commission: Fixed,
    pub close_commission_before: Fixed,
    pub net_pnl: Fixed,
    /// False when either fill's commission is unknown: the P&L is gross of fees.
    pub commission_known: bool,
}

impl ClosedLot {
    /// Unsigned quantity matched.
    pub fn quantity(&self) -> Decimal {
        to_decimal(self.quantity_units, self.quantity_scale)
    }
}

/// Where each (account, instrument) queue lives: a dense table for the usual book, a map
/// for one with so many accounts and instruments that a table would waste memory.
#[derive(Debug, Clone)]
enum Slots {
    Dense { accounts: usize, instruments: usize },
    Sparse(HashMap<(AccountIdx, InstrumentIdx), usize>),
}

/// Dense tables up to this many (account, instrument) pairs.
const DENSE_MAX: usize = 1 << 16;

/// Open lots of every (account, instrument).
#[derive(Debug, Clone)]
pub struct Fifo {
    slots: Slots,
    queues: Vec<LotQueue>,
    keys: Vec<(AccountIdx, InstrumentIdx)>,
    /// The queues of positions other than an instrument's usual one (a hedging
    /// account's tickets, [`Fill::position`]), by (account, instrument, position).
    positions: HashMap<(AccountIdx, InstrumentIdx, u32), usize>,
}

/// A value of the lots past what [`Fixed`] holds: the book's values are too large
/// (docs/methodology/book-format.md, "Bounds"), never a bug. Callers that know the fill
/// add it (see [`crate::ledger`]).
fn overflow() -> Error {
    crate::bounds::too_large("a value of the FIFO lots")
}

/// A fill's notional, quantity x price x multiplier, as [`Fixed`]: exact for any fill
/// within the book's bounds, whatever digits its values carry.
///
/// # Errors
/// `invalid_book` when it passes the fixed-point range.
pub fn notional(fill: &Fill, multiplier: Decimal) -> Result<Fixed> {
    value_of(fill.quantity, fill.price, multiplier)
}

/// `total x part / whole`, exactly `total` when `part == whole`.
#[inline]
fn share(total: Fixed, part: i128, whole: i128) -> Result<Fixed> {
    if part == whole || total.is_zero() {
        return Ok(if part == whole { total } else { Fixed::ZERO });
    }
    fixed::mul_div(total.0, part, whole)
        .map(Fixed)
        .ok_or_else(overflow)
}

impl Fifo {
    pub fn new(accounts: usize, instruments: usize) -> Self {
        let pairs = accounts.saturating_mul(instruments);
        if pairs > DENSE_MAX {
            return Self {
                slots: Slots::Sparse(HashMap::new()),
                queues: Vec::new(),
                keys: Vec::new(),
                positions: HashMap::new(),
            };
        }
        let keys = (0..accounts)
            .flat_map(|a| (0..instruments).map(move |i| (a, i)))
            .filter_map(|(a, i)| {
                Some((
                    AccountIdx::try_from(a).ok()?,
                    InstrumentIdx::try_from(i).ok()?,
                ))
            })
            .collect();
        Self {
            slots: Slots::Dense {
                accounts,
                instruments,
            },
            queues: vec![LotQueue::EMPTY; pairs],
            keys,
            positions: HashMap::new(),
        }
    }

    /// The queue of one of an instrument's positions other than its usual one.
    fn position_queue_mut(
        &mut self,
        account: AccountIdx,
        instrument: InstrumentIdx,
        position: u32,
    ) -> &mut LotQueue {
        let slot = *self
            .positions
            .entry((account, instrument, position))
            .or_insert_with(|| {
                self.queues.push(LotQueue::EMPTY);
                self.keys.push((account, instrument));
                self.queues.len() - 1
            });
        &mut self.queues[slot]
    }

    fn queue_mut(
        &mut self,
        account: AccountIdx,
        instrument: InstrumentIdx,
    ) -> Option<&mut LotQueue> {
        let slot = match &mut self.slots {
            Slots::Dense {
                accounts,
                instruments,
            } => {
                let (a, i) = (account as usize, instrument as usize);
                if a >= *accounts || i >= *instruments {
                    return None;
                }
                a * *instruments + i
            }
            Slots::Sparse(map) => *map.entry((account, instrument)).or_insert_with(|| {
                self.queues.push(LotQueue::EMPTY);
                self.keys.push((account, instrument));
                self.queues.len() - 1
            }),
        };
        self.queues.get_mut(slot)
    }

    /// Applies one fill. `multiplier` is the instrument's; `commission` is the fill's
    /// commission already in the instrument currency. Closed portions go to `on_close`.
    ///
    /// # Errors
    /// `invalid_book` when a value passes the fixed-point range (`bounds::too_large`); `internal`
    /// when the fill refers to an account or instrument outside the sizes given to [`Fifo::new`].
    pub fn apply(
        &mut self,
        fill_index: u32,
        fill: &Fill,
        multiplier: Decimal,
        commission: Fixed,
        on_close: impl FnMut(&ClosedLot),
    ) -> Result<()> {
        self.apply_adjusted(
            fill_index,
            fill,
            multiplier,
            commission,
            Fixed::ZERO,
            on_close,
        )
        .map(|_| ())
    }

    /// As [`Fifo::apply`], with `adjustment` (a P&L amount in the instrument currency,
    /// such as an exercised option's premium) shared over the fill's quantity like its
    /// commission. Answers the quantity a closing-only fill ([`crate::FillKind::closes_only`])
    /// found no lot for: that part opens nothing.
    ///
    /// # Errors
    /// As [`Fifo::apply`].
    pub fn apply_adjusted(
        &mut self,
        fill_index: u32,
        fill: &Fill,
        multiplier: Decimal,
        commission: Fixed,
        adjustment: Fixed,
        mut on_close: impl FnMut(&ClosedLot),
    ) -> Result<Decimal> {
        let queue = if fill.position == 0 {
            self.queue_mut(fill.account, fill.instrument)
                .ok_or_else(|| {
                    Error::internal(format!("fill {} refers outside the book", fill.id))
                })?
        } else {
            self.position_queue_mut(fill.account, fill.instrument, fill.position)
        };
        queue.widen(fill.quantity.scale(), fill.price.scale())?;
        let (qs, ps) = (queue.quantity_scale, queue.price_scale);
        let quantity = fill
            .quantity
            .mantissa()
            .checked_mul(fixed::pow10(qs - fill.quantity.scale()))
            .ok_or_else(overflow)?;
        let price = fill
            .price
            .mantissa()
            .checked_mul(fixed::pow10(ps - fill.price.scale()))
            .ok_or_else(overflow)?;
        let (mult, mult_scale) = (multiplier.mantissa(), multiplier.scale());
        let value_scale = qs + ps + mult_scale;

        let incoming = LotSide::opened_by(fill.side);
        let mut remaining = quantity;
        let mut remaining_commission = commission;
        let mut remaining_adjustment = adjustment;
        if queue.side != incoming {
            while remaining > 0 {
                let Some(lot) = queue.lots.front_mut() else {
                    break;
                };
                let matched = remaining.min(lot.quantity);
                let open_share = share(lot.commission, matched, lot.quantity)?;
                let close_share = share(remaining_commission, matched, remaining)?;
                let diff = match queue.side {
                    LotSide::Long => price - lot.price,
                    LotSide::Short => lot.price - price,
                };
                let mut gross =
                    fixed::product3(diff, matched, mult, value_scale).ok_or_else(overflow)?;
                let (open_adj, close_adj) =
                    if lot.adjustment.is_zero() && remaining_adjustment.is_zero() {
                        (Fixed::ZERO, Fixed::ZERO)
                    } else {
                        let open_adj = share(lot.adjustment, matched, lot.quantity)?;
                        let close_adj = share(remaining_adjustment, matched, remaining)?;
                        gross = gross
                            .checked_add(open_adj)
                            .and_then(|g| g.checked_add(close_adj))
                            .ok_or_else(overflow)?;
                        (open_adj, close_adj)
                    };
                let commissions = open_share.checked_add(close_share).ok_or_else(overflow)?;
                // A transfer out takes the lot's shares and cost away: nothing realized.
                if fill.kind.realizes() {
                    on_close(&ClosedLot {
                        account: fill.account,
                        instrument: fill.instrument,
                        side: queue.side,
                        quantity_units: matched,
                        quantity_scale: qs,
                        open_fill: lot.fill,
                        close_fill: fill_index,
                        open_date: lot.open_date,
                        close_date: fill.trade_date,
                        open_price: lot.price_decimal,
                        close_price: fill.price,
                        gross_pnl: gross,
                        commissions,
                        open_commission: open_share,
                        open_commission_before: lot.allocated,
                        close_commission: close_share,
                        close_commission_before: Fixed(commission.0 - remaining_commission.0),
                        net_pnl: gross.checked_sub(commissions).ok_or_else(overflow)?,
                        commission_known: lot.commission_known && fill.commission_known,
                    });
                }
                lot.quantity -= matched;
                lot.commission = Fixed(lot.commission.0 - open_share.0);
                lot.allocated = Fixed(lot.allocated.0 + open_share.0);
                lot.adjustment = Fixed(lot.adjustment.0 - open_adj.0);
                remaining -= matched;
                remaining_commission = Fixed(remaining_commission.0 - close_share.0);
                remaining_adjustment = Fixed(remaining_adjustment.0 - close_adj.0);
                if lot.quantity == 0 {
                    queue.lots.pop_front();
                }
            }
        }
        if remaining > 0 {
            if queue.lots.is_empty() {
                queue.side = incoming;
            }
            if fill.kind.closes_only() {
                return Ok(to_decimal(remaining, qs));
            }
            queue.lots.push_back(Lot {
                fill: fill_index,
                quantity: remaining,
                price,
                price_decimal: fill.price,
                commission: remaining_commission,
                allocated: Fixed(commission.0 - remaining_commission.0),
                adjustment: remaining_adjustment,
                open_date: fill.trade_date,
                commission_known: fill.commission_known,
            });
        }
        Ok(Decimal::ZERO)
    }

    fn queue_or_err(
        &mut self,
        account: AccountIdx,
        instrument: InstrumentIdx,
    ) -> Result<&mut LotQueue> {
        self.queue_mut(account, instrument)
            .ok_or_else(|| Error::internal("a corporate action refers outside the book"))
    }

    /// The signed open quantity of (account, instrument): negative for a short.
    pub fn position(&self, account: AccountIdx, instrument: InstrumentIdx) -> Decimal {
        let slot = match &self.slots {
            Slots::Dense {
                accounts,
                instruments,
            } => {
                let (a, i) = (account as usize, instrument as usize);
                (a < *accounts && i < *instruments).then(|| a * *instruments + i)
            }
            Slots::Sparse(map) => map.get(&(account, instrument)).copied(),
        };
        let own = slot
            .and_then(|s| self.queues.get(s))
            .map_or(Decimal::ZERO, LotQueue::signed_quantity);
        // A hedging account's other positions in it count towards its net holding.
        self.positions
            .iter()
            .filter(|((a, i, _), _)| *a == account && *i == instrument)
            .filter_map(|(_, &s)| self.queues.get(s))
            .fold(own, |sum, q| sum + q.signed_quantity())
    }

    /// A split (or reverse split): `new` units for every `old`. Quantities are scaled,
    /// prices divided; the cost of every lot is carried whole (what the rounded price
    /// leaves over goes to its adjustment), so nothing is realized.
    ///
    /// # Errors
    /// `invalid_book` on overflow; `internal` for an index outside the book.
    pub fn split(
        &mut self,
        account: AccountIdx,
        instrument: InstrumentIdx,
        new: Decimal,
        old: Decimal,
        multiplier: Decimal,
    ) -> Result<()> {
        self.transfer(
            account,
            instrument,
            instrument,
            (new, old),
            (multiplier, multiplier),
        )
    }

    /// Moves the lots of `from` into `to` (a stock merger, a symbol change), `new` units of
    /// `to` for every `old` of `from`, each lot keeping its opening date and whole cost.
    /// `multipliers` are `from`'s and `to`'s.
    ///
    /// # Errors
    /// `invalid_argument` when `to` holds the other side already; `invalid_book` on overflow.
    pub fn transfer(
        &mut self,
        account: AccountIdx,
        from: InstrumentIdx,
        to: InstrumentIdx,
        (new, old): (Decimal, Decimal),
        (m_from, m_to): (Decimal, Decimal),
    ) -> Result<()> {
        let queue = self.queue_or_err(account, from)?;
        if queue.is_empty() {
            return Ok(());
        }
        let (side, sign) = (queue.side, queue.sign());
        let lots = queue.drain();
        let mut moved = Vec::with_capacity(lots.len());
        for mut l in lots {
            let quantity = ratio_quantity(l.quantity, new, old)?;
            if quantity.is_zero() {
                continue;
            }
            let price = l
                .price
                .checked_mul(old)
                .and_then(|p| p.checked_mul(m_from))
                .and_then(|p| p.checked_div(new))
                .and_then(|p| p.checked_div(m_to))
                .map(action_price)
                .ok_or_else(overflow)?;
            let before = value_of(l.quantity, l.price, m_from)?;
            let after = value_of(quantity, price, m_to)?;
            let moved_by = after.checked_sub(before).ok_or_else(overflow)?;
            l.adjustment = Fixed(l.adjustment.0 + sign * moved_by.0);
            l.quantity = quantity;
            l.price = price;
            moved.push(l);
        }
        self.queue_or_err(account, to)?.refill(side, moved)
    }

    /// A spin-off: the holder keeps its lots of `parent` and gets `new` of `child` for
    /// every `old`, each child lot opened on its parent lot's date with `fraction` of that
    /// lot's cost, its unconsumed opening commission included; the parent lot keeps the
    /// rest (docs/methodology/corporate-actions.md). The child's commission share comes
    /// after the parent's in the opening fill's commission, so the shares of both,
    /// rounded cumulatively, still add up to the fill's commission.
    ///
    /// # Errors
    /// As [`Fifo::transfer`].
    pub fn spin_off(
        &mut self,
        account: AccountIdx,
        (parent, child): (InstrumentIdx, InstrumentIdx),
        (new, old): (Decimal, Decimal),
        fraction: Decimal,
        (m_parent, m_child): (Decimal, Decimal),
    ) -> Result<()> {
        let queue = self.queue_or_err(account, parent)?;
        if queue.is_empty() {
            return Ok(());
        }
        let (side, sign) = (queue.side, queue.sign());
        let lots = queue.drain();
        let mut kept = Vec::with_capacity(lots.len());
        let mut born = Vec::with_capacity(lots.len());
        for mut l in lots {
            let value = value_of(l.quantity, l.price, m_parent)?;
            let cost = Fixed(value.0 - sign * l.adjustment.0);
            let allocated = scaled_by(cost, fraction, Decimal::ONE)?;
            let quantity = ratio_quantity(l.quantity, new, old)?;
            if !quantity.is_zero() {
                let price = allocated
                    .to_decimal()
                    .checked_div(quantity)
                    .and_then(|p| p.checked_div(m_child))
                    .map(action_price)
                    .ok_or_else(overflow)?;
                let child_value = value_of(quantity, price, m_child)?;
                let child_commission = scaled_by(l.commission, fraction, Decimal::ONE)?;
                l.commission = Fixed(l.commission.0 - child_commission.0);
                born.push(LooseLot {
                    fill: l.fill,
                    quantity,
                    price,
                    commission: child_commission,
                    allocated: Fixed(l.allocated.0 + l.commission.0),
                    adjustment: Fixed(sign * (child_value.0 - allocated.0)),
                    open_date: l.open_date,
                    commission_known: l.commission_known,
                });
                l.adjustment = Fixed(l.adjustment.0 + sign * allocated.0);
            }
            kept.push(l);
        }
        self.queue_or_err(account, parent)?.refill(side, kept)?;
        self.queue_or_err(account, child)?.refill(side, born)
    }

    /// Takes up to `quantity` (all when `None`) of the oldest lots out without realizing
    /// them, for an exercised or assigned option whose value moves into the delivered
    /// stock trade. Answers what the lots would have realized at a price of zero (the
    /// premium: negative for a long, positive for a short, with any adjustment), their
    /// unconsumed commission, and the quantity taken.
    ///
    /// # Errors
    /// `invalid_book` on overflow; `internal` for an index outside the book.
    pub fn take_at_zero(
        &mut self,
        account: AccountIdx,
        instrument: InstrumentIdx,
        quantity: Option<Decimal>,
        multiplier: Decimal,
    ) -> Result<(Fixed, Fixed, Decimal)> {
        let queue = self.queue_or_err(account, instrument)?;
        if queue.is_empty() {
            return Ok((Fixed::ZERO, Fixed::ZERO, Decimal::ZERO));
        }
        let (side, sign) = (queue.side, queue.sign());
        let lots = queue.drain();
        let mut want = quantity.unwrap_or(Decimal::MAX);
        let (mut value, mut commission, mut taken) = (Fixed::ZERO, Fixed::ZERO, Decimal::ZERO);
        let mut kept = Vec::with_capacity(lots.len());
        for mut l in lots {
            if want <= Decimal::ZERO {
                kept.push(l);
                continue;
            }
            let take = want.min(l.quantity);
            let (adj, comm) = if take == l.quantity {
                (l.adjustment, l.commission)
            } else {
                (
                    scaled_by(l.adjustment, take, l.quantity)?,
                    scaled_by(l.commission, take, l.quantity)?,
                )
            };
            let premium = value_of(take, l.price, multiplier)?;
            value = Fixed(value.0 - sign * premium.0 + adj.0);
            commission = Fixed(commission.0 + comm.0);
            taken += take;
            want -= take;
            l.quantity -= take;
            l.adjustment = Fixed(l.adjustment.0 - adj.0);
            l.commission = Fixed(l.commission.0 - comm.0);
            l.allocated = Fixed(l.allocated.0 + comm.0);
            if !l.quantity.is_zero() {
                kept.push(l);
            }
        }
        self.queue_or_err(account, instrument)?.refill(side, kept)?;
        Ok((value, commission, taken))
    }

    /// Every non-flat (account, instrument) with its lots (in index order for the usual,
    /// dense book; callers that need an order sort).
    pub fn open_positions(&self) -> impl Iterator<Item = (AccountIdx, InstrumentIdx, &LotQueue)> {
        self.queues
            .iter()
            .zip(&self.keys)
            .filter(|(q, _)| !q.lots.is_empty())
            .map(|(q, &(a, i))| (a, i, q))
    }

    /// Number of lots currently open, over every position.
    pub fn open_lot_count(&self) -> usize {
        self.queues.iter().map(|q| q.lots.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use chrono::DateTime;
    use rust_decimal_macros::dec;

    use super::*;
    use crate::currency::Currency;

    fn fill(i: u32, side: Side, qty: Decimal, price: Decimal, commission: Decimal) -> Fill {
        let time =
            DateTime::parse_from_rfc3339(&format!("2026-01-{:02}T10:00:00-05:00", i + 1)).unwrap();
        Fill {
            id: format!("F{i}").into(),
            account: 0,
            instrument: 0,
            side,
            quantity: qty,
            price,
            commission,
            commission_currency: Currency::USD,
            commission_known: true,
            trade_date: time.date_naive(),
            time,
            seq: i,
            kind: crate::FillKind::Trade,
            position: 0,
        }
    }

    fn run(fills: &[Fill], multiplier: Decimal) -> (Vec<ClosedLot>, Fifo) {
        let mut fifo = Fifo::new(1, 1);
        let mut closed = Vec::new();
        for (i, f) in fills.iter().enumerate() {
            fifo.apply(
                u32::try_from(i).unwrap(),
                f,
                multiplier,
                Fixed::from_decimal(f.commission).unwrap(),
                |c| closed.push(c.clone()),
            )
            .unwrap();
        }
        (closed, fifo)
    }

    #[test]
    fn a_transfer_out_takes_the_first_lots_at_their_cost_and_realizes_nothing() {
        let out = Fill {
            kind: crate::FillKind::TransferOut,
            ..fill(2, Sell, dec!(12), dec!(0), dec!(0))
        };
        let fills = [
            fill(0, Buy, dec!(10), dec!(100), dec!(1)),
            fill(1, Buy, dec!(5), dec!(120), dec!(0)),
            out,
        ];
        let (closed, fifo) = run(&fills, Decimal::ONE);
        assert!(closed.is_empty(), "{closed:?}");
        let (_, _, queue) = fifo.open_positions().next().unwrap();
        let lots: Vec<OpenLot> = queue.lots().collect();
        assert_eq!(lots.len(), 1);
        assert_eq!((lots[0].quantity, lots[0].price), (dec!(3), dec!(120)));
        // More out than held: the rest opens nothing.
        let more = Fill {
            kind: crate::FillKind::TransferOut,
            ..fill(3, Sell, dec!(15), dec!(0), dec!(0))
        };
        let (closed, fifo) = run(&[fills[0].clone(), more], Decimal::ONE);
        assert!(closed.is_empty());
        assert_eq!(fifo.position(0, 0), Decimal::ZERO);
    }

    #[test]
    fn positions_of_one_instrument_match_within_themselves_never_across() {
        // A hedging account: ticket 1 buys 2 at 100, ticket 2 sells 1 at 110, ticket 1
        // closes 1 at 120. Netted, the sell would close ticket 1's lot at 110.
        let at = |i, side, q: Decimal, p: Decimal, position| Fill {
            position,
            ..fill(i, side, q, p, Decimal::ZERO)
        };
        let fills = [
            at(0, Side::Buy, dec!(2), dec!(100), 1),
            at(1, Side::Sell, dec!(1), dec!(110), 2),
            at(2, Side::Sell, dec!(1), dec!(120), 1),
        ];
        let (closed, fifo) = run(&fills, Decimal::ONE);
        assert_eq!(closed.len(), 1);
        assert_eq!((closed[0].open_fill, closed[0].close_fill), (0, 2));
        assert_eq!(closed[0].gross_pnl.to_decimal(), dec!(20));
        // Long 1 (ticket 1) and short 1 (ticket 2): two positions, net flat.
        let open: Vec<Decimal> = fifo
            .open_positions()
            .map(|(_, _, q)| q.signed_quantity())
            .collect();
        assert_eq!(open, vec![dec!(1), dec!(-1)]);
        assert_eq!(fifo.position(0, 0), Decimal::ZERO);
    }

    struct Expected {
        side: LotSide,
        quantity: Decimal,
        open_fill: u32,
        gross: Decimal,
        commissions: Decimal,
    }

    struct TestCase {
        name: &'static str,
        fills: Vec<Fill>,
        multiplier: Decimal,
        closed: Vec<Expected>,
        open_quantity: Decimal,
    }

    use Side::{Buy, Sell};

    #[test]
    fn fifo_table() {
        let cases = vec![
            // TC1: a long opened and closed whole
            TestCase {
                name: "round trip",
                fills: vec![
                    fill(0, Buy, dec!(100), dec!(10), dec!(1)),
                    fill(1, Sell, dec!(100), dec!(12), dec!(1)),
                ],
                multiplier: dec!(1),
                closed: vec![Expected {
                    side: LotSide::Long,
                    quantity: dec!(100),
                    open_fill: 0,
                    gross: dec!(200),
                    commissions: dec!(2),
                }],
                open_quantity: dec!(0),
            },
            // TC2: partial close across two lots, commissions prorated by matched quantity
            TestCase {
                name: "partial close across lots",
                fills: vec![
                    fill(0, Buy, dec!(100), dec!(10), dec!(1)),
                    fill(1, Buy, dec!(50), dec!(11), dec!(2)),
                    fill(2, Sell, dec!(120), dec!(12), dec!(3)),
                ],
                multiplier: dec!(1),
                closed: vec![
                    // 100 of lot 0: open share 1, close share 3*100/120 = 2.5
                    Expected {
                        side: LotSide::Long,
                        quantity: dec!(100),
                        open_fill: 0,
                        gross: dec!(200),
                        commissions: dec!(3.5),
                    },
                    // 20 of lot 1: open share 2*20/50 = 0.8, close share the remaining 0.5
                    Expected {
                        side: LotSide::Long,
                        quantity: dec!(20),
                        open_fill: 1,
                        gross: dec!(20),
                        commissions: dec!(1.3),
                    },
                ],
                open_quantity: dec!(30),
            },
            // TC3: a short, sell to open and buy to close
            TestCase {
                name: "short",
                fills: vec![
                    fill(0, Sell, dec!(10), dec!(50), dec!(1)),
                    fill(1, Buy, dec!(4), dec!(45), dec!(1)),
                ],
                multiplier: dec!(1),
                closed: vec![Expected {
                    side: LotSide::Short,
                    quantity: dec!(4),
                    open_fill: 0,
                    gross: dec!(20),
                    commissions: dec!(1.4),
                }],
                open_quantity: dec!(-6),
            },
            // TC4: a long that one sell flips short; the closing commission splits 100:50
            TestCase {
                name: "flip",
                fills: vec![
                    fill(0, Buy, dec!(100), dec!(10), dec!(3)),
                    fill(1, Sell, dec!(150), dec!(9), dec!(1.5)),
                    fill(2, Buy, dec!(50), dec!(8), dec!(0)),
                ],
                multiplier: dec!(1),
                closed: vec![
                    Expected {
                        side: LotSide::Long,
                        quantity: dec!(100),
                        open_fill: 0,
                        gross: dec!(-100),
                        commissions: dec!(4),
                    },
                    Expected {
                        side: LotSide::Short,
                        quantity: dec!(50),
                        open_fill: 1,
                        gross: dec!(50),
                        commissions: dec!(0.5),
                    },
                ],
                open_quantity: dec!(0),
            },
            // TC5: a multiplier scales gross P&L, not commissions
            TestCase {
                name: "future",
                fills: vec![
                    fill(0, Buy, dec!(2), dec!(5000), dec!(2.5)),
                    fill(1, Sell, dec!(1), dec!(5010.25), dec!(2.5)),
                ],
                multiplier: dec!(50),
                closed: vec![Expected {
                    side: LotSide::Long,
                    quantity: dec!(1),
                    open_fill: 0,
                    gross: dec!(512.5),
                    commissions: dec!(3.75),
                }],
                open_quantity: dec!(1),
            },
            // TC6: fractional quantities with a commission that does not divide evenly
            TestCase {
                name: "thirds",
                fills: vec![
                    fill(0, Buy, dec!(3), dec!(1), dec!(1)),
                    fill(1, Sell, dec!(1), dec!(2), dec!(0)),
                    fill(2, Sell, dec!(1), dec!(2), dec!(0)),
                    fill(3, Sell, dec!(1), dec!(2), dec!(0)),
                ],
                multiplier: dec!(1),
                closed: vec![
                    Expected {
                        side: LotSide::Long,
                        quantity: dec!(1),
                        open_fill: 0,
                        gross: dec!(1),
                        commissions: dec!(0.333333333333333333),
                    },
                    Expected {
                        side: LotSide::Long,
                        quantity: dec!(1),
                        open_fill: 0,
                        gross: dec!(1),
                        commissions: dec!(0.333333333333333334),
                    },
                    Expected {
                        side: LotSide::Long,
                        quantity: dec!(1),
                        open_fill: 0,
                        gross: dec!(1),
                        // 1 - 0.333333333333333333 - 0.333333333333333334: the remainder
                        commissions: dec!(0.333333333333333333),
                    },
                ],
                open_quantity: dec!(0),
            },
        ];
        for case in cases {
            let (closed, fifo) = run(&case.fills, case.multiplier);
            assert_eq!(closed.len(), case.closed.len(), "{}", case.name);
            for (got, want) in closed.iter().zip(&case.closed) {
                assert_eq!(got.side, want.side, "{}", case.name);
                assert_eq!(got.quantity(), want.quantity, "{}", case.name);
                assert_eq!(got.open_fill, want.open_fill, "{}", case.name);
                assert_eq!(got.gross_pnl.to_decimal(), want.gross, "{}", case.name);
                assert_eq!(
                    got.commissions.to_decimal(),
                    want.commissions,
                    "{}",
                    case.name
                );
                assert_eq!(
                    got.net_pnl.0,
                    got.gross_pnl.0 - got.commissions.0,
                    "{}",
                    case.name
                );
            }
            let open: Decimal = fifo
                .open_positions()
                .map(|(_, _, q)| q.signed_quantity())
                .sum();
            assert_eq!(open, case.open_quantity, "{}", case.name);
            let total_commission: Decimal = case.fills.iter().map(|f| f.commission).sum();
            let consumed: Decimal = closed.iter().map(|c| c.commissions.to_decimal()).sum();
            let unconsumed: Decimal = fifo
                .open_positions()
                .flat_map(|(_, _, q)| q.lots().map(|l| l.commission))
                .sum();
            assert_eq!(
                consumed + unconsumed,
                total_commission,
                "{}: commission conserved",
                case.name
            );
        }
    }

    #[test]
    fn flipped_lot_keeps_its_share_of_the_commission() {
        let fills = [
            fill(0, Buy, dec!(100), dec!(10), dec!(3)),
            fill(1, Sell, dec!(150), dec!(9), dec!(1.5)),
        ];
        let (_, fifo) = run(&fills, dec!(1));
        let (_, _, queue) = fifo.open_positions().next().unwrap();
        assert_eq!(queue.side, LotSide::Short);
        let lot = queue.lots().next().unwrap();
        assert_eq!(lot.quantity, dec!(50));
        assert_eq!(lot.commission, dec!(0.5));
        assert_eq!(lot.fill, 1);
    }

    #[test]
    fn unknown_commission_marks_the_closed_lot() {
        let mut open = fill(0, Buy, dec!(100), dec!(10), dec!(0));
        open.commission_known = false;
        let (closed, _) = run(
            &[open, fill(1, Sell, dec!(100), dec!(11), dec!(1))],
            dec!(1),
        );
        assert!(!closed[0].commission_known);
    }
}
