//! A JSON reader for the shape of a book file, and nothing else: the top-level object
//! with its sections as text, and the fills array read row by row on the bytes.
//!
//! It never decides that a text is valid on its own. Every section but the fills is
//! handed to serde_json as the text of its value (which checks it whole); the top
//! level's braces, keys, colons and commas, and every byte of the fills, are checked
//! here. At anything it does not read exactly as serde_json would (an escape outside a
//! fill's id, a key given twice, a value of another type, nesting deeper than serde's
//! limit could reach) it gives up, and the path-naming validator reads the file.
//!
//! The fills of a large file are read on two threads, split at a fill boundary found
//! near the middle of the text. The boundary is a guess (`},{` could sit inside a
//! string) that the first thread proves: it reads from the array's start and must
//! arrive at that very comma between two fills. If it does not, its own read goes on
//! to the end of the array and the second thread's is dropped.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};

use super::{FillRow, Fills};

/// The sections other than `fills`, in this order.
pub(super) const SECTIONS: [&[u8]; 11] = [
    b"format",
    b"base_currency",
    b"as_of",
    b"accounts",
    b"instruments",
    b"cash",
    b"marks",
    b"fx_rates",
    b"reported_positions",
    b"opening_positions",
    b"corporate_actions",
];

/// Below this many bytes of fills, one thread reads them all.
const PARALLEL_BYTES: usize = 1 << 20;

/// How far past the middle a fill boundary is looked for.
const SPLIT_WINDOW: usize = 1 << 16;

/// Deeper nesting in a section is left to the validator: serde_json's own limit (128,
/// counted from the top level) must never be the difference between the two reads.
const MAX_DEPTH: usize = 100;

/// The top level as read: each section's value as text (`None` when absent), and the
/// fills in one or two parts, in file order.
pub(super) struct Top<'a> {
    pub(super) sections: [Option<&'a str>; SECTIONS.len()],
    pub(super) fills: Vec<Fills<'a>>,
}

/// Reads the top-level object; `None` at anything the typed pass leaves to the
/// validator.
pub(super) fn top(text: &str) -> Option<Top<'_>> {
    let s = text.as_bytes();
    let mut at = ws(s, 0);
    if s.get(at) != Some(&b'{') {
        return None;
    }
    at = ws(s, at + 1);
    let mut sections = [None; SECTIONS.len()];
    let mut fills = None;
    loop {
        let (key, next) = key(s, at)?;
        at = ws(s, next);
        if key == b"fills" {
            if fills.is_some() {
                return None;
            }
            let (parts, end) = fills_array(text, at)?;
            fills = Some(parts);
            at = end;
        } else {
            let slot = sections.get_mut(SECTIONS.iter().position(|k| *k == key)?)?;
            if slot.is_some() {
                return None;
            }
            let end = value_end(s, at)?;
            *slot = Some(text.get(at..end)?);
            at = end;
        }
        at = ws(s, at);
        match *s.get(at)? {
            b',' => at = ws(s, at + 1),
            b'}' => break,
            _ => return None,
        }
    }
    if ws(s, at + 1) != s.len() {
        return None;
    }
    Some(Top {
        sections,
        fills: fills?,
    })
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

fn ws(s: &[u8], mut at: usize) -> usize {
    while s.get(at).copied().is_some_and(is_ws) {
        at += 1;
    }
    at
}

/// From the byte after an opening quote: the closing quote's index, and whether an
/// escape came before it. `None` at a control character (which JSON does not allow in a
/// string) or at the end of the text.
fn string_end(s: &[u8], mut at: usize) -> Option<(usize, bool)> {
    let mut escaped = false;
    loop {
        let b = match special(s, at) {
            Some(k) => {
                at = k;
                *s.get(at)?
            }
            None => *s.get(at)?,
        };
        if b == b'"' {
            return Some((at, escaped));
        }
        if b == b'\\' {
            escaped = true;
            at += 2;
            continue;
        }
        if b < 0x20 {
            return None;
        }
        at += 1;
    }
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// The first byte at or after `at` that ends a plain run of a string (a quote, a
/// backslash or a control character), found eight bytes a step; `None` when fewer than
/// eight bytes are left before one is found (the caller reads those one by one).
fn special(s: &[u8], mut at: usize) -> Option<usize> {
    loop {
        let word = u64::from_le_bytes(s.get(at..at + 8)?.try_into().ok()?);
        // A byte's high bit is set where it is zero after the xor (or below 0x20). A
        // borrow can mark a byte above a marked one falsely, never one below: the lowest
        // mark is exact.
        let quote = word ^ (ONES * u64::from(b'"'));
        let backslash = word ^ (ONES * u64::from(b'\\'));
        let marks = (quote.wrapping_sub(ONES) & !quote)
            | (backslash.wrapping_sub(ONES) & !backslash)
            | (word.wrapping_sub(ONES * 0x20) & !word);
        let marks = marks & HIGHS;
        if marks != 0 {
            return Some(at + (marks.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
}

/// A key without escapes and the colon after it: the key's bytes and where its value
/// starts.
fn key(s: &[u8], at: usize) -> Option<(&[u8], usize)> {
    if s.get(at) != Some(&b'"') {
        return None;
    }
    let (end, escaped) = string_end(s, at + 1)?;
    if escaped {
        return None;
    }
    let key = s.get(at + 1..end)?;
    let colon = ws(s, end + 1);
    if s.get(colon) != Some(&b':') {
        return None;
    }
    Some((key, ws(s, colon + 1)))
}

/// Where the value starting at `at` ends, found by its brackets and strings only: the
/// text up to there is then read by serde_json, which checks it.
fn value_end(s: &[u8], mut at: usize) -> Option<usize> {
    match *s.get(at)? {
        b'"' => Some(string_end(s, at + 1)?.0 + 1),
        b'{' | b'[' => {
            let mut depth = 0usize;
            loop {
                match *s.get(at)? {
                    b'"' => {
                        at = string_end(s, at + 1)?.0 + 1;
                        continue;
                    }
                    b'{' | b'[' => {
                        depth += 1;
                        if depth > MAX_DEPTH {
                            return None;
                        }
                    }
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(at + 1);
                        }
                    }
                    _ => {}
                }
                at += 1;
            }
        }
        _ => {
            while s
                .get(at)
                .is_some_and(|b| !is_ws(*b) && !matches!(b, b',' | b'}' | b']'))
            {
                at += 1;
            }
            Some(at)
        }
    }
}

/// A string without escapes: its text and the index after its closing quote.
fn plain<'a>(text: &'a str, s: &[u8], at: usize) -> Option<(&'a str, usize)> {
    if s.get(at) != Some(&b'"') {
        return None;
    }
    let (end, escaped) = string_end(s, at + 1)?;
    if escaped {
        return None;
    }
    Some((text.get(at + 1..end)?, end + 1))
}

/// A string, its escapes (if any) read by serde_json.
fn any_string<'a>(text: &'a str, s: &[u8], at: usize) -> Option<(Cow<'a, str>, usize)> {
    if s.get(at) != Some(&b'"') {
        return None;
    }
    let (end, escaped) = string_end(s, at + 1)?;
    let value = if escaped {
        Cow::Owned(serde_json::from_str::<String>(text.get(at..=end)?).ok()?)
    } else {
        Cow::Borrowed(text.get(at + 1..end)?)
    };
    Some((value, end + 1))
}

/// `null` (as `None`) or a string without escapes.
fn optional<'a>(text: &'a str, s: &[u8], at: usize) -> Option<(Option<&'a str>, usize)> {
    if s.get(at..at + 4) == Some(b"null") {
        return Some((None, at + 4));
    }
    let (value, next) = plain(text, s, at)?;
    Some((Some(value), next))
}

/// `true`, `false` or `null` (as `None`).
fn flag(s: &[u8], at: usize) -> Option<(Option<bool>, usize)> {
    let rest = s.get(at..)?;
    if rest.starts_with(b"true") {
        Some((Some(true), at + 4))
    } else if rest.starts_with(b"false") {
        Some((Some(false), at + 5))
    } else if rest.starts_with(b"null") {
        Some((None, at + 4))
    } else {
        None
    }
}

/// A fill's key and the colon after it: the key's number (its bit in `row`) and where
/// its value starts. Told by its first letter and compared whole with its quotes, so the key's
/// bytes are never scanned; any other key, or one with an escape, is `None`.
fn fill_key(s: &[u8], at: usize) -> Option<(usize, usize)> {
    let (found, len) = match *s.get(at + 1)? {
        b'i' if lit(s, at, b"\"id\"") => (0, 4),
        b'a' if lit(s, at, b"\"account\"") => (1, 9),
        b'e' if lit(s, at, b"\"exchange\"") => (2, 10),
        b's' if lit(s, at, b"\"symbol\"") => (3, 8),
        b's' if lit(s, at, b"\"side\"") => (4, 6),
        b'q' if lit(s, at, b"\"quantity\"") => (5, 10),
        b'p' if lit(s, at, b"\"price\"") => (6, 7),
        b't' if lit(s, at, b"\"time\"") => (7, 6),
        b'c' if lit(s, at, b"\"commission\"") => (8, 12),
        b'c' if lit(s, at, b"\"commission_currency\"") => (9, 21),
        b'c' if lit(s, at, b"\"commission_known\"") => (10, 18),
        b'c' if lit(s, at, b"\"closes\"") => (11, 8),
        _ => return None,
    };
    let colon = ws(s, at + len);
    if s.get(colon) != Some(&b':') {
        return None;
    }
    Some((found, ws(s, colon + 1)))
}

/// The text at `at` is `pattern` (a constant: compared as a few words, not by memcmp).
#[inline(always)]
fn lit<const N: usize>(s: &[u8], at: usize, pattern: &[u8; N]) -> bool {
    s.get(at..at + N)
        .and_then(|w| <&[u8; N]>::try_from(w).ok())
        .is_some_and(|w| w == pattern)
}

/// A plain string of at most 16 bytes, from its first byte, as one integer: its bytes,
/// the rest zero. A string read by `plain` has no NUL (a control character), so two
/// strings are one integer only when they are the same string; the intern tables then
/// compare integers, not bytes. `None` for a longer string, or one too near the end of
/// the text to be read as a whole word.
fn pack(s: &[u8], from: usize, len: usize) -> Option<u128> {
    if len > 16 {
        return None;
    }
    let word: [u8; 16] = s.get(from..from + 16)?.try_into().ok()?;
    let word = u128::from_le_bytes(word);
    Some(if len == 16 {
        word
    } else {
        word & ((1u128 << (8 * len)) - 1)
    })
}

/// One fill object from its `{`: its row and the index after its `}`. Every key once,
/// each of its own type, the required ones present, no other key.
fn row<'a>(text: &'a str, s: &[u8], at: usize) -> Option<(FillRow<'a>, usize)> {
    if s.get(at) != Some(&b'{') {
        return None;
    }
    let mut at = ws(s, at + 1);
    let mut seen = 0u16;
    let (mut id, mut account, mut exchange, mut symbol, mut side) = (None, None, None, None, None);
    let (mut quantity, mut price, mut time) = (None, None, None);
    let (mut commission, mut commission_currency) = (None, None);
    let (mut commission_known, mut closes) = (None, None);
    let (mut account_key, mut exchange_key, mut symbol_key) = (None, None, None);
    loop {
        let (key, value) = fill_key(s, at)?;
        let next = match key {
            0 => {
                let (v, next) = any_string(text, s, value)?;
                id = Some(v);
                next
            }
            1 => {
                let (v, next) = plain(text, s, value)?;
                account = Some(v);
                account_key = pack(s, value + 1, v.len());
                next
            }
            2 => {
                let (v, next) = plain(text, s, value)?;
                exchange = Some(v);
                exchange_key = pack(s, value + 1, v.len());
                next
            }
            3 => {
                let (v, next) = plain(text, s, value)?;
                symbol = Some(v);
                symbol_key = pack(s, value + 1, v.len());
                next
            }
            4 => {
                let (v, next) = plain(text, s, value)?;
                side = Some(v);
                next
            }
            5 => {
                let (v, next) = plain(text, s, value)?;
                quantity = Some(v);
                next
            }
            6 => {
                let (v, next) = plain(text, s, value)?;
                price = Some(v);
                next
            }
            7 => {
                let (v, next) = plain(text, s, value)?;
                time = Some(v);
                next
            }
            8 => {
                let (v, next) = optional(text, s, value)?;
                commission = v;
                next
            }
            9 => {
                let (v, next) = optional(text, s, value)?;
                commission_currency = v;
                next
            }
            10 => {
                let (v, next) = flag(s, value)?;
                commission_known = v;
                next
            }
            11 => {
                let (v, next) = flag(s, value)?;
                closes = v;
                next
            }
            _ => return None,
        };
        if seen & (1 << key) != 0 {
            return None;
        }
        seen |= 1 << key;
        at = ws(s, next);
        match *s.get(at)? {
            b',' => at = ws(s, at + 1),
            b'}' => break,
            _ => return None,
        }
    }
    Some((
        FillRow {
            id: id?,
            account_key,
            instrument_key: exchange_key.zip(symbol_key),
            account: account?,
            exchange: exchange?,
            symbol: symbol?,
            side: side?,
            quantity: quantity?,
            price: price?,
            commission,
            commission_currency,
            commission_known,
            time: time?,
            closes,
        },
        at + 1,
    ))
}

/// The rows read before the room for the rest is reserved from their size.
const SAMPLE_ROWS: usize = 1024;

/// Room for the fills still to come, counted from the bytes the first `rows` took and
/// the `rest` of the text to the end of the file, with an eighth more: the vector is
/// then allocated once, not doubled (each doubling a copy and fresh pages). The rest is
/// taken to the end of the file by both threads, so the first part's vector, which
/// becomes the book's, also has room for the second part's fills. Room never written is
/// never touched, so an estimate too large costs no memory.
fn room(rows: usize, bytes: usize, rest: usize) -> usize {
    let per_row = (bytes / rows.max(1)).max(1);
    let more = rest / per_row;
    more + more / 8 + 16
}

/// How a run of rows ended.
enum End {
    /// At the array's `]`; the index after it.
    Array(usize),
    /// At the comma asked for (a boundary between two fills).
    Split,
}

/// The fills from the first row at `at`, each checked as it is read, up to the array's
/// end or up to the comma at `stop` if the rows arrive exactly there. `None` at a fault,
/// or when `quit` is raised (the first thread's fault: the second's read is of no use).
fn rows<'a>(
    text: &'a str,
    at: usize,
    stop: Option<usize>,
    quit: &AtomicBool,
) -> Option<(Fills<'a>, End)> {
    let s = text.as_bytes();
    let start = at;
    let mut out = Fills::with_capacity(SAMPLE_ROWS);
    let mut at = at;
    loop {
        let (row, next) = row(text, s, at)?;
        let fill = out.fill(&row)?;
        out.fills.push(fill);
        if out.fills.len() == SAMPLE_ROWS {
            out.reserve(room(SAMPLE_ROWS, next - start, s.len() - next));
        }
        at = ws(s, next);
        if Some(at) == stop {
            // Sorted here, on this part's own thread (`Fills::resolve` walks them).
            out.id_hashes.sort_unstable();
            return Some((out, End::Split));
        }
        match *s.get(at)? {
            b',' => at = ws(s, at + 1),
            b']' => {
                out.id_hashes.sort_unstable();
                return Some((out, End::Array(at + 1)));
            }
            _ => return None,
        }
        if out.fills.len().is_multiple_of(4096) && quit.load(Ordering::Relaxed) {
            return None;
        }
    }
}

/// A comma between two fills near `from`: `},` then `{`, with any whitespace. Its index
/// and the index of the next fill's `{`.
fn boundary(s: &[u8], from: usize) -> Option<(usize, usize)> {
    let window = s.get(from..s.len().min(from + SPLIT_WINDOW))?;
    let mut k = 0;
    while k < window.len() {
        k += window.get(k..)?.iter().position(|b| *b == b'}')? + 1;
        let comma = ws(s, from + k);
        if s.get(comma) == Some(&b',') {
            let next = ws(s, comma + 1);
            if s.get(next) == Some(&b'{') {
                return Some((comma, next));
            }
        }
    }
    None
}

/// The fills array starting at `at`: its parts in file order and the index after it.
fn fills_array(text: &str, at: usize) -> Option<(Vec<Fills<'_>>, usize)> {
    let s = text.as_bytes();
    if s.get(at) != Some(&b'[') {
        return None;
    }
    let first = ws(s, at + 1);
    if s.get(first) == Some(&b']') {
        return Some((vec![Fills::with_capacity(0)], first + 1));
    }
    let quit = AtomicBool::new(false);
    // The first thread is never stopped: when the guess was not a boundary, its read
    // is the whole array whatever the second thread met.
    let never = AtomicBool::new(false);
    let rest = s.len() - first;
    let split = if rest >= PARALLEL_BYTES {
        boundary(s, first + rest / 2)
    } else {
        None
    };
    let Some((comma, next)) = split else {
        return match rows(text, first, None, &never)? {
            (part, End::Array(end)) => Some((vec![part], end)),
            (_, End::Split) => None,
        };
    };
    std::thread::scope(|scope| {
        let second = scope.spawn(|| rows(text, next, None, &quit));
        let read = rows(text, first, Some(comma), &never);
        if read.is_none() {
            quit.store(true, Ordering::Relaxed);
        }
        let theirs = second.join().ok().flatten();
        match read? {
            // The guess was a real boundary: the second thread's rows follow ours.
            (mine, End::Split) => match theirs? {
                (tail, End::Array(end)) => Some((vec![mine, tail], end)),
                (_, End::Split) => None,
            },
            // Not a boundary (it sat inside a string): our read went on to the end.
            (mine, End::Array(end)) => Some((vec![mine], end)),
        }
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn fill(i: usize, id: &str) -> String {
        format!(
            r#"{{"id":"{id}","account":"US","exchange":"NASDAQ","symbol":"S{:03}","side":"buy","quantity":"{}","price":"12.5","commission":"1","time":"2025-01-02T10:00:00Z"}}"#,
            i % 100,
            1 + i % 7
        )
    }

    /// A fills array of `n` rows, `id` naming each, and the count read from it.
    fn array(n: usize, id: impl Fn(usize) -> String, sep: &str) -> String {
        let rows: Vec<String> = (0..n).map(|i| fill(i, &id(i))).collect();
        format!("[{}]", rows.join(sep))
    }

    fn read(text: &str) -> Option<(Vec<usize>, usize)> {
        let (parts, end) = fills_array(text, 0)?;
        Some((parts.iter().map(|p| p.fills.len()).collect(), end))
    }

    #[test]
    fn a_large_array_is_read_in_two_parts_that_add_up() {
        for sep in [",", " ,\r\n\t ", ",\n    "] {
            let text = array(20_000, |i| format!("F{i}"), sep);
            assert!(text.len() > PARALLEL_BYTES);
            let (parts, end) = read(&text).unwrap();
            assert_eq!(parts.len(), 2, "{sep:?}");
            assert_eq!(parts.iter().sum::<usize>(), 20_000);
            assert_eq!(end, text.len());
        }
        // A small one in one part.
        let text = array(100, |i| format!("F{i}"), ",");
        assert_eq!(read(&text).unwrap(), (vec![100], text.len()));
    }

    #[test]
    fn a_boundary_guessed_inside_a_string_is_read_through_by_the_first_thread() {
        // The middle of the text falls in one long id that looks like the end of a fill
        // and the start of the next one, over and over.
        for look in ["},{x", r#"\"},{\"id\":\"G"#, "} , {"] {
            let long = look.repeat(300_000 / look.len());
            let text = array(
                20_000,
                |i| {
                    if i == 10_000 {
                        long.clone()
                    } else {
                        format!("F{i}")
                    }
                },
                ",",
            );
            let (start, middle) = (text.find(&long).unwrap(), text.len() / 2);
            assert!(start < middle && middle + SPLIT_WINDOW < start + long.len());
            let (parts, end) = read(&text).unwrap();
            assert_eq!((parts, end), (vec![20_000], text.len()), "{look}");
        }
        // Ids like that everywhere: wherever the guess falls, every fill is read once.
        let text = array(20_000, |i| format!("F{i}}},{{x"), ",");
        let (parts, _) = read(&text).unwrap();
        assert_eq!(parts.iter().sum::<usize>(), 20_000);
    }

    #[test]
    fn a_fault_in_either_part_refuses_the_array() {
        let good = array(20_000, |i| format!("F{i}"), ",");
        for at in [100, 9_999, 10_000, 10_001, 19_999] {
            let marker = format!(r#""id":"F{at}","#);
            for bad in [
                format!(r#""id":"F{at}","note":"x","#),
                format!(r#""id":"F{at}","id":"G","#),
                format!(r#""id":"F{at}","side":"hold","#),
                format!(r#""id":"F{at}",,"#),
            ] {
                let text = good.replacen(&marker, &bad, 1);
                assert_ne!(text, good);
                assert!(read(&text).is_none(), "{bad}");
            }
        }
        assert!(read(&good[..good.len() - 1]).is_none());
    }

    #[test]
    fn every_fill_key_is_told_whole() {
        let keys = [
            "id",
            "account",
            "exchange",
            "symbol",
            "side",
            "quantity",
            "price",
            "time",
            "commission",
            "commission_currency",
            "commission_known",
            "closes",
        ];
        for (n, key) in keys.iter().enumerate() {
            let text = format!("\"{key}\" :\t\"v\"");
            let s = text.as_bytes();
            assert_eq!(fill_key(s, 0), Some((n, text.len() - 3)), "{key}");
            for other in [
                format!("\"{key}x\":1"),
                format!("\"{key}"),
                format!("\"{key}\"1"),
            ] {
                assert_eq!(fill_key(other.as_bytes(), 0), None, "{other}");
            }
        }
        for other in ["\"note\":1", "\"\\u0069d\":1", "\"sid\":1", "\"\":1", "\""] {
            assert_eq!(fill_key(other.as_bytes(), 0), None, "{other}");
        }
    }

    #[test]
    fn values_end_where_json_says() {
        let s = br#"{"a":"x\"}","b":[1,{"c":"]"}]} ,"#;
        assert_eq!(value_end(s, 0), Some(s.len() - 2));
        assert_eq!(value_end(b"\"a\\\\\" ,", 0), Some(5));
        assert_eq!(value_end(b"123 ,", 0), Some(3));
        assert_eq!(value_end(b"null}", 0), Some(4));
        // A control character in a string, an unclosed array, deep nesting.
        assert_eq!(value_end(b"\"a\tb\"", 0), None);
        assert_eq!(value_end(b"[1,2", 0), None);
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert_eq!(value_end(deep.as_bytes(), 0), None);
    }

    #[test]
    fn the_top_level_is_an_object_of_known_keys_each_once() {
        let fills = array(2, |i| format!("F{i}"), ",");
        let ok = format!(r#" {{"format":"tradedesk-book/1", "fills":{fills} , "cash":null}}  "#);
        let read = top(&ok).unwrap();
        assert_eq!(read.sections[0], Some(r#""tradedesk-book/1""#));
        assert_eq!(read.sections[5], Some("null"));
        assert_eq!(read.fills.len(), 1);
        for bad in [
            format!(r#"{{"format":"a","format":"b","fills":{fills}}}"#),
            format!(r#"{{"fills":{fills},"fills":{fills}}}"#),
            format!(r#"{{"fills":{fills},"other":1}}"#),
            format!(r#"{{"fills":{fills}}} x"#),
            format!(r#"{{"fills":{fills}"#),
            format!("\u{feff}{{\"fills\":{fills}}}"),
            format!(r#"{{"f\u0069lls":{fills}}}"#),
            format!(r#"[{{"fills":{fills}}}]"#),
            r#"{"format":"a"}"#.to_owned(),
        ] {
            assert!(top(&bad).is_none(), "{bad}");
        }
    }
}
