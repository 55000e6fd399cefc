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
//! Closed lots are handed to a callback, never stored: memory is proportional to open
//! lots, not to history.

use std::collections::VecDeque;

use chrono::NaiveDate;
use rust_decimal::Decimal;
use serde::Serialize;

use crate::book::{AccountIdx, Fill, InstrumentIdx, Side};
use crate::error::{Error, Result};

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

/// What remains open of one opening fill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenLot {
    /// Index of the opening fill in the replayed slice.
    pub fill: u32,
    /// Unsigned quantity still open.
    pub quantity: Decimal,
    pub price: Decimal,
    /// The opening commission not yet consumed by closes, in the instrument currency.
    pub commission: Decimal,
    pub open_date: NaiveDate,
    pub commission_known: bool,
}

/// The open lots of one (account, instrument); empty when flat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LotQueue {
    pub side: LotSide,
    pub lots: VecDeque<OpenLot>,
}

impl LotQueue {
    /// Signed open quantity: negative for a short.
    pub fn signed_quantity(&self) -> Decimal {
        let q: Decimal = self.lots.iter().map(|l| l.quantity).sum();
        match self.side {
            LotSide::Long => q,
            LotSide::Short => -q,
        }
    }
}

/// One closed portion of a lot. Money is in the instrument currency at full precision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClosedLot {
    pub account: AccountIdx,
    pub instrument: InstrumentIdx,
    pub side: LotSide,
    /// Unsigned quantity matched.
    pub quantity: Decimal,
    pub open_fill: u32,
    pub close_fill: u32,
    pub open_date: NaiveDate,
    pub close_date: NaiveDate,
    pub open_price: Decimal,
    pub close_price: Decimal,
    pub gross_pnl: Decimal,
    /// Opening share plus closing share.
    pub commissions: Decimal,
    pub net_pnl: Decimal,
    /// False when either fill's commission is unknown: the P&L is gross of fees.
    pub commission_known: bool,
}

/// Open lots of every (account, instrument), indexed densely.
#[derive(Debug, Clone)]
pub struct Fifo {
    instruments: usize,
    queues: Vec<LotQueue>,
}

fn overflow() -> Error {
    Error::internal("decimal overflow in FIFO replay")
}

fn mul(a: Decimal, b: Decimal) -> Result<Decimal> {
    a.checked_mul(b).ok_or_else(overflow)
}

/// `total * part / whole`, exact when `part == whole`.
fn share(total: Decimal, part: Decimal, whole: Decimal) -> Result<Decimal> {
    if part == whole || total.is_zero() {
        return Ok(if part == whole { total } else { Decimal::ZERO });
    }
    mul(total, part)?.checked_div(whole).ok_or_else(overflow)
}

impl Fifo {
    pub fn new(accounts: usize, instruments: usize) -> Self {
        let empty = LotQueue {
            side: LotSide::Long,
            lots: VecDeque::new(),
        };
        Self {
            instruments,
            queues: vec![empty; accounts.saturating_mul(instruments)],
        }
    }

    fn slot(&self, account: AccountIdx, instrument: InstrumentIdx) -> usize {
        account as usize * self.instruments + instrument as usize
    }

    /// Applies one fill. `multiplier` is the instrument's; `commission` is the fill's
    /// commission already in the instrument currency. Closed portions go to `on_close`.
    ///
    /// # Errors
    /// `internal` on decimal overflow, or when the fill refers to an account or
    /// instrument outside the sizes given to [`Fifo::new`].
    pub fn apply(
        &mut self,
        fill_index: u32,
        fill: &Fill,
        multiplier: Decimal,
        commission: Decimal,
        mut on_close: impl FnMut(ClosedLot),
    ) -> Result<()> {
        let slot = self.slot(fill.account, fill.instrument);
        let queue = self
            .queues
            .get_mut(slot)
            .ok_or_else(|| Error::internal(format!("fill {} refers outside the book", fill.id)))?;
        let incoming = LotSide::opened_by(fill.side);
        let mut remaining = fill.quantity;
        let mut remaining_commission = commission;

        if queue.side != incoming {
            while remaining > Decimal::ZERO {
                let Some(lot) = queue.lots.front_mut() else {
                    break;
                };
                let matched = remaining.min(lot.quantity);
                let open_share = share(lot.commission, matched, lot.quantity)?;
                let close_share = share(remaining_commission, matched, remaining)?;
                let diff = match queue.side {
                    LotSide::Long => fill.price - lot.price,
                    LotSide::Short => lot.price - fill.price,
                };
                let gross = mul(mul(diff, matched)?, multiplier)?;
                let commissions = open_share + close_share;
                on_close(ClosedLot {
                    account: fill.account,
                    instrument: fill.instrument,
                    side: queue.side,
                    quantity: matched,
                    open_fill: lot.fill,
                    close_fill: fill_index,
                    open_date: lot.open_date,
                    close_date: fill.trade_date,
                    open_price: lot.price,
                    close_price: fill.price,
                    gross_pnl: gross,
                    commissions,
                    net_pnl: gross - commissions,
                    commission_known: lot.commission_known && fill.commission_known,
                });
                lot.quantity -= matched;
                lot.commission -= open_share;
                remaining -= matched;
                remaining_commission -= close_share;
                if lot.quantity.is_zero() {
                    queue.lots.pop_front();
                }
            }
        }
        if remaining > Decimal::ZERO {
            if queue.lots.is_empty() {
                queue.side = incoming;
            }
            queue.lots.push_back(OpenLot {
                fill: fill_index,
                quantity: remaining,
                price: fill.price,
                commission: remaining_commission,
                open_date: fill.trade_date,
                commission_known: fill.commission_known,
            });
        }
        Ok(())
    }

    /// Every non-flat (account, instrument) with its lots, in index order.
    pub fn open_positions(&self) -> impl Iterator<Item = (AccountIdx, InstrumentIdx, &LotQueue)> {
        let n = self.instruments.max(1);
        self.queues
            .iter()
            .enumerate()
            .filter(|(_, q)| !q.lots.is_empty())
            .filter_map(move |(i, q)| {
                let account = AccountIdx::try_from(i / n).ok()?;
                let instrument = InstrumentIdx::try_from(i % n).ok()?;
                Some((account, instrument, q))
            })
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
            id: format!("F{i}"),
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
                f.commission,
                |c| closed.push(c),
            )
            .unwrap();
        }
        (closed, fifo)
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
                        commissions: dec!(1) / dec!(3),
                    },
                    Expected {
                        side: LotSide::Long,
                        quantity: dec!(1),
                        open_fill: 0,
                        gross: dec!(1),
                        commissions: (dec!(1) - dec!(1) / dec!(3)) / dec!(2),
                    },
                    Expected {
                        side: LotSide::Long,
                        quantity: dec!(1),
                        open_fill: 0,
                        gross: dec!(1),
                        commissions: dec!(1)
                            - dec!(1) / dec!(3)
                            - (dec!(1) - dec!(1) / dec!(3)) / dec!(2),
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
                assert_eq!(got.quantity, want.quantity, "{}", case.name);
                assert_eq!(got.open_fill, want.open_fill, "{}", case.name);
                assert_eq!(got.gross_pnl, want.gross, "{}", case.name);
                assert_eq!(got.commissions, want.commissions, "{}", case.name);
                assert_eq!(
                    got.net_pnl,
                    got.gross_pnl - got.commissions,
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
            let consumed: Decimal = closed.iter().map(|c| c.commissions).sum();
            let unconsumed: Decimal = fifo
                .open_positions()
                .flat_map(|(_, _, q)| q.lots.iter().map(|l| l.commission))
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
        assert_eq!(queue.lots[0].quantity, dec!(50));
        assert_eq!(queue.lots[0].commission, dec!(0.5));
        assert_eq!(queue.lots[0].fill, 1);
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
