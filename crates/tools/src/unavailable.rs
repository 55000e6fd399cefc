//! Accounts whose source did not answer: how an answer over the other accounts says it
//! is partial (docs/tools.md, "Accounts that do not answer").
//!
//! A tool that reads the merged book answers over the accounts that answered. Every
//! account left out is listed in the result's `unavailable_accounts` (omitted when none
//! is) and named in a note, so a partial answer never reads as a complete one. A tool
//! whose `account` filter names a down account, or whose `broker` filter matches only
//! down accounts, answers that account's own error instead.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};
use tradedesk_core::{Book, Error};

/// One account left out of an answer because its source did not answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct UnavailableAccount {
    pub account: String,
    pub broker: String,
    /// book | paper | live
    pub mode: String,
    /// Its error: broker_unavailable, broker_timeout, ...
    pub code: String,
    pub message: String,
    pub hint: String,
    /// When it stopped answering (RFC 3339, UTC).
    pub since: String,
}

/// A down account: its row in answers, and the error a tool answers when it needs
/// only this account.
#[derive(Debug, Clone)]
pub struct Down {
    pub row: UnavailableAccount,
    pub error: Error,
}

/// The field name every partial answer carries.
pub const FIELD: &str = "unavailable_accounts";

/// Adds `unavailable_accounts` to a result's output schema (as an optional field).
pub(crate) fn with_field(mut schema: Value) -> Value {
    let mut item = serde_json::to_value(schemars::schema_for!(UnavailableAccount))
        .unwrap_or_else(|_| json!({}));
    if let Some(obj) = item.as_object_mut() {
        // The field says what an entry is.
        for key in ["$schema", "title", "description"] {
            obj.remove(key);
        }
    }
    if let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) {
        props.insert(
            FIELD.into(),
            json!({
                "type": "array",
                "description": "Accounts left out because their source did not answer, each retried in the background (absent when all answered).",
                "items": item,
            }),
        );
    }
    schema
}

/// The note a partial answer carries first.
pub(crate) fn note(left_out: &[&Down]) -> String {
    let names: Vec<String> = left_out
        .iter()
        .map(|d| format!("{} ({}, {})", d.row.account, d.row.broker, d.row.code))
        .collect();
    if let [one] = names.as_slice() {
        format!(
            "partial answer: {one} did not answer and is left out of every figure and total here (unavailable_accounts has its error and hint); get_server_health shows its state, and it is served again once its gateway answers"
        )
    } else {
        format!(
            "partial answer: {} did not answer and are left out of every figure and total here (unavailable_accounts has each one's error and hint); get_server_health shows their state, and each is served again once its gateway answers",
            names.join(", ")
        )
    }
}

/// What a call's `account` and `broker` filters make of the accounts that are down: `Err` with the account's
/// own error when the call needs only down accounts, else the down accounts the answer
/// would have covered.
pub(crate) fn relevant<'a>(
    down: &'a [Down],
    book: &Book,
    account: Option<&str>,
    broker: Option<&str>,
) -> Result<Vec<&'a Down>, Error> {
    if let Some(id) = account {
        if let Some(found) = down.iter().find(|d| d.row.account == id) {
            return Err(found.error.clone());
        }
        // An account that answered: the answer covers all it asks for.
        return Ok(Vec::new());
    }
    let matching: Vec<&Down> = down
        .iter()
        .filter(|d| broker.is_none_or(|b| d.row.broker == b))
        .collect();
    if let Some(b) = broker
        && !book.accounts.iter().any(|a| a.broker == b)
        && let Some(first) = matching.first()
    {
        return Err(first.error.clone());
    }
    Ok(matching)
}

/// Marks an ok result as partial: the field, and the note first among its notes.
pub(crate) fn annotate(structured: &mut Value, left_out: &[&Down]) -> String {
    if left_out.is_empty() {
        return String::new();
    }
    let note = note(left_out);
    if let Some(obj) = structured.as_object_mut() {
        let rows: Vec<Value> = left_out
            .iter()
            .filter_map(|d| serde_json::to_value(&d.row).ok())
            .collect();
        obj.insert(FIELD.into(), Value::Array(rows));
        match obj.get_mut("notes").and_then(Value::as_array_mut) {
            Some(notes) => notes.insert(0, Value::String(note.clone())),
            None => {
                obj.insert("notes".into(), json!([note.clone()]));
            }
        }
    }
    format!(
        " Partial answer (quoted data; tell the user): [{}]",
        Value::String(note)
    )
}
