//! Candlestick patterns, swing points and support/resistance levels over
//! plain OHLC slices.
//!
//! Definitions used throughout (per bar):
//! - body = |close - open|, range = high - low,
//! - upper shadow = high - max(open, close), lower shadow = min(open, close) - low,
//! - bullish = close > open, bearish = close < open.
//!
//! A bar is usable only when its four prices are finite and
//! `low <= min(open, close)` and `max(open, close) <= high`; a pattern that
//! involves an unusable bar never matches. A bar with range 0 matches nothing
//! except doji (it may still be the middle bar of a morning/evening star,
//! whose rule only constrains that bar's body). Every rule below is stated in
//! [`Pattern::rule`] with the same numbers as the constants in this module.

use schemars::JsonSchema;
use serde::Serialize;

/// Doji: body at most this fraction of the range.
pub const DOJI_BODY_MAX_RATIO: f64 = 0.1;
/// Hammer / shooting star: the long shadow is at least this multiple of the body.
pub const SHADOW_BODY_MIN_MULTIPLE: f64 = 2.0;
/// Morning / evening star: the first bar's body is at least this fraction of its range.
pub const STAR_FIRST_BODY_MIN_RATIO: f64 = 0.5;
/// Morning / evening star: the middle bar's body is at most this fraction of the first bar's body.
pub const STAR_MIDDLE_BODY_MAX_RATIO: f64 = 0.3;
/// Three white soldiers / black crows: each body is at least this fraction of its range.
pub const SOLDIER_BODY_MIN_RATIO: f64 = 0.5;

/// A detectable pattern, by its snake_case name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Pattern {
    BullishEngulfing,
    BearishEngulfing,
    Hammer,
    ShootingStar,
    Doji,
    MorningStar,
    EveningStar,
    ThreeWhiteSoldiers,
    ThreeBlackCrows,
    SwingHigh,
    SwingLow,
}

impl Pattern {
    /// Every pattern, in the order used to sort hits that share a bar.
    pub const ALL: [Pattern; 11] = [
        Pattern::BullishEngulfing,
        Pattern::BearishEngulfing,
        Pattern::Hammer,
        Pattern::ShootingStar,
        Pattern::Doji,
        Pattern::MorningStar,
        Pattern::EveningStar,
        Pattern::ThreeWhiteSoldiers,
        Pattern::ThreeBlackCrows,
        Pattern::SwingHigh,
        Pattern::SwingLow,
    ];

    /// The snake_case name (matches the serde representation).
    pub fn name(self) -> &'static str {
        match self {
            Pattern::BullishEngulfing => "bullish_engulfing",
            Pattern::BearishEngulfing => "bearish_engulfing",
            Pattern::Hammer => "hammer",
            Pattern::ShootingStar => "shooting_star",
            Pattern::Doji => "doji",
            Pattern::MorningStar => "morning_star",
            Pattern::EveningStar => "evening_star",
            Pattern::ThreeWhiteSoldiers => "three_white_soldiers",
            Pattern::ThreeBlackCrows => "three_black_crows",
            Pattern::SwingHigh => "swing_high",
            Pattern::SwingLow => "swing_low",
        }
    }

    /// The exact rule implemented for this pattern, in one sentence.
    pub fn rule(self) -> &'static str {
        match self {
            Pattern::BullishEngulfing => {
                "Bullish engulfing (completes on the second bar): the previous bar is bearish \
                 (close < open), this bar is bullish (close > open), this open <= the previous \
                 close, this close >= the previous open, and this body is strictly larger than \
                 the previous body."
            }
            Pattern::BearishEngulfing => {
                "Bearish engulfing (completes on the second bar): the previous bar is bullish \
                 (close > open), this bar is bearish (close < open), this open >= the previous \
                 close, this close <= the previous open, and this body is strictly larger than \
                 the previous body."
            }
            Pattern::Hammer => {
                "Hammer: a bar with range > 0 and body > 0 whose lower shadow \
                 (min(open, close) - low) is >= 2 × the body and whose upper shadow \
                 (high - max(open, close)) is <= the body, coming after a decline: the previous \
                 bar's close is strictly below the close trend_window bars before that previous \
                 bar (trend_window defaults to 10, minimum 1; bars without that much history are \
                 skipped)."
            }
            Pattern::ShootingStar => {
                "Shooting star: a bar with range > 0 and body > 0 whose upper shadow \
                 (high - max(open, close)) is >= 2 × the body and whose lower shadow \
                 (min(open, close) - low) is <= the body, coming after a rise: the previous \
                 bar's close is strictly above the close trend_window bars before that previous \
                 bar (trend_window defaults to 10, minimum 1; bars without that much history are \
                 skipped)."
            }
            Pattern::Doji => {
                "Doji: the body |close - open| is <= 0.1 × the range (high - low) when the range \
                 is > 0, or the range is 0."
            }
            Pattern::MorningStar => {
                "Morning star (3 bars, completes on the third): bar 1 is bearish with body >= \
                 0.5 × its range, bar 2's body is <= 0.3 × bar 1's body (bar 2 may be flat), and \
                 bar 3 is bullish and closes strictly above the midpoint of bar 1's body \
                 ((open + close) / 2)."
            }
            Pattern::EveningStar => {
                "Evening star (3 bars, completes on the third): bar 1 is bullish with body >= \
                 0.5 × its range, bar 2's body is <= 0.3 × bar 1's body (bar 2 may be flat), and \
                 bar 3 is bearish and closes strictly below the midpoint of bar 1's body \
                 ((open + close) / 2)."
            }
            Pattern::ThreeWhiteSoldiers => {
                "Three white soldiers (completes on the third bar): three consecutive bullish \
                 bars, the second and third each closing strictly above the previous bar's close \
                 and opening within the previous bar's body (previous open <= open <= previous \
                 close), and each of the three bodies >= 0.5 × its range."
            }
            Pattern::ThreeBlackCrows => {
                "Three black crows (completes on the third bar): three consecutive bearish bars, \
                 the second and third each closing strictly below the previous bar's close and \
                 opening within the previous bar's body (previous close <= open <= previous \
                 open), and each of the three bodies >= 0.5 × its range."
            }
            Pattern::SwingHigh => {
                "Swing high: a bar whose high is strictly greater than the highs of each of the \
                 swing_window bars before it and the swing_window bars after it (swing_window \
                 defaults to 3, minimum 1); it is reported at its own index with price = its \
                 high, but it is confirmed only swing_window bars later, so the first and the \
                 last swing_window bars can never be swings."
            }
            Pattern::SwingLow => {
                "Swing low: a bar whose low is strictly less than the lows of each of the \
                 swing_window bars before it and the swing_window bars after it (swing_window \
                 defaults to 3, minimum 1); it is reported at its own index with price = its \
                 low, but it is confirmed only swing_window bars later, so the first and the \
                 last swing_window bars can never be swings."
            }
        }
    }

    /// Parses a name: case-insensitive, surrounding whitespace ignored, and
    /// `-` or a space accepted in place of `_` (e.g. "Morning-Star").
    pub fn parse(s: &str) -> Option<Pattern> {
        let wanted: String = s
            .trim()
            .chars()
            .map(|c| match c {
                '-' | ' ' => '_',
                other => other.to_ascii_lowercase(),
            })
            .collect();
        Pattern::ALL.into_iter().find(|p| p.name() == wanted)
    }

    /// Position in [`Pattern::ALL`].
    fn order(self) -> usize {
        Pattern::ALL
            .iter()
            .position(|p| *p == self)
            .unwrap_or(usize::MAX)
    }
}

/// One pattern occurrence.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Hit {
    pub pattern: Pattern,
    /// The bar on which the pattern completes (for swings: the swing bar itself).
    pub index: usize,
    /// The bar's time.
    pub time: String,
    /// Close of the completing bar; the high for a swing high, the low for a swing low.
    pub price: f64,
    /// The rule it matched.
    pub rule: &'static str,
}

/// A support or resistance level built from clustered swing points.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Level {
    /// support (from swing lows) or resistance (from swing highs).
    pub kind: &'static str,
    /// Mean price of its swing points.
    pub price: f64,
    /// Swing points in it.
    pub touches: usize,
    /// Its earliest swing point's time.
    pub first_time: String,
    /// Its latest swing point's time.
    pub last_time: String,
}

/// Tuning for [`detect`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PatternParams {
    /// A swing high is a bar whose high is strictly greater than the highs of
    /// the `swing_window` bars before and after it (mirror for swing lows).
    /// Default 3; 0 is treated as 1.
    pub swing_window: usize,
    /// Swing prices within this percent of a cluster's mean join that cluster
    /// to form one level. Default 0.5; negative or NaN is treated as 0.
    pub level_tolerance_pct: f64,
    /// A level needs at least this many swing points. Default 2.
    pub min_touches: usize,
    /// Look-back for the prior decline/rise of hammer and shooting star.
    /// Default 10; 0 is treated as 1.
    pub trend_window: usize,
}

impl Default for PatternParams {
    fn default() -> Self {
        PatternParams {
            swing_window: 3,
            level_tolerance_pct: 0.5,
            min_touches: 2,
            trend_window: 10,
        }
    }
}

/// One bar's prices with the derived measures.
#[derive(Debug, Clone, Copy)]
struct Bar {
    open: f64,
    high: f64,
    low: f64,
    close: f64,
}

impl Bar {
    fn usable(&self) -> bool {
        self.open.is_finite()
            && self.high.is_finite()
            && self.low.is_finite()
            && self.close.is_finite()
            && self.low <= self.open.min(self.close)
            && self.open.max(self.close) <= self.high
    }
    fn body(&self) -> f64 {
        (self.close - self.open).abs()
    }
    fn range(&self) -> f64 {
        self.high - self.low
    }
    fn upper_shadow(&self) -> f64 {
        self.high - self.open.max(self.close)
    }
    fn lower_shadow(&self) -> f64 {
        self.open.min(self.close) - self.low
    }
    fn bullish(&self) -> bool {
        self.close > self.open
    }
    fn bearish(&self) -> bool {
        self.close < self.open
    }
    fn body_mid(&self) -> f64 {
        (self.open + self.close) / 2.0
    }
}

/// Detects `which` patterns (an empty `which` means every pattern) and the
/// support/resistance levels.
///
/// Only the first `n` bars are used, where `n` is the shortest of the five
/// slices. Hits are sorted by index, then by the order of [`Pattern::ALL`].
/// Levels are always computed from all swing highs and lows (whether or not
/// the swing patterns are in `which`), sorted by touches descending, then
/// price ascending, then kind.
pub fn detect(
    time: &[String],
    open: &[f64],
    high: &[f64],
    low: &[f64],
    close: &[f64],
    which: &[Pattern],
    params: &PatternParams,
) -> (Vec<Hit>, Vec<Level>) {
    let n = [time.len(), open.len(), high.len(), low.len(), close.len()]
        .into_iter()
        .min()
        .unwrap_or(0);
    let bars: Vec<Bar> = (0..n)
        .map(|i| Bar {
            open: open[i],
            high: high[i],
            low: low[i],
            close: close[i],
        })
        .collect();
    let det = Detector {
        bars: &bars,
        swing_window: params.swing_window.max(1),
        trend_window: params.trend_window.max(1),
    };

    // Swings, found once: hits of their own and the points levels cluster.
    let swing_highs: Vec<(usize, f64)> = (0..n)
        .filter(|&i| det.swing_high(i))
        .map(|i| (i, bars[i].high))
        .collect();
    let swing_lows: Vec<(usize, f64)> = (0..n)
        .filter(|&i| det.swing_low(i))
        .map(|i| (i, bars[i].low))
        .collect();
    let mut hits = Vec::new();
    for pattern in Pattern::ALL {
        if !which.is_empty() && !which.contains(&pattern) {
            continue;
        }
        let hit = |(index, price): (usize, f64)| Hit {
            pattern,
            index,
            time: time[index].clone(),
            price,
            rule: pattern.rule(),
        };
        match pattern {
            Pattern::SwingHigh => hits.extend(swing_highs.iter().copied().map(hit)),
            Pattern::SwingLow => hits.extend(swing_lows.iter().copied().map(hit)),
            _ => hits.extend(
                (0..n)
                    .filter(|&i| det.matches(pattern, i))
                    .map(|i| hit((i, bars[i].close))),
            ),
        }
    }
    hits.sort_by_key(|h| (h.index, h.pattern.order()));

    let mut levels = cluster_levels("resistance", &swing_highs, time, params);
    levels.extend(cluster_levels("support", &swing_lows, time, params));
    levels.sort_by(|a, b| {
        b.touches
            .cmp(&a.touches)
            .then(a.price.total_cmp(&b.price))
            .then(a.kind.cmp(b.kind))
    });
    (hits, levels)
}

/// Pattern checks over a bar series.
struct Detector<'a> {
    bars: &'a [Bar],
    swing_window: usize,
    trend_window: usize,
}

impl Detector<'_> {
    fn matches(&self, pattern: Pattern, i: usize) -> bool {
        match pattern {
            Pattern::BullishEngulfing => self.engulfing(i, true),
            Pattern::BearishEngulfing => self.engulfing(i, false),
            Pattern::Hammer => self.hammer_like(i, true),
            Pattern::ShootingStar => self.hammer_like(i, false),
            Pattern::Doji => self.doji(i),
            Pattern::MorningStar => self.star(i, true),
            Pattern::EveningStar => self.star(i, false),
            Pattern::ThreeWhiteSoldiers => self.three_in_a_row(i, true),
            Pattern::ThreeBlackCrows => self.three_in_a_row(i, false),
            Pattern::SwingHigh => self.swing_high(i),
            Pattern::SwingLow => self.swing_low(i),
        }
    }

    /// The `count` bars ending at `i` (inclusive), if they exist and are all usable.
    fn window(&self, i: usize, count: usize) -> Option<&[Bar]> {
        let start = (i + 1).checked_sub(count)?;
        let w = self.bars.get(start..=i)?;
        w.iter().all(Bar::usable).then_some(w)
    }

    fn doji(&self, i: usize) -> bool {
        let Some(&[b]) = self.window(i, 1) else {
            return false;
        };
        let range = b.range();
        range == 0.0 || b.body() <= DOJI_BODY_MAX_RATIO * range
    }

    /// Hammer (`bullish_reversal`) or shooting star.
    fn hammer_like(&self, i: usize, bullish_reversal: bool) -> bool {
        let Some(&[b]) = self.window(i, 1) else {
            return false;
        };
        let body = b.body();
        if b.range() <= 0.0 || body <= 0.0 {
            return false;
        }
        let (long, short) = if bullish_reversal {
            (b.lower_shadow(), b.upper_shadow())
        } else {
            (b.upper_shadow(), b.lower_shadow())
        };
        if long < SHADOW_BODY_MIN_MULTIPLE * body || short > body {
            return false;
        }
        let Some(prev) = i.checked_sub(1) else {
            return false;
        };
        let Some(earlier) = prev.checked_sub(self.trend_window) else {
            return false;
        };
        let (p, e) = (self.bars[prev].close, self.bars[earlier].close);
        if !p.is_finite() || !e.is_finite() {
            return false;
        }
        if bullish_reversal { p < e } else { p > e }
    }

    fn engulfing(&self, i: usize, bullish: bool) -> bool {
        let Some(&[prev, cur]) = self.window(i, 2) else {
            return false;
        };
        let shape = if bullish {
            prev.bearish() && cur.bullish() && cur.open <= prev.close && cur.close >= prev.open
        } else {
            prev.bullish() && cur.bearish() && cur.open >= prev.close && cur.close <= prev.open
        };
        shape && cur.body() > prev.body()
    }

    /// Morning star (`bullish`) or evening star.
    fn star(&self, i: usize, bullish: bool) -> bool {
        let Some(&[first, middle, last]) = self.window(i, 3) else {
            return false;
        };
        let first_dir = if bullish {
            first.bearish()
        } else {
            first.bullish()
        };
        if !first_dir || first.body() < STAR_FIRST_BODY_MIN_RATIO * first.range() {
            return false;
        }
        if middle.body() > STAR_MIDDLE_BODY_MAX_RATIO * first.body() {
            return false;
        }
        if bullish {
            last.bullish() && last.close > first.body_mid()
        } else {
            last.bearish() && last.close < first.body_mid()
        }
    }

    /// Three white soldiers (`bullish`) or three black crows.
    fn three_in_a_row(&self, i: usize, bullish: bool) -> bool {
        let Some(w) = self.window(i, 3) else {
            return false;
        };
        let each_ok = w.iter().all(|b| {
            let dir = if bullish { b.bullish() } else { b.bearish() };
            dir && b.body() >= SOLDIER_BODY_MIN_RATIO * b.range()
        });
        each_ok
            && w.windows(2).all(|pair| {
                let (p, c) = (pair[0], pair[1]);
                if bullish {
                    c.close > p.close && p.open <= c.open && c.open <= p.close
                } else {
                    c.close < p.close && p.close <= c.open && c.open <= p.open
                }
            })
    }

    /// The bars `i - w ..= i + w`, if they exist and are all usable.
    fn swing_span(&self, i: usize) -> Option<&[Bar]> {
        let w = self.swing_window;
        let start = i.checked_sub(w)?;
        let end = i.checked_add(w)?;
        let span = self.bars.get(start..=end)?;
        span.iter().all(Bar::usable).then_some(span)
    }

    fn swing_high(&self, i: usize) -> bool {
        let Some(span) = self.swing_span(i) else {
            return false;
        };
        let w = self.swing_window;
        let h = span[w].high;
        span.iter().enumerate().all(|(k, b)| k == w || h > b.high)
    }

    fn swing_low(&self, i: usize) -> bool {
        let Some(span) = self.swing_span(i) else {
            return false;
        };
        let w = self.swing_window;
        let l = span[w].low;
        span.iter().enumerate().all(|(k, b)| k == w || l < b.low)
    }
}

/// Greedy clustering: points sorted by price ascending (ties by index); a
/// point joins the current cluster when it is within the tolerance of the
/// cluster's running mean, otherwise it starts a new cluster.
fn cluster_levels(
    kind: &'static str,
    points: &[(usize, f64)],
    time: &[String],
    params: &PatternParams,
) -> Vec<Level> {
    let tol = if params.level_tolerance_pct >= 0.0 {
        params.level_tolerance_pct / 100.0
    } else {
        0.0
    };
    let mut sorted = points.to_vec();
    sorted.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));

    let mut clusters: Vec<Vec<(usize, f64)>> = Vec::new();
    for point in sorted {
        let joins = clusters.last().is_some_and(|c| {
            let m = mean_price(c);
            (point.1 - m).abs() <= tol * m.abs()
        });
        match clusters.last_mut() {
            Some(c) if joins => c.push(point),
            _ => clusters.push(vec![point]),
        }
    }

    clusters
        .into_iter()
        .filter(|c| !c.is_empty() && c.len() >= params.min_touches)
        .filter_map(|c| {
            let first = c.iter().map(|p| p.0).min()?;
            let last = c.iter().map(|p| p.0).max()?;
            Some(Level {
                kind,
                price: mean_price(&c),
                touches: c.len(),
                first_time: time.get(first)?.clone(),
                last_time: time.get(last)?.clone(),
            })
        })
        .collect()
}

fn mean_price(points: &[(usize, f64)]) -> f64 {
    points.iter().map(|p| p.1).sum::<f64>() / points.len() as f64
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// (open, high, low, close) rows.
    type Row = (f64, f64, f64, f64);

    struct Series {
        time: Vec<String>,
        open: Vec<f64>,
        high: Vec<f64>,
        low: Vec<f64>,
        close: Vec<f64>,
    }

    fn series(rows: &[Row]) -> Series {
        Series {
            time: (0..rows.len()).map(|i| format!("t{i}")).collect(),
            open: rows.iter().map(|r| r.0).collect(),
            high: rows.iter().map(|r| r.1).collect(),
            low: rows.iter().map(|r| r.2).collect(),
            close: rows.iter().map(|r| r.3).collect(),
        }
    }

    fn run(rows: &[Row], which: &[Pattern], params: &PatternParams) -> (Vec<Hit>, Vec<Level>) {
        let s = series(rows);
        detect(&s.time, &s.open, &s.high, &s.low, &s.close, which, params)
    }

    /// Indices at which `pattern` is found (only that pattern is searched).
    fn found(rows: &[Row], pattern: Pattern, params: &PatternParams) -> Vec<usize> {
        run(rows, &[pattern], params)
            .0
            .into_iter()
            .map(|h| {
                assert_eq!(h.pattern, pattern);
                h.index
            })
            .collect()
    }

    fn short_trend() -> PatternParams {
        PatternParams {
            trend_window: 2,
            ..PatternParams::default()
        }
    }

    /// Rows whose high is `h`, low `h - 1`, open = close = `h - 0.5`.
    fn from_highs(highs: &[f64]) -> Vec<Row> {
        highs
            .iter()
            .map(|&h| (h - 0.5, h, h - 1.0, h - 0.5))
            .collect()
    }

    // ---- Pattern metadata -------------------------------------------------

    #[test]
    fn names_parse_round_trip() {
        for p in Pattern::ALL {
            assert_eq!(Pattern::parse(p.name()), Some(p));
            assert!(!p.rule().is_empty());
        }
        assert_eq!(Pattern::parse(" Morning-Star "), Some(Pattern::MorningStar));
        assert_eq!(
            Pattern::parse("THREE WHITE SOLDIERS"),
            Some(Pattern::ThreeWhiteSoldiers)
        );
        assert_eq!(Pattern::parse("engulfing"), None);
        assert_eq!(Pattern::parse(""), None);
        let orders: Vec<usize> = Pattern::ALL.iter().map(|p| p.order()).collect();
        assert_eq!(orders, (0..11).collect::<Vec<_>>());
    }

    #[test]
    fn rules_state_the_constants() {
        let has = |p: Pattern, v: f64| {
            let needle = format!("{v} ×");
            assert!(p.rule().contains(&needle), "{:?} lacks {needle}", p);
        };
        has(Pattern::Doji, DOJI_BODY_MAX_RATIO);
        has(Pattern::Hammer, SHADOW_BODY_MIN_MULTIPLE);
        has(Pattern::ShootingStar, SHADOW_BODY_MIN_MULTIPLE);
        for p in [Pattern::MorningStar, Pattern::EveningStar] {
            has(p, STAR_FIRST_BODY_MIN_RATIO);
            has(p, STAR_MIDDLE_BODY_MAX_RATIO);
        }
        for p in [Pattern::ThreeWhiteSoldiers, Pattern::ThreeBlackCrows] {
            has(p, SOLDIER_BODY_MIN_RATIO);
        }
        let d = PatternParams::default();
        assert!(
            Pattern::Hammer
                .rule()
                .contains(&format!("defaults to {}", d.trend_window))
        );
        assert!(
            Pattern::SwingHigh
                .rule()
                .contains(&format!("defaults to {}", d.swing_window))
        );
        assert!(
            Pattern::SwingLow
                .rule()
                .contains("confirmed only swing_window bars later")
        );
    }

    #[test]
    fn default_params() {
        let d = PatternParams::default();
        assert_eq!(d.swing_window, 3);
        assert_eq!(d.level_tolerance_pct, 0.5);
        assert_eq!(d.min_touches, 2);
        assert_eq!(d.trend_window, 10);
    }

    // ---- Doji -------------------------------------------------------------

    #[test]
    fn doji_positive() {
        // body 0.0625 <= 0.1 × range 1.0; the flat bar (range 0) is also a doji.
        let rows = [(10.0, 10.5, 9.5, 10.0625), (10.0, 10.0, 10.0, 10.0)];
        assert_eq!(
            found(&rows, Pattern::Doji, &PatternParams::default()),
            vec![0, 1]
        );
    }

    #[test]
    fn doji_near_miss() {
        // body 0.125 > 0.1 × range 1.0.
        let rows = [(10.0, 10.5, 9.5, 10.125)];
        assert!(found(&rows, Pattern::Doji, &PatternParams::default()).is_empty());
    }

    #[test]
    fn flat_bars_match_only_doji() {
        let rows = [(10.0, 10.0, 10.0, 10.0); 12];
        let (hits, levels) = run(&rows, &[], &PatternParams::default());
        assert_eq!(hits.len(), 12);
        assert!(hits.iter().all(|h| h.pattern == Pattern::Doji));
        assert!(levels.is_empty());
    }

    // ---- Hammer / shooting star ------------------------------------------

    const DECLINE: [Row; 3] = [
        (12.0, 12.25, 11.75, 12.0),
        (11.5, 11.75, 11.25, 11.5),
        (11.0, 11.25, 10.75, 11.0),
    ];
    const RISE: [Row; 3] = [
        (10.0, 10.25, 9.75, 10.0),
        (10.5, 10.75, 10.25, 10.5),
        (11.0, 11.25, 10.75, 11.0),
    ];
    // body 0.25, lower shadow 1.0, upper shadow 0.
    const HAMMER: Row = (10.5, 10.75, 9.5, 10.75);
    // body 0.25, upper shadow 1.0, lower shadow 0.
    const STAR: Row = (11.25, 12.25, 11.0, 11.0);

    #[test]
    fn hammer_positive() {
        // Previous close (index 2) 11.0 < close 2 bars before it (index 0) 12.0.
        let rows = [DECLINE[0], DECLINE[1], DECLINE[2], HAMMER];
        let (hits, _) = run(&rows, &[Pattern::Hammer], &short_trend());
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].index, 3);
        assert_eq!(hits[0].time, "t3");
        assert_eq!(hits[0].price, 10.75);
        assert_eq!(hits[0].rule, Pattern::Hammer.rule());
    }

    #[test]
    fn hammer_near_misses() {
        let p = short_trend();
        // Same bar after a rise: no prior decline.
        let rows = [RISE[0], RISE[1], RISE[2], HAMMER];
        assert!(found(&rows, Pattern::Hammer, &p).is_empty());
        // Lower shadow only 1.5 × body.
        let short_tail = (10.5, 10.75, 10.125, 10.75);
        let rows = [DECLINE[0], DECLINE[1], DECLINE[2], short_tail];
        assert!(found(&rows, Pattern::Hammer, &p).is_empty());
        // Upper shadow 0.375 > body 0.25.
        let top_wick = (10.5, 11.125, 9.5, 10.75);
        let rows = [DECLINE[0], DECLINE[1], DECLINE[2], top_wick];
        assert!(found(&rows, Pattern::Hammer, &p).is_empty());
        // Not enough history: needs trend_window + 1 earlier bars.
        let rows = [DECLINE[1], DECLINE[2], HAMMER];
        assert!(found(&rows, Pattern::Hammer, &p).is_empty());
        // Default trend window (10) with only 4 bars.
        let rows = [DECLINE[0], DECLINE[1], DECLINE[2], HAMMER];
        assert!(found(&rows, Pattern::Hammer, &PatternParams::default()).is_empty());
    }

    #[test]
    fn shooting_star_positive() {
        let rows = [RISE[0], RISE[1], RISE[2], STAR];
        let (hits, _) = run(&rows, &[Pattern::ShootingStar], &short_trend());
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].index, 3);
        assert_eq!(hits[0].price, 11.0);
    }

    #[test]
    fn shooting_star_near_misses() {
        let p = short_trend();
        // After a decline instead of a rise.
        let rows = [DECLINE[0], DECLINE[1], DECLINE[2], STAR];
        assert!(found(&rows, Pattern::ShootingStar, &p).is_empty());
        // Upper shadow only 1.5 × body.
        let short_wick = (11.25, 11.625, 11.0, 11.0);
        let rows = [RISE[0], RISE[1], RISE[2], short_wick];
        assert!(found(&rows, Pattern::ShootingStar, &p).is_empty());
    }

    // ---- Engulfing -------------------------------------------------------

    #[test]
    fn bullish_engulfing_positive() {
        let rows = [(11.0, 11.25, 9.75, 10.0), (9.75, 11.5, 9.5, 11.25)];
        let (hits, _) = run(
            &rows,
            &[Pattern::BullishEngulfing],
            &PatternParams::default(),
        );
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].index, 1);
        assert_eq!(hits[0].price, 11.25);
    }

    #[test]
    fn bullish_engulfing_near_misses() {
        let p = PatternParams::default();
        // Close 10.75 below the previous open 11.0.
        let rows = [(11.0, 11.25, 9.75, 10.0), (9.75, 11.5, 9.5, 10.75)];
        assert!(found(&rows, Pattern::BullishEngulfing, &p).is_empty());
        // Exactly equal bodies (open 10 = prev close, close 11 = prev open): not strictly larger.
        let rows = [(11.0, 11.25, 9.75, 10.0), (10.0, 11.25, 9.75, 11.0)];
        assert!(found(&rows, Pattern::BullishEngulfing, &p).is_empty());
        // Previous bar bullish.
        let rows = [(10.0, 11.25, 9.75, 11.0), (9.75, 11.5, 9.5, 11.25)];
        assert!(found(&rows, Pattern::BullishEngulfing, &p).is_empty());
    }

    #[test]
    fn bearish_engulfing_positive() {
        let rows = [(10.0, 11.25, 9.75, 11.0), (11.25, 11.5, 9.5, 9.75)];
        let (hits, _) = run(
            &rows,
            &[Pattern::BearishEngulfing],
            &PatternParams::default(),
        );
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].index, 1);
        assert_eq!(hits[0].price, 9.75);
    }

    #[test]
    fn bearish_engulfing_near_miss() {
        // Close 10.25 above the previous open 10.0.
        let rows = [(10.0, 11.25, 9.75, 11.0), (11.25, 11.5, 9.5, 10.25)];
        assert!(found(&rows, Pattern::BearishEngulfing, &PatternParams::default()).is_empty());
    }

    // ---- Stars -----------------------------------------------------------

    #[test]
    fn morning_star_positive() {
        // Bar 1 body 2 >= 0.5 × 2.5; bar 2 body 0 <= 0.6; bar 3 closes 11.25 > midpoint 11.
        let rows = [
            (12.0, 12.25, 9.75, 10.0),
            (9.5, 9.75, 9.25, 9.5),
            (9.75, 11.5, 9.5, 11.25),
        ];
        let (hits, _) = run(&rows, &[Pattern::MorningStar], &PatternParams::default());
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].index, 2);
        assert_eq!(hits[0].price, 11.25);
        // A flat middle bar is allowed.
        let rows = [rows[0], (9.5, 9.5, 9.5, 9.5), rows[2]];
        assert_eq!(
            found(&rows, Pattern::MorningStar, &PatternParams::default()),
            vec![2]
        );
    }

    #[test]
    fn morning_star_near_misses() {
        let p = PatternParams::default();
        // Bar 3 closes 10.75, below the midpoint 11 of bar 1's body.
        let rows = [
            (12.0, 12.25, 9.75, 10.0),
            (9.5, 9.75, 9.25, 9.5),
            (9.75, 11.5, 9.5, 10.75),
        ];
        assert!(found(&rows, Pattern::MorningStar, &p).is_empty());
        // Bar 2 body 0.75 > 0.3 × 2.
        let rows = [
            (12.0, 12.25, 9.75, 10.0),
            (9.5, 10.5, 9.25, 10.25),
            (9.75, 11.5, 9.5, 11.25),
        ];
        assert!(found(&rows, Pattern::MorningStar, &p).is_empty());
    }

    #[test]
    fn evening_star_positive() {
        let rows = [
            (10.0, 12.25, 9.75, 12.0),
            (12.5, 12.75, 12.25, 12.5),
            (12.25, 12.5, 10.5, 10.75),
        ];
        let (hits, _) = run(&rows, &[Pattern::EveningStar], &PatternParams::default());
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].index, 2);
        assert_eq!(hits[0].price, 10.75);
    }

    #[test]
    fn evening_star_near_misses() {
        let p = PatternParams::default();
        // Bar 3 closes 11.25, above the midpoint 11.
        let rows = [
            (10.0, 12.25, 9.75, 12.0),
            (12.5, 12.75, 12.25, 12.5),
            (12.25, 12.5, 10.5, 11.25),
        ];
        assert!(found(&rows, Pattern::EveningStar, &p).is_empty());
        // Bar 1 body 2 < 0.5 × range 5.
        let rows = [
            (10.0, 14.5, 9.5, 12.0),
            (12.5, 12.75, 12.25, 12.5),
            (12.25, 12.5, 10.5, 10.75),
        ];
        assert!(found(&rows, Pattern::EveningStar, &p).is_empty());
    }

    // ---- Three soldiers / crows -----------------------------------------

    #[test]
    fn three_white_soldiers_positive() {
        let rows = [
            (10.0, 11.25, 9.75, 11.0),
            (10.5, 12.25, 10.25, 12.0),
            (11.5, 13.25, 11.25, 13.0),
        ];
        let (hits, _) = run(
            &rows,
            &[Pattern::ThreeWhiteSoldiers],
            &PatternParams::default(),
        );
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].index, 2);
        assert_eq!(hits[0].price, 13.0);
    }

    #[test]
    fn three_white_soldiers_near_miss() {
        // Third bar opens 12.25, above the second bar's body (10.5..12).
        let rows = [
            (10.0, 11.25, 9.75, 11.0),
            (10.5, 12.25, 10.25, 12.0),
            (12.25, 13.25, 12.0, 13.0),
        ];
        assert!(
            found(
                &rows,
                Pattern::ThreeWhiteSoldiers,
                &PatternParams::default()
            )
            .is_empty()
        );
    }

    #[test]
    fn three_black_crows_positive() {
        let rows = [
            (13.0, 13.25, 11.75, 12.0),
            (12.5, 12.75, 10.75, 11.0),
            (11.5, 11.75, 9.75, 10.0),
        ];
        let (hits, _) = run(
            &rows,
            &[Pattern::ThreeBlackCrows],
            &PatternParams::default(),
        );
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].index, 2);
        assert_eq!(hits[0].price, 10.0);
    }

    #[test]
    fn three_black_crows_near_miss() {
        // Third body 0.75 < 0.5 × range 3.75 (a long lower shadow).
        let rows = [
            (13.0, 13.25, 11.75, 12.0),
            (12.5, 12.75, 10.75, 11.0),
            (11.5, 11.75, 8.0, 10.75),
        ];
        assert!(found(&rows, Pattern::ThreeBlackCrows, &PatternParams::default()).is_empty());
    }

    // ---- Swings ------------------------------------------------------------

    #[test]
    fn swings_with_window_two() {
        let p = PatternParams {
            swing_window: 2,
            ..PatternParams::default()
        };
        // highs: index 2 (5) and 5 (4) beat two bars on each side; the last
        // bar (9) is the highest but has no bars after it.
        let rows = from_highs(&[1.0, 2.0, 5.0, 3.0, 2.0, 4.0, 3.0, 2.0, 9.0]);
        let (hits, _) = run(&rows, &[Pattern::SwingHigh], &p);
        let idx: Vec<usize> = hits.iter().map(|h| h.index).collect();
        assert_eq!(idx, vec![2, 5]);
        assert_eq!(hits[0].price, 5.0);
        assert_eq!(hits[0].time, "t2");
        // lows = highs - 1: index 4 (1) is below 4, 2 and 3, 2.
        let (hits, _) = run(&rows, &[Pattern::SwingLow], &p);
        let idx: Vec<usize> = hits.iter().map(|h| h.index).collect();
        assert_eq!(idx, vec![4]);
        assert_eq!(hits[0].price, 1.0);
    }

    #[test]
    fn swing_near_misses() {
        let p = PatternParams {
            swing_window: 1,
            ..PatternParams::default()
        };
        // Equal neighbour high: not strictly greater.
        let rows = from_highs(&[1.0, 3.0, 3.0, 1.0]);
        assert!(found(&rows, Pattern::SwingHigh, &p).is_empty());
        // A NaN neighbour makes the window unusable.
        let mut rows = from_highs(&[1.0, 3.0, 1.0]);
        rows[2].1 = f64::NAN;
        assert!(found(&rows, Pattern::SwingHigh, &p).is_empty());
        // Window 0 behaves as 1: a lone bar can't be a swing.
        let p0 = PatternParams {
            swing_window: 0,
            ..PatternParams::default()
        };
        assert!(found(&from_highs(&[3.0]), Pattern::SwingHigh, &p0).is_empty());
        assert_eq!(
            found(&from_highs(&[1.0, 3.0, 1.0]), Pattern::SwingHigh, &p0),
            vec![1]
        );
    }

    // ---- Levels ------------------------------------------------------------

    fn level_rows() -> Vec<Row> {
        // (high, low) pairs; open/close in the middle.
        let hl = [
            (95.0, 93.0),
            (100.0, 98.0),
            (96.0, 94.0),
            (100.25, 98.25),
            (96.0, 94.0),
            (110.0, 108.0),
            (96.0, 94.0),
            (99.875, 97.875),
            (95.0, 93.0),
        ];
        hl.iter()
            .map(|&(h, l)| ((h + l) / 2.0, h, l, (h + l) / 2.0))
            .collect()
    }

    #[test]
    fn levels_cluster_swings() {
        let p = PatternParams {
            swing_window: 1,
            ..PatternParams::default()
        };
        let (hits, levels) = run(&level_rows(), &[Pattern::SwingHigh, Pattern::SwingLow], &p);
        let highs: Vec<usize> = hits
            .iter()
            .filter(|h| h.pattern == Pattern::SwingHigh)
            .map(|h| h.index)
            .collect();
        let lows: Vec<usize> = hits
            .iter()
            .filter(|h| h.pattern == Pattern::SwingLow)
            .map(|h| h.index)
            .collect();
        assert_eq!(highs, vec![1, 3, 5, 7]);
        assert_eq!(lows, vec![2, 4, 6]);
        // Resistance: sorted 99.875, 100 (0.125 % from 99.875), 100.25 (0.31 %
        // from the mean 99.9375) form one cluster; 110 stands alone and is dropped.
        // Support: 94 three times. Both have 3 touches → lower price first.
        assert_eq!(levels.len(), 2);
        assert_eq!(
            levels[0],
            Level {
                kind: "support",
                price: 94.0,
                touches: 3,
                first_time: "t2".into(),
                last_time: "t6".into(),
            }
        );
        assert_eq!(levels[1].kind, "resistance");
        assert_eq!(levels[1].touches, 3);
        assert!((levels[1].price - (99.875 + 100.0 + 100.25) / 3.0).abs() < 1e-12);
        assert_eq!(levels[1].first_time, "t1");
        assert_eq!(levels[1].last_time, "t7");
    }

    #[test]
    fn levels_respect_tolerance_and_min_touches() {
        // 0.1 %: 100 is 0.125 % above 99.875 and 100.25 is 0.25 % above 100,
        // so every resistance swing is alone; support still has 3 touches.
        let tight = PatternParams {
            swing_window: 1,
            level_tolerance_pct: 0.1,
            ..PatternParams::default()
        };
        let (_, levels) = run(&level_rows(), &[], &tight);
        assert_eq!(levels.len(), 1);
        assert_eq!(levels[0].kind, "support");
        // min_touches 4 removes everything.
        let strict = PatternParams {
            swing_window: 1,
            min_touches: 4,
            ..PatternParams::default()
        };
        assert!(run(&level_rows(), &[], &strict).1.is_empty());
        // min_touches 1 keeps the lone 110 resistance too, sorted after the 3-touch levels.
        let loose = PatternParams {
            swing_window: 1,
            min_touches: 1,
            ..PatternParams::default()
        };
        let (_, levels) = run(&level_rows(), &[], &loose);
        assert_eq!(levels.len(), 3);
        assert_eq!(levels[2].price, 110.0);
        assert_eq!(levels[2].touches, 1);
        assert_eq!(levels[2].first_time, "t5");
        assert_eq!(levels[2].last_time, "t5");
    }

    // ---- Ordering and input handling ---------------------------------------

    #[test]
    fn hits_sorted_by_index_then_pattern_order() {
        let p = PatternParams {
            swing_window: 1,
            ..PatternParams::default()
        };
        let mut rows = level_rows();
        rows.extend([
            (11.0, 11.25, 9.75, 10.0),
            (9.75, 11.5, 9.5, 11.25),
            (10.0, 10.0, 10.0, 10.0),
        ]);
        let (hits, _) = run(&rows, &[], &p);
        assert!(!hits.is_empty());
        for pair in hits.windows(2) {
            let a = (pair[0].index, pair[0].pattern.order());
            let b = (pair[1].index, pair[1].pattern.order());
            assert!(a < b, "{a:?} !< {b:?}");
        }
        // Bars 0..=8 are dojis (open = close), so index 1 has doji before swing_high.
        let at1: Vec<Pattern> = hits
            .iter()
            .filter(|h| h.index == 1)
            .map(|h| h.pattern)
            .collect();
        assert_eq!(at1, vec![Pattern::Doji, Pattern::SwingHigh]);
        assert!(
            hits.iter()
                .any(|h| h.pattern == Pattern::BullishEngulfing && h.index == 10)
        );
    }

    #[test]
    fn uses_shortest_input_and_skips_bad_bars() {
        let s = series(&[(11.0, 11.25, 9.75, 10.0), (9.75, 11.5, 9.5, 11.25)]);
        // time has only one entry → only bar 0 is considered.
        let (hits, _) = detect(
            &s.time[..1],
            &s.open,
            &s.high,
            &s.low,
            &s.close,
            &[Pattern::BullishEngulfing],
            &PatternParams::default(),
        );
        assert!(hits.is_empty());
        // A high below the close makes the bar unusable.
        let rows = [(10.0, 10.0, 9.5, 10.05)];
        assert!(found(&rows, Pattern::Doji, &PatternParams::default()).is_empty());
        let rows = [(f64::NAN, 10.0, 9.5, 10.0)];
        assert!(found(&rows, Pattern::Doji, &PatternParams::default()).is_empty());
        let (hits, levels) = detect(&[], &[], &[], &[], &[], &[], &PatternParams::default());
        assert!(hits.is_empty() && levels.is_empty());
    }
}
