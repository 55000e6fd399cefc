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
//! - the columns: instants, open, high, low, close, volume;
//! - the times: nothing for dates; each bar's suffix code (16 bits) for stamps; each
//!   bar's end in the texts and then the texts for kept texts.
//!
//! The checksum covers everything but itself: each part (the header and the path, each
//! column, the times) is summed alone and the parts' sums combined, so the columns can be
//! read on two threads. A file is used only when all of it checks:
//! the magic and version, the key against the source file's key now, the length the
//! header implies against the file's, the checksum, and the times (UTF-8, ends in order);
//! anything else and the caller parses the source as if there were no file. Writing is
//! best effort: a directory that cannot be written only means the next process parses.

use std::fs::File;
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use super::{BarTable, FileKey, TimeText};
use crate::research::BarColumns;

/// The directory under the state directory that holds the column files.
pub const COLUMN_DIR: &str = "bar-columns";

/// The most disk the column files take together (1 GiB, about 20 files of a million
/// bars); the least recently used files are removed first.
pub const DISK_BYTES: u64 = 1 << 30;

const MAGIC: [u8; 8] = *b"TDBARCOL";
const VERSION: u64 = 1;
const HEADER_WORDS: usize = 16;
const HEADER_BYTES: usize = HEADER_WORDS * 8;
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

/// The file's checksum: its parts' sums, in order, combined.
fn combine(parts: &[u64]) -> u64 {
    let mut h = parts.len() as u64;
    for &part in parts {
        h = (h ^ part).wrapping_mul(LANE_KEYS[0]).rotate_left(31);
    }
    h ^ (h >> 29)
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
        (HEADER_BYTES as u64)
            .checked_add(pad(self.path_len)?)?
            .checked_add(column.checked_mul(6)?)?
            .checked_add(times)
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
    out.put(&header)?;
    out.put(path)?;
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
    let checksum = combine(&out.parts);
    let mut file = out.file;
    file.seek(SeekFrom::Start(CHECKSUM_AT as u64)).ok()?;
    file.write_all(&checksum.to_le_bytes()).ok()?;
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

/// A part of the file, read a block at a time into a buffer that stays in the cache,
/// and summed as it comes.
struct In {
    file: File,
    buf: Vec<u8>,
}

impl In {
    /// The file at `at`, from byte `offset`.
    fn open(at: &Path, offset: u64) -> Option<Self> {
        let mut file = File::open(at).ok()?;
        file.seek(SeekFrom::Start(offset)).ok()?;
        Some(Self {
            file,
            buf: vec![0u8; BLOCK],
        })
    }

    /// Reads the next part, `bytes` bytes (a multiple of 32), handing each block to
    /// `each`; returns the part's sum.
    fn part(&mut self, bytes: u64, mut each: impl FnMut(&[u8])) -> Option<u64> {
        let mut sum = Sum::new();
        let mut left = bytes;
        while left > 0 {
            let take = usize::try_from(left.min(BLOCK as u64)).ok()?;
            let buf = self.buf.get_mut(..take)?;
            self.file.read_exact(buf).ok()?;
            sum.add(buf);
            each(buf);
            left -= take as u64;
        }
        Some(sum.finish())
    }

    /// A part of `n` words, and its sum.
    fn words<T>(&mut self, n: usize, of: impl Fn([u8; 8]) -> T) -> Option<(Vec<T>, u64)> {
        let mut col = Vec::with_capacity(n);
        let sum = self.part(pad(n as u64 * 8)?, |block| {
            let room = n - col.len();
            col.extend(
                block
                    .chunks_exact(8)
                    .take(room)
                    .map(|w| of(w.try_into().unwrap_or_default())),
            );
        })?;
        Some((col, sum))
    }

    /// A part of `n` bytes, and its sum.
    fn bytes(&mut self, n: u64) -> Option<(Vec<u8>, u64)> {
        let mut out = Vec::with_capacity(usize::try_from(n).ok()?);
        let sum = self.part(pad(n)?, |block| {
            let room = usize::try_from(n).unwrap_or(0) - out.len();
            out.extend_from_slice(block.get(..room.min(block.len())).unwrap_or_default());
        })?;
        Some((out, sum))
    }

    /// The times' part(s) of a file of `n` bars, and their sums.
    fn times(&mut self, shape: Shape, n: usize, sums: &mut Vec<u64>) -> Option<TimeText> {
        Some(match shape.kind {
            DATES => TimeText::Dates,
            STAMPS => {
                let mut codes = Vec::with_capacity(n);
                let sum = self.part(pad(shape.bars.checked_mul(2)?)?, |block| {
                    let room = n - codes.len();
                    codes.extend(
                        block
                            .chunks_exact(2)
                            .take(room)
                            .map(|c| i16::from_le_bytes(c.try_into().unwrap_or_default())),
                    );
                })?;
                sums.push(sum);
                TimeText::Stamps(codes)
            }
            _ => {
                let (ends, sum) = self.words(n, u64::from_le_bytes)?;
                sums.push(sum);
                let (text, sum) = self.bytes(shape.text_len)?;
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
/// exactly this key and every check passes; `None` otherwise (no file, another version
/// of the source, a file cut short, spoilt or of another format). The first three
/// columns are read on a second thread, the rest and the times on this one.
pub(super) fn read(dir: &Path, key: &FileKey) -> Option<BarTable> {
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
    // The header and the path: one part.
    let mut first = Sum::new();
    let mut summed = header;
    summed
        .get_mut(CHECKSUM_AT..CHECKSUM_AT + 8)?
        .copy_from_slice(&[0; 8]);
    first.add(&summed);
    let mut stored = vec![0u8; usize::try_from(pad(path_len)?).ok()?];
    file.read_exact(&mut stored).ok()?;
    first.add(&stored);
    if stored.get(..path.len())? != path {
        return None;
    }
    drop(file);
    let columns_at = HEADER_BYTES as u64 + pad(path_len)?;
    let column = pad(bars.checked_mul(8)?)?;
    let (early, late) = std::thread::scope(|scope| {
        let early = scope.spawn(|| {
            let mut input = In::open(&at, columns_at)?;
            let (instant, a) = input.words(n, i64::from_le_bytes)?;
            let (open, b) = input.words(n, f64::from_le_bytes)?;
            let (high, c) = input.words(n, f64::from_le_bytes)?;
            Some(((instant, open, high), [a, b, c]))
        });
        let late = (|| {
            let mut input = In::open(&at, columns_at.checked_add(column.checked_mul(3)?)?)?;
            let mut sums = Vec::with_capacity(5);
            let mut float = || {
                input.words(n, f64::from_le_bytes).map(|(col, sum)| {
                    sums.push(sum);
                    col
                })
            };
            let (low, close, volume) = (float()?, float()?, float()?);
            let times = input.times(shape, n, &mut sums)?;
            Some(((low, close, volume, times), sums))
        })();
        (early.join().ok().flatten(), late)
    });
    let ((instant, open, high), early_sums) = early?;
    let ((low, close, volume, times), late_sums) = late?;
    let mut parts = vec![first.finish()];
    parts.extend(early_sums);
    parts.extend(late_sums);
    if combine(&parts) != checksum {
        return None;
    }
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
