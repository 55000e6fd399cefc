//! Decimals on the wire: JSON numbers, not strings, with no binary-float arithmetic on
//! the way. The decimal's own text is parsed once into the nearest `f64`, which prints
//! back as the same digits for any value of up to 15 significant digits.

use std::borrow::Cow;

use rust_decimal::Decimal;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A decimal serialized as a JSON number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Num(pub Decimal);

impl Num {
    pub fn to_f64(self) -> f64 {
        self.0.normalize().to_string().parse().unwrap_or(f64::NAN)
    }
}

/// A figure held as an integer of minor units (`v` at `dp` places), as a [`Num`].
///
/// # Errors
/// `invalid_book` when it passes a decimal's range: a total of a book whose values are
/// past what the engine holds (docs/methodology/book-format.md, "Bounds").
pub fn minor(v: i128, dp: u32) -> tradedesk_core::Result<Num> {
    Decimal::try_from_i128_with_scale(v, dp)
        .map(Num)
        .map_err(|_| tradedesk_core::bounds::too_large("a total of the book"))
}

impl From<Decimal> for Num {
    fn from(d: Decimal) -> Self {
        Self(d)
    }
}

impl Serialize for Num {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_f64(self.to_f64())
    }
}

/// Reads a JSON number as the decimal its text spells, never through binary floating
/// point arithmetic. Only a number: its schema says `number`, so a string (`"10"`,
/// `"1_0"`, `"1e0"`) is refused as every tool refuses what its schema refuses.
impl<'de> Deserialize<'de> for Num {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(deserializer)?;
        let text = match &value {
            serde_json::Value::Number(n) => n.to_string(),
            serde_json::Value::String(s) => {
                return Err(serde::de::Error::custom(format!(
                    "expected a number, got the string {}",
                    serde_json::Value::String(s.chars().take(64).collect())
                )));
            }
            _ => return Err(serde::de::Error::custom("expected a number")),
        };
        let parsed = if text.contains(['e', 'E']) {
            Decimal::from_scientific(&text)
        } else {
            text.parse::<Decimal>()
        };
        parsed.map(|d| Self(d.normalize())).map_err(|_| {
            serde::de::Error::custom("expected a decimal number within 28 significant digits")
        })
    }
}

impl JsonSchema for Num {
    fn schema_name() -> Cow<'static, str> {
        "Decimal".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "number" })
    }
}

#[cfg(test)]
mod tests {
    use rust_decimal_macros::dec;

    use super::*;

    #[test]
    fn decimals_print_as_their_own_digits() {
        for (d, text) in [
            (dec!(0.1), "0.1"),
            (dec!(123456789012.34), "123456789012.34"),
            (dec!(-4.4650), "-4.465"),
            (dec!(100.00), "100.0"),
            (dec!(1) / dec!(3), "0.3333333333333333"),
        ] {
            assert_eq!(serde_json::to_string(&Num(d)).unwrap(), text);
        }
    }

    #[test]
    fn numbers_read_as_their_own_digits_and_strings_are_refused() {
        for (text, d) in [
            ("0.1", dec!(0.1)),
            ("123456789012.34", dec!(123456789012.34)),
            ("1e0", dec!(1)),
            ("2.5E2", dec!(250)),
            ("-4.4650", dec!(-4.465)),
        ] {
            assert_eq!(serde_json::from_str::<Num>(text).unwrap(), Num(d), "{text}");
        }
        for text in [r#""10""#, r#""1_0""#, r#""1e0""#, "null", "true", "[1]"] {
            let err = serde_json::from_str::<Num>(text).unwrap_err().to_string();
            assert!(err.starts_with("expected a number"), "{text}: {err}");
        }
    }
}
