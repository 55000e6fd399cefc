//! `get_snapshots` on the sim: each symbol's figures from its own price process, so the
//! demo answers as a broker would. The sim trades around the clock: its day is the UTC
//! day, opening at the previous day's close (the daily bar's), as `get_bars` draws it.

use chrono::{DateTime, Duration, Utc};
use rust_decimal::Decimal;
use tradedesk_core::AssetClass;

use super::SimBroker;
use super::market::SimInstrument;
use crate::BrokerError;
use crate::market_snapshot::{MarketSnapshot, MarketSnapshots, UnknownSymbol};

/// How often the day's high and low are sampled (the daily bar samples as often).
const SAMPLE_SECONDS: i64 = 15 * 60;

impl SimBroker {
    /// Every symbol the sim lists, each from its own price process at the sim's now.
    pub(super) fn read_snapshots(
        &self,
        account: &str,
        symbols: &[String],
    ) -> Result<MarketSnapshots, BrokerError> {
        self.check_account(account)?;
        let now = self.clock.now();
        let mut out = MarketSnapshots {
            requests: 1,
            ..MarketSnapshots::default()
        };
        for symbol in symbols {
            match self.find(symbol) {
                Ok(inst) => out.rows.push(self.day_of(inst, symbol, now)),
                Err(BrokerError::UnknownSymbol { known, .. }) => out.unknown.push(UnknownSymbol {
                    symbol: symbol.clone(),
                    reason: format!("the sim does not list it (it quotes {known})"),
                }),
                Err(e) => return Err(e),
            }
        }
        out.notes.push(format!(
            "{account}: the sim's figures are simulated from its price process; it trades around the clock, so its day is the UTC day and opens at the previous day's close; volume is the sum of the day's one-minute bars and the last trade is its tape's latest print"
        ));
        Ok(out)
    }

    #[allow(clippy::float_arithmetic, clippy::cast_precision_loss)]
    fn day_of(&self, inst: &SimInstrument, asked: &str, now: DateTime<Utc>) -> MarketSnapshot {
        let seed = self.config.seed;
        let midnight = now
            .date_naive()
            .and_hms_opt(0, 0, 0)
            .map_or(now, |t| t.and_utc());
        // Bars round the process to the tick's places, as get_bars does.
        let dp = inst.spec.tick.scale();
        let price = |t: DateTime<Utc>| {
            Decimal::from_f64_retain(inst.mid_f64(seed, t))
                .map(|d| d.round_dp(dp))
                .filter(|d| d.is_sign_positive() && !d.is_zero())
        };
        let open = price(midnight);
        let close = price(now);
        let mut high = open.max(close);
        let mut low = match (open, close) {
            (Some(o), Some(c)) => Some(o.min(c)),
            (o, c) => o.or(c),
        };
        let mut t = midnight + Duration::seconds(SAMPLE_SECONDS);
        while t < now {
            if let Some(p) = price(t) {
                high = Some(high.map_or(p, |h| h.max(p)));
                low = Some(low.map_or(p, |l| l.min(p)));
            }
            t += Duration::seconds(SAMPLE_SECONDS);
        }
        // The day's completed one-minute bars, each with get_bars' volume.
        let mut volume = 0.0_f64;
        let mut minute = midnight.timestamp();
        while minute + 60 <= now.timestamp() {
            volume += super::market_volume(seed, minute).round();
            minute += 60;
        }
        let (bid, ask) = inst.bid_ask(seed, now);
        let print = inst.tape(seed, now, 1).into_iter().next().map(|p| {
            let (b, a) = inst.bid_ask(seed, p.time);
            (
                if p.buy { a } else { b },
                inst.spec.lot_step * Decimal::from(p.lots),
                p.time,
            )
        });
        MarketSnapshot {
            symbol: asked.to_owned(),
            market: inst.spec.key.qualified(),
            currency: Some(inst.spec.currency),
            last: print.map(|p| p.0),
            last_size: print.map(|p| p.1),
            last_time: print.map(|p| p.2),
            bid: Some(bid),
            ask: Some(ask),
            mid: None,
            mark: (inst.spec.asset_class == AssetClass::Perp).then(|| (bid + ask) / Decimal::TWO),
            open,
            high,
            low,
            close,
            volume: Decimal::from_f64_retain(volume).map(|v| v.round()),
            turnover: None,
            session_date: Some(now.date_naive()),
            prev_close: open,
            time: Some(now),
        }
    }
}
