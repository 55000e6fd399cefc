//! The idempotency store: one row per (account, client order id), with the fingerprint
//! of the order it was first used for and where that order stands.
//!
//! States: `reserved` (written with the guards' transaction; no send has started, which
//! the owner's lease makes provable once the owner is gone), `submitted` (written just
//! before the broker is called: a send may have started), `acknowledged` (the broker took it; `outcome` holds the stored result),
//! `rejected` (the broker refused it, or it never reached the broker), `uncertain` (the
//! broker call failed in a way that leaves the outcome unknown). A retry with the same
//! id and order returns the stored outcome; an unresolved one is looked up at the broker.

use rusqlite::{OptionalExtension, Transaction, params};

use crate::{StoreError, sql};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Reserved,
    Submitted,
    Acknowledged,
    Rejected,
    Uncertain,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Reserved => "reserved",
            Self::Submitted => "submitted",
            Self::Acknowledged => "acknowledged",
            Self::Rejected => "rejected",
            Self::Uncertain => "uncertain",
        }
    }

    fn parse(text: &str) -> Result<Self, StoreError> {
        match text {
            "reserved" => Ok(Self::Reserved),
            "submitted" => Ok(Self::Submitted),
            "acknowledged" => Ok(Self::Acknowledged),
            "rejected" => Ok(Self::Rejected),
            "uncertain" => Ok(Self::Uncertain),
            other => Err(StoreError::Corrupt(format!(
                "idempotency state '{other}' is not one this build writes"
            ))),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub account: String,
    pub client_order_id: String,
    pub fingerprint: String,
    pub state: State,
    pub order_id: Option<String>,
    /// The calendar day (server time zone) the order counts against.
    pub day: String,
    /// Its valuation in the base currency, as a decimal string.
    pub notional_base: String,
    /// The stored result (JSON), once known.
    pub outcome: Option<String>,
    /// When it was reserved: RFC 3339, wall time.
    pub created: String,
    /// The lease of the process that reserved it (`None`: written before leases).
    pub owner: Option<String>,
    /// The instrument (`EXCHANGE:SYMBOL`) and the signed base-currency exposure the
    /// order adds (a buy positive), for limits that count orders in flight.
    pub instrument: Option<String>,
    pub exposure: Option<String>,
}

impl Record {
    /// Whether the outcome is still open (nothing settled it yet).
    pub fn unsettled(&self) -> bool {
        matches!(
            self.state,
            State::Reserved | State::Submitted | State::Uncertain
        )
    }
}

/// Looks a key up.
///
/// # Errors
/// SQLite failures or a corrupt row.
pub fn get(
    tx: &Transaction<'_>,
    account: &str,
    client_order_id: &str,
) -> Result<Option<Record>, StoreError> {
    let row = tx
        .query_row(
            "SELECT fingerprint, state, order_id, day, notional_base, outcome, created, owner,
                 instrument, exposure
             FROM idempotency WHERE account = ?1 AND client_order_id = ?2",
            params![account, client_order_id],
            |r| {
                Ok((
                    (
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, Option<String>>(2)?,
                        r.get::<_, String>(3)?,
                        r.get::<_, String>(4)?,
                    ),
                    (
                        r.get::<_, Option<String>>(5)?,
                        r.get::<_, String>(6)?,
                        r.get::<_, Option<String>>(7)?,
                        r.get::<_, Option<String>>(8)?,
                        r.get::<_, Option<String>>(9)?,
                    ),
                ))
            },
        )
        .optional()
        .map_err(sql)?;
    row.map(
        |(
            (fingerprint, state, order_id, day, notional_base),
            (outcome, created, owner, instrument, exposure),
        )| {
            Ok(Record {
                account: account.to_owned(),
                client_order_id: client_order_id.to_owned(),
                fingerprint,
                state: State::parse(&state)?,
                order_id,
                day,
                notional_base,
                outcome,
                created,
                owner,
                instrument,
                exposure,
            })
        },
    )
    .transpose()
}

/// Reserves a new key in state `reserved`, at `record.created`, owned by `record.owner`.
/// The caller has checked, in the same transaction, that it is absent.
///
/// # Errors
/// SQLite failures (a duplicate key included).
pub fn reserve(tx: &Transaction<'_>, record: &Record) -> Result<(), StoreError> {
    let now = &record.created;
    tx.execute(
        "INSERT INTO idempotency (account, client_order_id, fingerprint, state, order_id, day,
             notional_base, outcome, created, updated, owner, instrument, exposure)
         VALUES (?1, ?2, ?3, 'reserved', NULL, ?4, ?5, NULL, ?6, ?6, ?7, ?8, ?9)",
        params![
            record.account,
            record.client_order_id,
            record.fingerprint,
            record.day,
            record.notional_base,
            now,
            record.owner,
            record.instrument,
            record.exposure,
        ],
    )
    .map_err(sql)?;
    Ok(())
}

/// Moves a reserved key to `submitted`: from here on a send may have started. Answers
/// whether the key was still reserved (it always is for its owner).
///
/// # Errors
/// SQLite failures.
pub fn mark_sending(
    tx: &Transaction<'_>,
    account: &str,
    client_order_id: &str,
    now: &str,
) -> Result<bool, StoreError> {
    let changed = tx
        .execute(
            "UPDATE idempotency SET state = 'submitted', updated = ?3
             WHERE account = ?1 AND client_order_id = ?2 AND state = 'reserved'",
            params![account, client_order_id, now],
        )
        .map_err(sql)?;
    Ok(changed == 1)
}

/// The highest settle sequence so far: read before the portfolio and the working orders
/// are, it tells which outcomes that reading may not reflect yet.
///
/// # Errors
/// SQLite failures.
pub fn settle_mark(tx: &Transaction<'_>) -> Result<i64, StoreError> {
    tx.query_row(
        "SELECT COALESCE(MAX(settle_seq), 0) FROM idempotency",
        [],
        |r| r.get(0),
    )
    .map_err(sql)
}

/// The signed exposures (base currency, as written) of `day`'s orders in `instrument`
/// that a reading of the portfolio and working orders taken at `mark` may not show:
/// those still in flight (reserved, submitted, uncertain) and those settled as taken by
/// the broker after `mark`.
///
/// # Errors
/// SQLite failures.
pub fn unseen_exposures(
    tx: &Transaction<'_>,
    day: &str,
    instrument: &str,
    mark: i64,
) -> Result<Vec<String>, StoreError> {
    let mut stmt = tx
        .prepare_cached(
            "SELECT exposure FROM idempotency
             WHERE day = ?1 AND instrument = ?2 AND exposure IS NOT NULL
               AND (state IN ('reserved', 'submitted', 'uncertain')
                    OR (state = 'acknowledged' AND settle_seq > ?3))",
        )
        .map_err(sql)?;
    let rows = stmt
        .query_map(params![day, instrument, mark], |r| r.get::<_, String>(0))
        .map_err(sql)?;
    rows.collect::<Result<Vec<_>, _>>().map_err(sql)
}

/// Moves a key to its outcome.
///
/// # Errors
/// SQLite failures.
pub fn settle(
    tx: &Transaction<'_>,
    account: &str,
    client_order_id: &str,
    state: State,
    order_id: Option<&str>,
    outcome: Option<&str>,
    now: &str,
) -> Result<(), StoreError> {
    tx.execute(
        "UPDATE idempotency SET state = ?3, order_id = COALESCE(?4, order_id), outcome = ?5,
             updated = ?6,
             settle_seq = (SELECT COALESCE(MAX(settle_seq), 0) + 1 FROM idempotency)
         WHERE account = ?1 AND client_order_id = ?2",
        params![
            account,
            client_order_id,
            state.as_str(),
            order_id,
            outcome,
            now
        ],
    )
    .map_err(sql)?;
    Ok(())
}

/// The valuations of every order that counts against `day`'s limits: submitted,
/// acknowledged or uncertain (not rejected), across all accounts.
///
/// # Errors
/// SQLite failures.
pub fn day_notionals(tx: &Transaction<'_>, day: &str) -> Result<Vec<String>, StoreError> {
    let mut stmt = tx
        .prepare_cached(
            "SELECT notional_base FROM idempotency WHERE day = ?1 AND state != 'rejected'",
        )
        .map_err(sql)?;
    let rows = stmt
        .query_map(params![day], |r| r.get::<_, String>(0))
        .map_err(sql)?;
    rows.collect::<Result<Vec<_>, _>>().map_err(sql)
}

/// Every key still `reserved`, `submitted` or `uncertain`: outcomes to resolve.
///
/// # Errors
/// SQLite failures or a corrupt row.
pub fn unresolved(tx: &Transaction<'_>) -> Result<Vec<Record>, StoreError> {
    let keys: Vec<(String, String)> = {
        let mut stmt = tx
            .prepare(
                "SELECT account, client_order_id FROM idempotency
                 WHERE state IN ('reserved', 'submitted', 'uncertain') ORDER BY created",
            )
            .map_err(sql)?;
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(sql)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(sql)?
    };
    let mut out = Vec::with_capacity(keys.len());
    for (account, id) in keys {
        if let Some(record) = get(tx, &account, &id)? {
            out.push(record);
        }
    }
    Ok(out)
}
