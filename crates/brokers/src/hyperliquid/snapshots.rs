//! `get_snapshots` at Hyperliquid: one `POST /info` `metaAndAssetCtxs` answers every
//! perp's context (`markPx`, `midPx`, `prevDayPx`, `dayBaseVlm`, `dayNtlVlm`); a second,
//! `allMids`, only when a context asked for has no `midPx`. The venue's day is the last
//! 24 hours: `prevDayPx` is the price 24 hours ago. The contexts carry no last trade, no
//! best bid or ask and no day's open, high or low (`impactPxs` are the prices of an
//! impact-sized order, not the top of the book), so those are `None`.

use serde_json::{Value, json};
use tradedesk_core::Currency;

use super::{HyperliquidBroker, coin_of, dec, key_of, text};
use crate::BrokerError;
use crate::market_snapshot::{MarketSnapshot, MarketSnapshots, UnknownSymbol, positive};

impl HyperliquidBroker {
    pub(super) async fn read_snapshots(
        &self,
        account: &str,
        symbols: &[String],
    ) -> Result<MarketSnapshots, BrokerError> {
        crate::check_served(&self.config.id, account)?;
        let mut out = MarketSnapshots {
            requests: 1,
            ..MarketSnapshots::default()
        };
        let v = self.info(json!({"type": "metaAndAssetCtxs"})).await?;
        let universe = v
            .get(0)
            .and_then(|m| m.get("universe"))
            .and_then(Value::as_array);
        let contexts = v.get(1).and_then(Value::as_array);
        let (Some(universe), Some(contexts)) = (universe, contexts) else {
            return Err(
                self.unavailable("metaAndAssetCtxs did not answer [meta, contexts]".to_owned())
            );
        };
        let listed: Vec<(&str, bool, &Value)> = universe
            .iter()
            .zip(contexts)
            .filter_map(|(meta, ctx)| {
                let delisted = meta.get("isDelisted").and_then(Value::as_bool) == Some(true);
                Some((text(meta, "name")?, delisted, ctx))
            })
            .collect();
        let some: Vec<&str> = listed
            .iter()
            .filter(|(_, gone, _)| !gone)
            .take(8)
            .map(|(c, _, _)| *c)
            .collect();
        let mut found = Vec::new();
        for symbol in symbols {
            let coin = coin_of(symbol);
            match listed
                .iter()
                .find(|(c, _, _)| c.eq_ignore_ascii_case(&coin))
            {
                Some((c, false, ctx)) => found.push((symbol, *c, *ctx)),
                Some((c, true, _)) => out.unknown.push(UnknownSymbol {
                    symbol: symbol.clone(),
                    reason: format!("Hyperliquid has delisted the {c} perp"),
                }),
                None => out.unknown.push(UnknownSymbol {
                    symbol: symbol.clone(),
                    reason: format!(
                        "Hyperliquid lists no perp {} (it lists {}, ...)",
                        tradedesk_core::error::quote(&coin),
                        some.join(", ")
                    ),
                }),
            }
        }
        let mids = if found
            .iter()
            .any(|(_, _, ctx)| positive(dec(ctx, "midPx")).is_none())
        {
            out.requests += 1;
            Some(self.info(json!({"type": "allMids"})).await?)
        } else {
            None
        };
        for (symbol, coin, ctx) in found {
            let mid = positive(dec(ctx, "midPx"))
                .or_else(|| mids.as_ref().and_then(|m| positive(dec(m, coin))));
            out.rows.push(MarketSnapshot {
                symbol: symbol.clone(),
                market: key_of(coin).qualified(),
                currency: Some(Currency::USD),
                mid,
                mark: positive(dec(ctx, "markPx")),
                volume: dec(ctx, "dayBaseVlm").filter(|v| !v.is_sign_negative()),
                turnover: dec(ctx, "dayNtlVlm").filter(|v| !v.is_sign_negative()),
                prev_close: positive(dec(ctx, "prevDayPx")),
                ..MarketSnapshot::default()
            });
        }
        out.notes.push(format!(
            "{}: Hyperliquid's asset contexts: the mark, the mid, the price 24 hours ago (prevDayPx, as prev_close) and the last 24 hours' volume (dayBaseVlm, coins) and turnover (dayNtlVlm, USDC); they give no last trade, best bid or ask, or open, high and low: get_quote reads a market's book, get_recent_trades its latest trades",
            self.config.id
        ));
        Ok(out)
    }
}
