//! A fill's id: the broker's own text, kept in the fill itself when it is short.
//!
//! A book holds one id per fill, and most ids are short (an execution id, a deal
//! number, `F12345`). Kept as a `String`, each would be an allocation of its own, made
//! when the book is loaded and freed when it is dropped. Up to [`INLINE`] bytes are kept
//! in the fill; a longer id is one boxed `str`. Either way it reads as the same `&str`:
//! equality, order, hashing and printing are those of the text.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

/// The longest id kept in the fill itself, in bytes.
pub const INLINE: usize = 22;

/// A fill's id (see the module's note).
#[derive(Clone)]
pub struct FillId(Repr);

#[derive(Clone)]
enum Repr {
    /// The first `len` bytes of `bytes`, copied from a `str` (so valid UTF-8).
    Inline {
        len: u8,
        bytes: [u8; INLINE],
    },
    Heap(Box<str>),
}

impl FillId {
    pub fn new(text: &str) -> Self {
        let b = text.as_bytes();
        match (u8::try_from(b.len()), b.len() <= INLINE) {
            (Ok(len), true) => {
                let mut bytes = [0u8; INLINE];
                if let Some(head) = bytes.get_mut(..b.len()) {
                    head.copy_from_slice(b);
                }
                Self(Repr::Inline { len, bytes })
            }
            _ => Self(Repr::Heap(text.into())),
        }
    }

    pub fn as_str(&self) -> &str {
        match &self.0 {
            // Copied from a `str` whole, so this never falls back.
            Repr::Inline { len, bytes } => bytes
                .get(..usize::from(*len))
                .and_then(|b| std::str::from_utf8(b).ok())
                .unwrap_or_default(),
            Repr::Heap(text) => text,
        }
    }
}

impl Default for FillId {
    fn default() -> Self {
        Self::new("")
    }
}

impl Deref for FillId {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for FillId {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for FillId {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl From<&str> for FillId {
    fn from(text: &str) -> Self {
        Self::new(text)
    }
}

impl From<String> for FillId {
    fn from(text: String) -> Self {
        if text.len() <= INLINE {
            Self::new(&text)
        } else {
            Self(Repr::Heap(text.into_boxed_str()))
        }
    }
}

impl From<&String> for FillId {
    fn from(text: &String) -> Self {
        Self::new(text)
    }
}

impl From<FillId> for String {
    fn from(id: FillId) -> Self {
        match id.0 {
            Repr::Heap(text) => text.into_string(),
            Repr::Inline { .. } => id.as_str().to_owned(),
        }
    }
}

impl PartialEq for FillId {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for FillId {}

impl PartialEq<str> for FillId {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for FillId {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for FillId {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other.as_str()
    }
}

impl PartialEq<FillId> for str {
    fn eq(&self, other: &FillId) -> bool {
        self == other.as_str()
    }
}

impl PartialEq<FillId> for &str {
    fn eq(&self, other: &FillId) -> bool {
        *self == other.as_str()
    }
}

impl PartialEq<FillId> for String {
    fn eq(&self, other: &FillId) -> bool {
        self.as_str() == other.as_str()
    }
}

impl PartialOrd for FillId {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for FillId {
    fn cmp(&self, other: &Self) -> Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl Hash for FillId {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl fmt::Display for FillId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.as_str(), f)
    }
}

impl fmt::Debug for FillId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl serde::Serialize for FillId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn an_id_reads_as_its_text_short_or_long() {
        let texts = [
            "",
            "F1",
            "0000e0cd.6765c6a1.01.01",
            "exactly-twenty-two-by!",
            "twenty-three-bytes-long",
            "ünïcödé-id-ß",
            "a very long id that is kept on the heap, as a boxed str",
        ];
        let mut set = HashSet::new();
        for text in texts {
            let id = FillId::from(text);
            let owned = FillId::from(text.to_owned());
            assert_eq!(id.as_str(), text);
            assert_eq!(owned.as_str(), text);
            assert_eq!(id, owned);
            assert_eq!(id, text);
            assert_eq!(id.to_string(), text);
            assert_eq!(format!("{id:?}"), format!("{text:?}"));
            assert_eq!(String::from(id.clone()), text);
            assert_eq!(
                serde_json::to_string(&id).ok(),
                serde_json::to_string(text).ok()
            );
            set.insert(id);
        }
        assert_eq!(set.len(), texts.len());
        for text in texts {
            assert!(set.contains(text));
        }
        let mut sorted: Vec<FillId> = texts.iter().map(|t| FillId::from(*t)).collect();
        sorted.sort();
        let mut expected = texts.to_vec();
        expected.sort_unstable();
        assert_eq!(sorted, expected);
        assert_eq!(std::mem::size_of::<FillId>(), std::mem::size_of::<String>());
    }
}
