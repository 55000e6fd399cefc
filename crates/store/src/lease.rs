//! Process leases: each process that reserves orders holds an exclusive lock on its own
//! file in `<state dir>/leases/` for as long as it runs, and writes that file's name on
//! every reservation it makes. Another process can then tell, without guessing from a
//! timer, whether the owner of an unsettled reservation is still alive: the lock is
//! released by the operating system the moment the owner exits, however it exits
//! (docs/methodology/trading.md, "Who owns an order in flight").

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

use crate::{StoreError, hex};

/// The folder inside the state directory.
pub const LEASE_DIR: &str = "leases";

/// This process's lease, held until it is dropped (the process ends).
#[derive(Debug)]
pub struct Lease {
    id: String,
    dir: Option<PathBuf>,
    /// Kept open: the lock lives as long as this handle.
    _file: Option<File>,
}

/// Whether the owner of a lease is known to be running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// This very process.
    Me,
    /// Another process that still holds its lease.
    Alive,
    /// Nobody holds the lease: the process has ended.
    Gone,
}

impl Lease {
    /// Takes a new lease in `state_dir`, and removes the files of leases nobody holds.
    ///
    /// The file is locked under a temporary name and only then renamed into place, so
    /// a sweeping process can never take (and delete) a lease between its creation and
    /// its lock.
    ///
    /// # Errors
    /// The folder or the file cannot be created or locked.
    pub fn take(state_dir: &Path) -> Result<Self, StoreError> {
        let dir = state_dir.join(LEASE_DIR);
        crate::create_private_dir(&dir)?;
        let id = new_id()?;
        let io = |path: &Path, source| StoreError::Io {
            path: path.display().to_string(),
            source,
        };
        let temp = dir.join(format!(".{id}.new"));
        let file = OpenOptions::new()
            .create_new(true)
            .write(true)
            .open(&temp)
            .map_err(|e| io(&temp, e))?;
        file.try_lock().map_err(|e| match e {
            TryLockError::Error(e) => io(&temp, e),
            TryLockError::WouldBlock => io(&temp, std::io::ErrorKind::WouldBlock.into()),
        })?;
        let path = dir.join(&id);
        std::fs::rename(&temp, &path).map_err(|e| io(&path, e))?;
        let lease = Self {
            id,
            dir: Some(dir),
            _file: Some(file),
        };
        lease.sweep();
        Ok(lease)
    }

    /// A lease for a store no other process can open (in memory).
    ///
    /// # Errors
    /// No randomness.
    pub fn private() -> Result<Self, StoreError> {
        Ok(Self {
            id: new_id()?,
            dir: None,
            _file: None,
        })
    }

    /// The name written on this process's reservations.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Whether the process that wrote `owner` on a reservation is running. A lease that
    /// cannot be checked (an unreadable folder) counts as alive: the safe answer is
    /// "its outcome is not known yet", never "it was not placed".
    pub fn owner(&self, owner: Option<&str>) -> Owner {
        let Some(owner) = owner else {
            // Written by a build without leases: its process is long gone.
            return Owner::Gone;
        };
        if owner == self.id {
            return Owner::Me;
        }
        let Some(dir) = &self.dir else {
            return Owner::Gone;
        };
        if !valid_id(owner) {
            return Owner::Gone;
        }
        let path = dir.join(owner);
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Owner::Gone,
            Err(_) => return Owner::Alive,
        };
        match file.try_lock() {
            Ok(()) => {
                // Nobody holds it: the owner has ended. Its file goes with it.
                let _ = std::fs::remove_file(&path);
                Owner::Gone
            }
            Err(TryLockError::WouldBlock) => Owner::Alive,
            Err(TryLockError::Error(_)) => Owner::Alive,
        }
    }

    /// Removes the files of leases whose processes have ended (best effort).
    fn sweep(&self) {
        let Some(dir) = &self.dir else {
            return;
        };
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else {
                continue;
            };
            if valid_id(name) && name != self.id {
                let _ = self.owner(Some(name));
            }
        }
    }
}

fn new_id() -> Result<String, StoreError> {
    let mut bytes = [0_u8; 12];
    getrandom::fill(&mut bytes).map_err(|e| StoreError::Corrupt(format!("no randomness: {e}")))?;
    Ok(format!("p{}-{}", std::process::id(), hex(&bytes)))
}

/// A lease name as [`new_id`] writes it (never a path).
fn valid_id(name: &str) -> bool {
    name.len() <= 64
        && name.starts_with('p')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_lease_is_alive_while_held_and_gone_once_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let mine = Lease::take(dir.path()).unwrap();
        let other = Lease::take(dir.path()).unwrap();
        assert_eq!(mine.owner(Some(mine.id())), Owner::Me);
        assert_eq!(mine.owner(Some(other.id())), Owner::Alive);
        let gone = other.id().to_owned();
        drop(other);
        assert_eq!(mine.owner(Some(&gone)), Owner::Gone);
        assert!(!dir.path().join(LEASE_DIR).join(&gone).exists());
        assert_eq!(mine.owner(None), Owner::Gone);
        assert_eq!(mine.owner(Some("../../etc/passwd")), Owner::Gone);
    }

    #[test]
    fn a_new_lease_sweeps_the_files_of_ended_ones() {
        let dir = tempfile::tempdir().unwrap();
        let first = Lease::take(dir.path()).unwrap();
        let id = first.id().to_owned();
        drop(first);
        assert!(dir.path().join(LEASE_DIR).join(&id).exists());
        let _second = Lease::take(dir.path()).unwrap();
        assert!(!dir.path().join(LEASE_DIR).join(&id).exists());
    }
}
