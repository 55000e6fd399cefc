//! The idempotency store: one row per (account, client order id), with the fingerprint
//! of the order it was first used for and where that order stands.
//!
//! States: `submitted` (reserved and handed to the broker; written before the broker
//! is called), `acknowledged` (the broker took it; `outcome` holds the stored result),
//! `rejected` (the broker refused it, or it never reached the broker), `uncertain` (the
//! broker call failed in a way that leaves the outcome unknown). A retry with the same
//! id and order returns the stored outcome; an unresolved one is looked up at the broker.

use rusqlite::{OptionalExtension, Transaction, params};

use crate::{StoreError, sql};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Submitted,
    Acknowledged,
    Rejected,
    Uncertain,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Submitted => "submitted",
            Self::Acknowledged => "acknowledged",
            Self::Rejected => "rejected",
            Self::Uncertain => "uncertain",
        }
    }

    fn parse(text: &str) -> Result<Self, StoreError> {
        match text {
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
            "SELECT fingerprint, state, order_id, day, notional_base, outcome, created
             FROM idempotency WHERE account = ?1 AND client_order_id = ?2",
            params![account, client_order_id],
            |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, Option<String>>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, String>(4)?,
                    r.get::<_, Option<String>>(5)?,
                    r.get::<_, String>(6)?,
                ))
            },
        )
        .optional()
        .map_err(sql)?;
    row.map(
        |(fingerprint, state, order_id, day, notional_base, outcome, created)| {
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
            })
        },
    )
    .transpose()
}

/// Reserves a new key in state `submitted`, at `record.created`. The caller has checked
/// it is absent.
///
/// # Errors
/// SQLite failures (a duplicate key included).
pub fn reserve(tx: &Transaction<'_>, record: &Record) -> Result<(), StoreError> {
    let now = &record.created;
    tx.execute(
        "INSERT INTO idempotency (account, client_order_id, fingerprint, state, order_id, day,
             notional_base, outcome, created, updated)
         VALUES (?1, ?2, ?3, 'submitted', NULL, ?4, ?5, NULL, ?6, ?6)",
        params![
            record.account,
            record.client_order_id,
            record.fingerprint,
            record.day,
            record.notional_base,
            now
        ],
    )
    .map_err(sql)?;
    Ok(())
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
             updated = ?6
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

/// Every key still `submitted` or `uncertain`: outcomes to resolve at the broker.
///
/// # Errors
/// SQLite failures or a corrupt row.
pub fn unresolved(tx: &Transaction<'_>) -> Result<Vec<Record>, StoreError> {
    let keys: Vec<(String, String)> = {
        let mut stmt = tx
            .prepare(
                "SELECT account, client_order_id FROM idempotency
                 WHERE state IN ('submitted', 'uncertain') ORDER BY created",
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
