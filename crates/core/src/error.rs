//! The one error type every layer returns to a tool: a stable code, a message for the
//! human and a hint written for the model (its only recovery signal).

use std::fmt;

use serde::{Deserialize, Serialize};

/// Stable error codes of the tool contract (`docs/methodology/conventions.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    InvalidArgument,
    InvalidDate,
    InvalidDateRange,
    UnknownAccount,
    UnknownBroker,
    UnknownSymbol,
    NoFxRate,
    BrokerUnavailable,
    BrokerTimeout,
    NotSupported,
    InvalidBook,
    Internal,
    TradingDisabled,
    LiveNotAllowed,
    ConfirmationRequired,
    ConfirmationInvalid,
    LimitExceeded,
    PriceUnavailable,
    SymbolNotAllowed,
    KillSwitch,
    InvalidOrder,
    InvalidQuantity,
    UnknownOrder,
    BrokerRejected,
    Uncertain,
    ToolNotEnabled,
}

impl ErrorCode {
    /// The code as it appears on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidArgument => "invalid_argument",
            Self::InvalidDate => "invalid_date",
            Self::InvalidDateRange => "invalid_date_range",
            Self::UnknownAccount => "unknown_account",
            Self::UnknownBroker => "unknown_broker",
            Self::UnknownSymbol => "unknown_symbol",
            Self::NoFxRate => "no_fx_rate",
            Self::BrokerUnavailable => "broker_unavailable",
            Self::BrokerTimeout => "broker_timeout",
            Self::NotSupported => "not_supported",
            Self::InvalidBook => "invalid_book",
            Self::Internal => "internal",
            Self::TradingDisabled => "trading_disabled",
            Self::LiveNotAllowed => "live_not_allowed",
            Self::ConfirmationRequired => "confirmation_required",
            Self::ConfirmationInvalid => "confirmation_invalid",
            Self::LimitExceeded => "limit_exceeded",
            Self::PriceUnavailable => "price_unavailable",
            Self::SymbolNotAllowed => "symbol_not_allowed",
            Self::KillSwitch => "kill_switch",
            Self::InvalidOrder => "invalid_order",
            Self::InvalidQuantity => "invalid_quantity",
            Self::UnknownOrder => "unknown_order",
            Self::BrokerRejected => "broker_rejected",
            Self::Uncertain => "uncertain",
            Self::ToolNotEnabled => "tool_not_enabled",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failure a tool reports as its result: `{code, message, hint}`, plus, for order
/// errors, the rule that refused it and the order's identifiers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{code}: {message}")]
pub struct Error {
    pub code: ErrorCode,
    pub message: String,
    pub hint: String,
    /// The named rule (`sl_above_tp`, `lot_step`, `max_order_notional`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_order_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub order_id: Option<String>,
}

impl Error {
    pub fn new(code: ErrorCode, message: impl Into<String>, hint: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            hint: hint.into(),
            rule: None,
            client_order_id: None,
            order_id: None,
        }
    }

    /// An order refused by a named rule.
    pub fn rule(
        code: ErrorCode,
        rule: &'static str,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) -> Self {
        Self {
            rule: Some(rule),
            ..Self::new(code, message, hint)
        }
    }

    /// Attaches the identifiers of the order the error is about.
    #[must_use]
    pub fn with_order(mut self, client_order_id: Option<String>, order_id: Option<String>) -> Self {
        self.client_order_id = client_order_id;
        self.order_id = order_id;
        self
    }

    pub fn invalid_argument(message: impl Into<String>, hint: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidArgument, message, hint)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(
            ErrorCode::Internal,
            message,
            "this is a bug in tradedesk, not in the request; report it with the arguments used",
        )
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Characters of a caller's text an error message may quote.
pub const QUOTE_CHARS: usize = 64;

/// Quotes untrusted text for an error message: single-quoted, control characters
/// blanked, cut to [`QUOTE_CHARS`] with an ellipsis, so a huge argument never comes back
/// huge.
pub fn quote(text: &str) -> String {
    let mut out: String = text
        .chars()
        .take(QUOTE_CHARS)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if text.chars().nth(QUOTE_CHARS).is_some() {
        out.push('…');
    }
    format!("'{out}'")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_are_short_and_single_line() {
        assert_eq!(quote("AAPL"), "'AAPL'");
        assert_eq!(quote("a\nb"), "'a b'");
        let long = quote(&"x".repeat(10_000));
        assert_eq!(long.chars().count(), QUOTE_CHARS + 3);
        assert!(long.ends_with("…'"));
    }
}
