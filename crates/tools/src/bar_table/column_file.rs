//! A parsed bar file kept on disk beside the server's state, so a new process reads its
//! columns back at memory speed instead of parsing the text again (docs/benchmarks.md,
//! "The whole tool call", and docs/methodology/research.md, "Bar sources").
//!
//! One file per source path, named by a hash of the path, written whole to a temporary
//! name and renamed into place. All numbers are little-endian 64-bit words; every part
//! is padded with zeros to 32 bytes:
//!
//! - the header, 16 words: the magic, the format version, the checksum, the number of
//!   bars, how the times are written back (0 dates, 1 stamps with suffix codes, 2 kept
//!   texts), whether any bar has a volume, the bits of `bars_per_year`, the length of the
//!   kept texts, the length of the source's path, and the source's key (its length, its
//!   modification time, its device, inode and change time);
//! - the source's path;
//! - the parts' sums, 8 words: each column's, then the times' one or two (0 for none);
//! - the columns: instants, open, high, low, close, volume;
//! - the times: nothing for dates; each bar's suffix code (16 bits) for stamps; each
//!   bar's end in the texts and then the texts for kept texts.
//!
//! The header's checksum covers the header (its own word as zero), the path and the
//! parts' sums; each later part is checked against its sum there as it is read, so the
//! columns can be read on two threads, each straight into its final memory, and a
//! caller that needs only some columns reads (and checks) only those, the instants, the
//! opens, the closes and the times always (a backtest whose rules read no high, low or
//! volume reads half the file). A file is used only when all that is read checks: the
//! magic and version, the key against the source file's key now, the length the header
//! implies against the file's, the sums, and the times (UTF-8, ends in order); anything
//! else and the caller parses the source as if there were no file. Version 1 (one
//! checksum over all the parts) is no longer read: its files are parsed again and
//! rewritten. Writing is best effort: a directory that cannot be written only means the
//! next process parses.

use std::fs::File;
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use super::{BarTable, FileKey, Needs, TimeText};
use crate::research::BarColumns;

/// The directory under the state directory that holds the column files.
pub const COLUMN_DIR: &str = "bar-columns";

/// The most disk the column files take together (1 GiB, about 20 files of a million
/// bars); the least recently used files are removed first.
pub const DISK_BYTES: u64 = 1 << 30;

const MAGIC: [u8; 8] = *b"TDBARCOL";
const VERSION: u64 = 2;
const HEADER_WORDS: usize = 16;
const HEADER_BYTES: usize = HEADER_WORDS * 8;
/// The parts' sums: the six columns' and the times' one or two.
const SUM_WORDS: usize = 8;
const SUMS_BYTES: usize = SUM_WORDS * 8;
/// Where the checksum is, in bytes.
const CHECKSUM_AT: usize = 16;
/// The kinds of times.
const DATES: u64 = 0;
const STAMPS: u64 = 1;
const KEPT: u64 = 2;
/// Bytes read or written at a time (a multiple of 32; stays in the processor's cache).
const BLOCK: usize = 256 * 1024;
/// A longer path is not kept (no real path is this long).
const MAX_PATH_BYTES: u64 = 64 * 1024;
/// A temporary file older than this was left by a process that stopped while writing.
const STALE_TEMP: Duration = Duration::from_secs(3_600);
const EXT: &str = "cols";
const TEMP_EXT: &str = "tmp";

/// Rounds `n` up to a multiple of 32.
fn pad(n: u64) -> Option<u64> {
    n.checked_next_multiple_of(32)
}

// ---------------------------------------------------------------------------------------
// The checksum: four lanes of 64-bit words, each step `(lane ^ word) * odd, rotated`, a
// bijection of the lane for a fixed word, so a change in any one word always changes the
// sum. It runs at several bytes a cycle, beside the copy from the page cache.

const LANE_KEYS: [u64; 4] = [
    0x9E37_79B9_7F4A_7C15,
    0xC2B2_AE3D_27D4_EB4F,
    0x1656_67B1_9E37_79F9,
    0x85EB_CA77_C2B2_AE63,
];

#[derive(Debug, Clone)]
struct Sum {
    lanes: [u64; 4],
}

impl Sum {
    fn new() -> Self {
        Self { lanes: LANE_KEYS }
    }

    /// Adds `bytes`, whose length is a multiple of 32.
    fn add(&mut self, bytes: &[u8]) {
        for block in bytes.chunks_exact(32) {
            for (lane, (word, key)) in self
                .lanes
                .iter_mut()
                .zip(block.chunks_exact(8).zip(LANE_KEYS))
            {
                let w = u64::from_le_bytes(word.try_into().unwrap_or_default());
                *lane = (*lane ^ w).wrapping_mul(key).rotate_left(29);
            }
        }
    }

    fn finish(&self) -> u64 {
        let mut h = 0u64;
        for (lane, key) in self.lanes.iter().zip(LANE_KEYS) {
            h = (h ^ lane).wrapping_mul(key).rotate_left(31);
        }
        h ^ (h >> 29)
    }
}

/// The header's checksum: over the header with that word zero, the padded path and the
/// parts' sums.
fn head_sum(header: &[u8; HEADER_BYTES], path_and_sums: &[u8]) -> Option<u64> {
    let mut summed = *header;
    summed
        .get_mut(CHECKSUM_AT..CHECKSUM_AT + 8)?
        .copy_from_slice(&[0; 8]);
    let mut sum = Sum::new();
    sum.add(&summed);
    sum.add(path_and_sums);
    Some(sum.finish())
}

// ---------------------------------------------------------------------------------------
// The source's key and the file's layout.

/// A time as two words: seconds, and nanoseconds (bit 32 set before 1970; all ones for
/// no time).
fn time_words(t: Option<SystemTime>) -> [u64; 2] {
    match t.map(|t| t.duration_since(SystemTime::UNIX_EPOCH)) {
        None => [0, u64::MAX],
        Some(Ok(d)) => [d.as_secs(), u64::from(d.subsec_nanos())],
        Some(Err(e)) => {
            let d = e.duration();
            [d.as_secs(), u64::from(d.subsec_nanos()) | 1 << 32]
        }
    }
}

/// The key's words, as the header holds them (the path apart).
fn key_words(key: &FileKey) -> [u64; 7] {
    let [secs, nanos] = time_words(key.modified);
    #[cfg(unix)]
    let (dev, ino, ctime, ctime_nsec) = (
        key.id.0,
        key.id.1,
        key.id.2.cast_unsigned(),
        key.id.3.cast_unsigned(),
    );
    #[cfg(not(unix))]
    let (dev, ino, ctime, ctime_nsec) = (0, 0, 0, 0);
    [key.len, secs, nanos, dev, ino, ctime, ctime_nsec]
}

fn path_bytes(path: &Path) -> &[u8] {
    path.as_os_str().as_encoded_bytes()
}

/// The column file of the source at `source`, in `dir`.
pub(super) fn file_for(dir: &Path, source: &Path) -> PathBuf {
    let bytes = path_bytes(source);
    let mut sum = Sum::new();
    let mut padded = bytes.to_vec();
    padded.resize(bytes.len().next_multiple_of(32), 0);
    sum.add(&padded);
    sum.add(&(bytes.len() as u64).to_le_bytes().repeat(4));
    dir.join(format!("{:016x}.{EXT}", sum.finish()))
}

/// What the header says, and the length of the file it implies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Shape {
    bars: u64,
    kind: u64,
    text_len: u64,
    path_len: u64,
}

impl Shape {
    fn of(table: &BarTable, path_len: usize) -> Self {
        let (kind, text_len) = match &table.times {
            TimeText::Dates => (DATES, 0),
            TimeText::Stamps(_) => (STAMPS, 0),
            TimeText::Kept { text, .. } => (KEPT, text.len() as u64),
        };
        Self {
            bars: table.len() as u64,
            kind,
            text_len,
            path_len: path_len as u64,
        }
    }

    /// The file's length in bytes; `None` for a shape no file has.
    fn file_len(&self) -> Option<u64> {
        if self.path_len > MAX_PATH_BYTES {
            return None;
        }
        let column = pad(self.bars.checked_mul(8)?)?;
        let times = match self.kind {
            DATES if self.text_len == 0 => 0,
            STAMPS if self.text_len == 0 => pad(self.bars.checked_mul(2)?)?,
            KEPT => column.checked_add(pad(self.text_len)?)?,
            _ => return None,
        };
        self.columns_at()?
            .checked_add(column.checked_mul(6)?)?
            .checked_add(times)
    }

    /// Where the columns start, in bytes.
    fn columns_at(&self) -> Option<u64> {
        (HEADER_BYTES as u64 + SUMS_BYTES as u64).checked_add(pad(self.path_len)?)
    }
}

// ---------------------------------------------------------------------------------------
// Writing.

/// Bytes on their way to the file, handed out a multiple of 32 at a time.
struct Out {
    file: File,
    buf: Vec<u8>,
    sum: Sum,
    /// The sums of the parts written.
    parts: Vec<u64>,
}

impl Out {
    /// Writes what is whole (a multiple of 32 bytes), or, with `all`, everything.
    fn flush(&mut self, all: bool) -> Option<()> {
        let whole = if all {
            self.buf.len()
        } else {
            self.buf.len() / 32 * 32
        };
        let head = self.buf.get(..whole)?;
        self.sum.add(head);
        self.file.write_all(head).ok()?;
        self.buf.drain(..whole);
        Some(())
    }

    fn put(&mut self, bytes: &[u8]) -> Option<()> {
        self.buf.extend_from_slice(bytes);
        if self.buf.len() >= BLOCK {
            self.flush(false)?;
        }
        Some(())
    }

    /// Ends a part: zeros to the next multiple of 32, written, and its sum kept.
    fn end_part(&mut self) -> Option<()> {
        let len = self.buf.len() as u64;
        self.buf.resize(usize::try_from(pad(len)?).ok()?, 0);
        self.flush(true)?;
        self.parts.push(self.sum.finish());
        self.sum = Sum::new();
        Some(())
    }

    fn words(&mut self, words: impl Iterator<Item = u64>) -> Option<()> {
        let mut block = Vec::with_capacity(BLOCK);
        for w in words {
            block.extend_from_slice(&w.to_le_bytes());
            if block.len() >= BLOCK {
                self.put(&block)?;
                block.clear();
            }
        }
        self.put(&block)?;
        self.end_part()
    }
}

fn write_file(file: File, key: &FileKey, table: &BarTable) -> Option<()> {
    let path = path_bytes(&key.path);
    let shape = Shape::of(table, path.len());
    let mut out = Out {
        file,
        buf: Vec::with_capacity(BLOCK * 2),
        sum: Sum::new(),
        parts: Vec::with_capacity(8),
    };
    let mut header = Vec::with_capacity(HEADER_BYTES);
    header.extend_from_slice(&MAGIC);
    let words = [
        VERSION,
        0, // the checksum, written last
        shape.bars,
        shape.kind,
        u64::from(table.has_volume),
        table.columns.bars_per_year.to_bits(),
        shape.text_len,
        shape.path_len,
    ];
    for w in words.into_iter().chain(key_words(key)) {
        header.extend_from_slice(&w.to_le_bytes());
    }
    let header: [u8; HEADER_BYTES] = header.try_into().ok()?;
    // The path and room for the parts' sums, written when they are known.
    let mut path_and_sums = path.to_vec();
    path_and_sums.resize(usize::try_from(pad(shape.path_len)?).ok()? + SUMS_BYTES, 0);
    out.put(&header)?;
    out.put(&path_and_sums)?;
    out.end_part()?;
    let c = &table.columns;
    out.words(c.instant.iter().map(|&v| v.cast_unsigned()))?;
    for col in [&c.open, &c.high, &c.low, &c.close, &c.volume] {
        out.words(col.iter().map(|v| v.to_bits()))?;
    }
    match &table.times {
        TimeText::Dates => {}
        TimeText::Stamps(codes) => {
            for chunk in codes.chunks(BLOCK / 2) {
                let bytes: Vec<u8> = chunk.iter().flat_map(|c| c.to_le_bytes()).collect();
                out.put(&bytes)?;
            }
            out.end_part()?;
        }
        TimeText::Kept { text, ends } => {
            out.words(ends.iter().map(|&e| e as u64))?;
            out.put(text.as_bytes())?;
            out.end_part()?;
        }
    }
    // The first part's sum is not kept: the header's checksum covers it.
    let sums = out.parts.get(1..)?;
    if sums.len() > SUM_WORDS {
        return None;
    }
    let at = path_and_sums.len() - SUMS_BYTES;
    for (room, sum) in path_and_sums.get_mut(at..)?.chunks_exact_mut(8).zip(sums) {
        room.copy_from_slice(&sum.to_le_bytes());
    }
    let checksum = head_sum(&header, &path_and_sums)?;
    let mut file = out.file;
    file.seek(SeekFrom::Start(CHECKSUM_AT as u64)).ok()?;
    file.write_all(&checksum.to_le_bytes()).ok()?;
    file.seek(SeekFrom::Start((HEADER_BYTES + at) as u64))
        .ok()?;
    file.write_all(path_and_sums.get(at..)?).ok()?;
    let written = file.metadata().ok()?.len();
    (Some(written) == shape.file_len()).then_some(())
}

static TEMP_COUNT: AtomicU64 = AtomicU64::new(0);

/// Writes `table`, parsed from the source whose key is `key`, as the source's column file
/// in `dir` (made if missing): to a temporary file, then renamed over the old one; then
/// removes the least recently used files until all of them fit in `cap` bytes. Returns
/// whether the file was written; a failure leaves no file behind.
pub(super) fn write(dir: &Path, key: &FileKey, table: &BarTable, cap: u64) -> bool {
    let shape = Shape::of(table, path_bytes(&key.path).len());
    if shape.file_len().is_none_or(|len| len > cap) {
        return false;
    }
    if std::fs::create_dir_all(dir).is_err() {
        return false;
    }
    let target = file_for(dir, &key.path);
    let temp = dir.join(format!(
        ".{}.{}-{}.{TEMP_EXT}",
        target
            .file_stem()
            .map(|s| s.to_string_lossy())
            .unwrap_or_default(),
        std::process::id(),
        TEMP_COUNT.fetch_add(1, Ordering::Relaxed)
    ));
    let done = File::options()
        .write(true)
        .create_new(true)
        .open(&temp)
        .ok()
        .and_then(|file| write_file(file, key, table))
        .is_some()
        && std::fs::rename(&temp, &target).is_ok();
    if !done {
        let _ = std::fs::remove_file(&temp);
        return false;
    }
    sweep(dir, cap, &target);
    true
}

/// Removes column files, the least recently used first, until the rest fit in `cap`
/// (`keep` stays), and temporary files left by processes that stopped while writing.
fn sweep(dir: &Path, cap: u64, keep: &Path) {
    let Ok(list) = std::fs::read_dir(dir) else {
        return;
    };
    let now = SystemTime::now();
    let mut files = Vec::new();
    for entry in list.flatten() {
        let path = entry.path();
        let Ok(meta) = entry.metadata() else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        let used = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        match path.extension().and_then(|e| e.to_str()) {
            Some(TEMP_EXT) if now.duration_since(used).is_ok_and(|age| age > STALE_TEMP) => {
                let _ = std::fs::remove_file(&path);
            }
            Some(EXT) => files.push((used, meta.len(), path)),
            _ => {}
        }
    }
    let mut total: u64 = files.iter().map(|f| f.1).sum();
    files.sort();
    for (_, len, path) in files {
        if total <= cap {
            break;
        }
        if path != keep && std::fs::remove_file(&path).is_ok() {
            total = total.saturating_sub(len);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Reading.

/// A part of the file, read straight into the memory of the column it becomes (a
/// safe byte view of it, one `read_exact` a block at a time) and summed as it comes,
/// while the block is still in the processor's cache.
struct In {
    file: File,
}

impl In {
    /// The file at `at`, from byte `offset`.
    fn open(at: &Path, offset: u64) -> Option<Self> {
        let mut file = File::open(at).ok()?;
        file.seek(SeekFrom::Start(offset)).ok()?;
        Some(Self { file })
    }

    /// Reads `bytes.len()` bytes into `bytes`, then the zeros that pad them to a
    /// multiple of 32; returns the part's sum.
    fn fill(&mut self, bytes: &mut [u8]) -> Option<u64> {
        let mut sum = Sum::new();
        let whole = bytes.len() / 32 * 32;
        let (body, tail) = bytes.split_at_mut(whole);
        for block in body.chunks_mut(BLOCK) {
            self.file.read_exact(block).ok()?;
            sum.add(block);
        }
        if !tail.is_empty() {
            let mut last = [0u8; 32];
            self.file.read_exact(&mut last).ok()?;
            tail.copy_from_slice(last.get(..tail.len())?);
            sum.add(&last);
        }
        Some(sum.finish())
    }

    /// A part of `n` little-endian values, and its sum.
    fn column<T: bytemuck::Pod>(&mut self, n: usize) -> Option<(Vec<T>, u64)> {
        let mut col: Vec<T> = bytemuck::allocation::zeroed_vec(n);
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut col);
        let sum = self.fill(bytes)?;
        #[cfg(target_endian = "big")]
        for value in bytes.chunks_exact_mut(size_of::<T>()) {
            value.reverse();
        }
        Some((col, sum))
    }

    /// The times' part(s) of a file of `n` bars, and their sums.
    fn times(&mut self, shape: Shape, n: usize, sums: &mut Vec<u64>) -> Option<TimeText> {
        Some(match shape.kind {
            DATES => TimeText::Dates,
            STAMPS => {
                let (codes, sum) = self.column::<i16>(n)?;
                sums.push(sum);
                TimeText::Stamps(codes)
            }
            _ => {
                let (ends, sum) = self.column::<u64>(n)?;
                sums.push(sum);
                let (text, sum) = self.column::<u8>(usize::try_from(shape.text_len).ok()?)?;
                sums.push(sum);
                let text = String::from_utf8(text).ok()?;
                let in_order = ends.windows(2).all(|w| w.first() <= w.get(1));
                if !in_order || ends.last().copied().unwrap_or(0) != shape.text_len {
                    return None;
                }
                let ends = ends
                    .into_iter()
                    .map(usize::try_from)
                    .collect::<Result<Vec<_>, _>>()
                    .ok()?;
                TimeText::Kept { text, ends }
            }
        })
    }
}

/// The table kept in `dir` for the source whose key is now `key`, if there is one for
/// exactly this key and every part read checks; `None` otherwise (no file, another
/// version of the source, a file cut short, spoilt or of another format). Only the
/// columns in `needs` are read beside the instants, opens, closes and times (the others
/// are left empty); the first three columns are read on a second thread, the rest and
/// the times on this one.
pub(super) fn read(dir: &Path, key: &FileKey, needs: Needs) -> Option<BarTable> {
    let at = file_for(dir, &key.path);
    let mut file = File::open(&at).ok()?;
    let len = file.metadata().ok()?.len();
    let mut header = [0u8; HEADER_BYTES];
    file.read_exact(&mut header).ok()?;
    let mut words = [0u64; HEADER_WORDS];
    for (w, bytes) in words.iter_mut().zip(header.chunks_exact(8)) {
        *w = u64::from_le_bytes(bytes.try_into().ok()?);
    }
    let [
        magic,
        version,
        checksum,
        bars,
        kind,
        has_volume,
        bars_per_year,
        text_len,
        path_len,
        key_at @ ..,
    ] = words;
    if magic != u64::from_le_bytes(MAGIC) || version != VERSION || has_volume > 1 {
        return None;
    }
    let path = path_bytes(&key.path);
    if key_at != key_words(key) || path_len != path.len() as u64 {
        return None;
    }
    let shape = Shape {
        bars,
        kind,
        text_len,
        path_len,
    };
    if shape.file_len() != Some(len) {
        return None;
    }
    let n = usize::try_from(bars).ok()?;
    // The path and the parts' sums, checked by the header's checksum.
    let mut stored = vec![0u8; usize::try_from(pad(path_len)?).ok()? + SUMS_BYTES];
    file.read_exact(&mut stored).ok()?;
    if head_sum(&header, &stored) != Some(checksum) || stored.get(..path.len())? != path {
        return None;
    }
    drop(file);
    let mut sums = [0u64; SUM_WORDS];
    let sums_at = stored.len() - SUMS_BYTES;
    for (sum, bytes) in sums.iter_mut().zip(stored.get(sums_at..)?.chunks_exact(8)) {
        *sum = u64::from_le_bytes(bytes.try_into().ok()?);
    }
    let columns_at = shape.columns_at()?;
    let column = pad(bars.checked_mul(8)?)?;
    // Column `i` (instants, open, high, low, close, volume), if it is needed: read from
    // its place and checked against its sum; empty if not.
    let read_column = |i: u64, wanted: bool| -> Option<Vec<f64>> {
        if !wanted {
            return Some(Vec::new());
        }
        let mut input = In::open(&at, columns_at.checked_add(column.checked_mul(i)?)?)?;
        let (col, sum) = input.column::<f64>(n)?;
        (Some(&sum) == sums.get(usize::try_from(i).ok()?)).then_some(col)
    };
    let (early, late) = std::thread::scope(|scope| {
        let early = scope.spawn(|| {
            let mut input = In::open(&at, columns_at)?;
            let (instant, sum) = input.column::<i64>(n)?;
            if sum != sums[0] {
                return None;
            }
            Some((instant, read_column(1, true)?, read_column(2, needs.high)?))
        });
        let late = (|| {
            let low = read_column(3, needs.low)?;
            let close = read_column(4, true)?;
            let volume = read_column(5, needs.volume)?;
            let mut input = In::open(&at, columns_at.checked_add(column.checked_mul(6)?)?)?;
            let mut got = Vec::with_capacity(2);
            let times = input.times(shape, n, &mut got)?;
            let want = sums.get(6..6 + got.len())?;
            (got == want).then_some((low, close, volume, times))
        })();
        (early.join().ok().flatten(), late)
    });
    let (instant, open, high) = early?;
    let (low, close, volume, times) = late?;
    // Used now: the last to be removed when the files outgrow their room.
    if let Ok(file) = File::open(&at) {
        let _ = file.set_modified(SystemTime::now());
    }
    Some(BarTable {
        columns: BarColumns {
            instant,
            open,
            high,
            low,
            close,
            volume,
            bars_per_year: f64::from_bits(bars_per_year),
        },
        times,
        has_volume: has_volume == 1,
    })
}
