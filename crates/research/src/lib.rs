//! Research analytics for tradedesk: the signal expression language, the indicators it
//! offers, the backtest engine, factor statistics, candlestick and swing patterns,
//! option analytics, perpetual-futures quotes, return measures (XIRR, TWR) and charts.
//! Analytics are `f64` (docs/methodology/research.md); money lives elsewhere.

// Analytics: floating point is the point here.
#![allow(clippy::float_arithmetic, clippy::cast_precision_loss)]

pub mod backtest;
pub mod chart;
pub mod expr;
pub mod factor;
pub mod indicators;
pub mod options;
pub mod patterns;
pub mod performance;
pub mod perps;
