//! Isolated-margin perpetual positions: size, bust price and P&L at a price, for one
//! leverage or a ladder of them (docs/methodology/research.md, "Leveraged perpetuals").

/// Long or short.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Long,
    Short,
}

/// An isolated-margin position as opened.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Position {
    pub side: Side,
    pub entry: f64,
    pub margin: f64,
    pub leverage: f64,
    pub maintenance_margin_rate: f64,
    pub fee_rate: f64,
}

/// The leverages a ladder tries (those below the maximum, then the maximum).
pub const LADDER: [u32; 11] = [1, 2, 3, 5, 10, 25, 50, 100, 250, 500, 1000];

/// The price moves an opening quote tries, in percent.
pub const MOVES: [f64; 6] = [-10.0, -5.0, -1.0, 1.0, 5.0, 10.0];

/// A position valued at an exit price.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Exit {
    pub raw_pnl: f64,
    /// Opening plus closing fee.
    pub fees: f64,
    /// After fees, never below -margin; -margin when liquidated.
    pub net_pnl: f64,
    pub liquidated: bool,
}

impl Position {
    /// Margin x leverage.
    #[must_use]
    pub fn notional(&self) -> f64 {
        self.margin * self.leverage
    }

    /// Notional / entry.
    #[must_use]
    pub fn size(&self) -> f64 {
        self.notional() / self.entry
    }

    /// Where equity falls to the maintenance margin.
    #[must_use]
    pub fn bust_price(&self) -> f64 {
        let step = 1.0 / self.leverage - self.maintenance_margin_rate;
        match self.side {
            Side::Long => self.entry * (1.0 - step),
            Side::Short => self.entry * (1.0 + step),
        }
    }

    /// |bust - entry| / entry x 100.
    #[must_use]
    pub fn bust_distance_pct(&self) -> f64 {
        (self.bust_price() - self.entry).abs() / self.entry * 100.0
    }

    /// Why the position cannot be opened, if it cannot.
    #[must_use]
    pub fn invalid_reason(&self) -> Option<String> {
        if self.maintenance_margin_rate >= 1.0 / self.leverage {
            return Some(format!(
                "maintenance_margin_rate {} is at or above 1/leverage ({}): the position would be liquidated on opening",
                self.maintenance_margin_rate,
                1.0 / self.leverage
            ));
        }
        let opening_fee = self.fee_rate * self.notional();
        if opening_fee >= self.margin {
            return Some(format!(
                "the opening fee {opening_fee} (fee_rate x notional) is not below the margin {}",
                self.margin
            ));
        }
        None
    }

    /// The position closed at `exit`.
    #[must_use]
    pub fn exit_at(&self, exit: f64) -> Exit {
        let size = self.size();
        let raw_pnl = match self.side {
            Side::Long => size * (exit - self.entry),
            Side::Short => size * (self.entry - exit),
        };
        let fees = self.fee_rate * self.notional() + self.fee_rate * size * exit;
        let bust = self.bust_price();
        let liquidated = match self.side {
            Side::Long => exit <= bust,
            Side::Short => exit >= bust,
        };
        let net_pnl = if liquidated {
            -self.margin
        } else {
            (raw_pnl - fees).max(-self.margin)
        };
        Exit {
            raw_pnl,
            fees,
            net_pnl,
            liquidated,
        }
    }
}

/// The ladder's leverages for a maximum: those of [`LADDER`] below it, then it.
#[must_use]
pub fn ladder_leverages(max_leverage: u32) -> Vec<u32> {
    let mut steps: Vec<u32> = LADDER
        .iter()
        .copied()
        .filter(|l| *l < max_leverage)
        .collect();
    steps.push(max_leverage);
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    fn long(leverage: f64) -> Position {
        Position {
            side: Side::Long,
            entry: 100.0,
            margin: 1000.0,
            leverage,
            maintenance_margin_rate: 0.0,
            fee_rate: 0.0,
        }
    }

    #[test]
    fn ten_x_long_busts_ten_percent_down() {
        let p = long(10.0);
        assert_eq!(p.notional(), 10_000.0);
        assert_eq!(p.size(), 100.0);
        assert!((p.bust_price() - 90.0).abs() < 1e-12);
        let e = p.exit_at(95.0);
        assert!((e.net_pnl + 500.0).abs() < 1e-9);
        assert!(!e.liquidated);
        let e = p.exit_at(90.0);
        assert!(e.liquidated);
        assert_eq!(e.net_pnl, -1000.0);
    }

    #[test]
    fn a_short_with_maintenance_margin_busts_sooner() {
        let p = Position {
            side: Side::Short,
            maintenance_margin_rate: 0.01,
            ..long(20.0)
        };
        // 100 x (1 + 0.05 - 0.01) = 104.
        assert!((p.bust_price() - 104.0).abs() < 1e-12);
        assert!((p.bust_distance_pct() - 4.0).abs() < 1e-12);
        assert!(p.invalid_reason().is_none());
        let bad = Position {
            maintenance_margin_rate: 0.05,
            ..p
        };
        assert!(
            bad.invalid_reason()
                .unwrap()
                .contains("liquidated on opening")
        );
    }

    #[test]
    fn the_ladder_ends_at_the_maximum_once() {
        assert_eq!(ladder_leverages(40), vec![1, 2, 3, 5, 10, 25, 40]);
        assert_eq!(ladder_leverages(50), vec![1, 2, 3, 5, 10, 25, 50]);
        assert_eq!(ladder_leverages(1), vec![1]);
    }
}
