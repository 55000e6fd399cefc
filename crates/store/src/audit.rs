//! The audit log: every write attempt and outcome, append-only (triggers refuse UPDATE
//! and DELETE) and hash-chained: each entry's hash covers the previous entry's hash and
//! every field of its own, so an edited, removed or reordered entry breaks the chain at
//! that entry.

use rusqlite::{Connection, OptionalExtension, Transaction, params};

use crate::{StoreError, sha256_hex, sql};

/// The previous hash of the first entry.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// One entry as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry<'a> {
    /// RFC 3339, UTC.
    pub time: &'a str,
    /// `preview`, `attempt`, `outcome`, `refused`, `cancel`, `modify`, `recovered`, ...
    pub kind: &'a str,
    pub account: &'a str,
    pub client_order_id: &'a str,
    /// A JSON object with the details (never a secret).
    pub detail: &'a str,
}

fn entry_hash(prev: &str, seq: i64, e: &Entry<'_>) -> String {
    let seq = seq.to_string();
    sha256_hex(&[
        prev.as_bytes(),
        b"\n",
        seq.as_bytes(),
        b"\n",
        e.time.as_bytes(),
        b"\n",
        e.kind.as_bytes(),
        b"\n",
        e.account.as_bytes(),
        b"\n",
        e.client_order_id.as_bytes(),
        b"\n",
        e.detail.as_bytes(),
    ])
}

/// Appends an entry inside the caller's transaction; returns its sequence number.
///
/// # Errors
/// SQLite failures.
pub fn append(tx: &Transaction<'_>, entry: &Entry<'_>) -> Result<i64, StoreError> {
    let last: Option<(i64, String)> = tx
        .query_row(
            "SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .map_err(sql)?;
    let (seq, prev) = match last {
        Some((seq, hash)) => (seq + 1, hash),
        None => (1, GENESIS.to_owned()),
    };
    let hash = entry_hash(&prev, seq, entry);
    tx.execute(
        "INSERT INTO audit (seq, time, kind, account, client_order_id, detail, prev_hash, hash)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            seq,
            entry.time,
            entry.kind,
            entry.account,
            entry.client_order_id,
            entry.detail,
            prev,
            hash
        ],
    )
    .map_err(sql)?;
    Ok(seq)
}

/// The verdict on the whole chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Intact { entries: u64 },
    Broken { seq: i64, reason: String },
}

/// Walks the chain from the first entry.
///
/// # Errors
/// SQLite failures (an unreadable database), not a broken chain.
pub fn verify(conn: &Connection) -> Result<Verdict, StoreError> {
    let mut stmt = conn
        .prepare(
            "SELECT seq, time, kind, account, client_order_id, detail, prev_hash, hash
             FROM audit ORDER BY seq",
        )
        .map_err(sql)?;
    let mut rows = stmt.query([]).map_err(sql)?;
    let mut expected_prev = GENESIS.to_owned();
    let mut expected_seq = 1_i64;
    let mut entries = 0_u64;
    while let Some(row) = rows.next().map_err(sql)? {
        let seq: i64 = row.get(0).map_err(sql)?;
        let fields: [String; 7] = [
            row.get(1).map_err(sql)?,
            row.get(2).map_err(sql)?,
            row.get(3).map_err(sql)?,
            row.get(4).map_err(sql)?,
            row.get(5).map_err(sql)?,
            row.get(6).map_err(sql)?,
            row.get(7).map_err(sql)?,
        ];
        let [time, kind, account, client_order_id, detail, prev, hash] = fields;
        if seq != expected_seq {
            return Ok(Verdict::Broken {
                seq,
                reason: format!("expected entry {expected_seq}: an entry is missing"),
            });
        }
        if prev != expected_prev {
            return Ok(Verdict::Broken {
                seq,
                reason: "its previous-hash does not match the entry before it".to_owned(),
            });
        }
        let entry = Entry {
            time: &time,
            kind: &kind,
            account: &account,
            client_order_id: &client_order_id,
            detail: &detail,
        };
        if entry_hash(&prev, seq, &entry) != hash {
            return Ok(Verdict::Broken {
                seq,
                reason: "its content does not match its hash (edited)".to_owned(),
            });
        }
        expected_prev = hash;
        expected_seq += 1;
        entries += 1;
    }
    Ok(Verdict::Intact { entries })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use crate::Store;

    fn write(store: &Store, n: usize) {
        for i in 0..n {
            store
                .tx(|tx| {
                    append(
                        tx,
                        &Entry {
                            time: "2026-11-30T00:00:00Z",
                            kind: "attempt",
                            account: "SIM",
                            client_order_id: &format!("c{i}"),
                            detail: "{}",
                        },
                    )
                })
                .unwrap();
        }
    }

    #[test]
    fn an_untouched_chain_verifies() {
        let store = Store::in_memory().unwrap();
        write(&store, 5);
        assert_eq!(store.read(verify).unwrap(), Verdict::Intact { entries: 5 });
    }

    #[test]
    fn updates_and_deletes_are_refused_by_the_database() {
        let store = Store::in_memory().unwrap();
        write(&store, 2);
        store
            .read(|c| {
                assert!(c.execute("UPDATE audit SET kind = 'x'", []).is_err());
                assert!(c.execute("DELETE FROM audit WHERE seq = 1", []).is_err());
                Ok::<_, StoreError>(())
            })
            .unwrap();
    }

    #[test]
    fn an_edit_names_the_entry_that_breaks() {
        let store = Store::in_memory().unwrap();
        write(&store, 4);
        store
            .read(|c| {
                c.execute_batch(
                    "DROP TRIGGER audit_no_update; UPDATE audit SET detail = '{\"x\":1}' WHERE seq = 3;",
                )
                .map_err(sql)
            })
            .unwrap();
        match store.read(verify).unwrap() {
            Verdict::Broken { seq, reason } => {
                assert_eq!(seq, 3);
                assert!(reason.contains("edited"), "{reason}");
            }
            v @ Verdict::Intact { .. } => panic!("{v:?}"),
        }
    }

    #[test]
    fn a_removed_entry_breaks_the_chain_after_it() {
        let store = Store::in_memory().unwrap();
        write(&store, 4);
        store
            .read(|c| {
                c.execute_batch("DROP TRIGGER audit_no_delete; DELETE FROM audit WHERE seq = 2;")
                    .map_err(sql)
            })
            .unwrap();
        assert!(matches!(
            store.read(verify).unwrap(),
            Verdict::Broken { seq: 3, .. }
        ));
    }
}
