//! `broker = "book"`: a tradedesk-book/1 file.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use tradedesk_core::{Error, ErrorCode, Result};

use super::{Opened, Setup, config_error};
use crate::BookBroker;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BookAccount {
    pub id: String,
    /// The book file holding this account.
    pub path: Option<PathBuf>,
    pub live: Option<bool>,
}

/// When a book file is read: before the context is made (a command that answers once),
/// or in the background while the server already answers (`serve`: `initialize` and
/// `tools/list` never wait for a book; the first call that needs it does).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BookLoad {
    Now,
    Background,
}

/// Opens a book file; a broken one is `invalid_book` with every path and rule (at once,
/// or from the first snapshot when read in the background).
///
/// # Errors
/// `invalid_book` with the file's first broken rule (when read now).
pub fn open_book(path: &Path, load: BookLoad) -> Result<BookBroker> {
    if load == BookLoad::Background {
        return Ok(BookBroker::background(path));
    }
    BookBroker::open(path).map_err(|e| {
        Error::new(
            ErrorCode::InvalidBook,
            e.to_string(),
            "fix the file at the JSON path named, then retry",
        )
    })
}

impl BookAccount {
    /// Reads the file, once for every account naming it.
    pub(super) fn open(&self, setup: &Setup<'_>, opened: &mut Opened) -> Result<()> {
        let path = self.path.clone().ok_or_else(|| {
            config_error(
                format!("{}: a book account needs `path`", setup.what(&self.id)),
                "set path to the book file",
            )
        })?;
        if let Some(entry) = opened.books.iter_mut().find(|(p, _, _)| *p == path) {
            entry.2.push(self.id.clone());
        } else {
            let broker = open_book(&path, setup.book_load)?;
            opened
                .books
                .push((path, Arc::new(broker), vec![self.id.clone()]));
        }
        Ok(())
    }
}
