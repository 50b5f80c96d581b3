//! Validated numbers: each type's range is the column's, stated in the OpenAPI document, so a
//! value that parses always fits where it is stored.

use rust_decimal::{Decimal, RoundingStrategy};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
#[cfg(feature = "openapi")]
use utoipa::openapi::schema::{ObjectBuilder, Type};
#[cfg(feature = "openapi")]
use utoipa::openapi::{RefOr, Schema};
#[cfg(feature = "openapi")]
use utoipa::{PartialSchema, ToSchema};

use super::{RULE_MARK, invalid};

/// A position in a hand-ordered list, 0 to 1,000,000.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DisplayOrder(i32);

impl DisplayOrder {
    pub const MAX: i32 = 1_000_000;

    pub fn get(self) -> i32 {
        self.0
    }
}

impl<'de> Deserialize<'de> for DisplayOrder {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        bounded_i32(d, 0, Self::MAX).map(DisplayOrder)
    }
}

#[cfg(feature = "openapi")]
impl PartialSchema for DisplayOrder {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::Integer)
            .minimum(Some(0))
            .maximum(Some(Self::MAX))
            .examples([1])
            .into()
    }
}

#[cfg(feature = "openapi")]
impl ToSchema for DisplayOrder {}

/// A JSON number as the decimal it most likely spells: the shortest text that reads back as
/// the same `f64` (what `Display` writes), so `12500.1` is 12500.1, not 12500.100000000000364.
fn decimal_of(v: f64) -> Option<Decimal> {
    if !v.is_finite() {
        return None;
    }
    format!("{v}").parse().ok()
}

/// Declares a decimal amount from 0 with two decimals, below `10^$digits`: it fits a
/// `numeric(p, 2)` column with `p >= $digits + 2`, and every value (at most 14 significant
/// digits) survives the trip through a JSON number exactly. Values are rounded to two
/// decimals (half away from zero); the document's exclusive maximum is the largest value
/// that cannot round up to `10^$digits`.
macro_rules! decimal_field {
    ($(#[$doc:meta])* $name:ident, digits = $digits:expr, max_text = $max_text:literal, example = $example:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name(Decimal);

        impl $name {
            /// Everything below rounds to at most `10^digits - 0.01`.
            fn bound() -> Decimal {
                Decimal::from_i128_with_scale(10i128.pow($digits) * 1000 - 5, 3)
            }

            pub fn parse(v: f64) -> Option<Self> {
                // Before the decimal: a negative too small for it (`-5e-223`) would read as
                // zero.
                if v < 0.0 {
                    return None;
                }
                let d = decimal_of(v)?;
                (d >= Decimal::ZERO && d < Self::bound()).then(|| {
                    $name(d.round_dp_with_strategy(2, RoundingStrategy::MidpointAwayFromZero).normalize())
                })
            }

            pub fn get(self) -> Decimal {
                self.0
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let v = f64::deserialize(d)?;
                $name::parse(v).ok_or_else(|| {
                    invalid("out_of_range", concat!("must be a number from 0 to ", $max_text))
                })
            }
        }

        #[cfg(feature = "openapi")]
        impl PartialSchema for $name {
            fn schema() -> RefOr<Schema> {
                ObjectBuilder::new()
                    .schema_type(Type::Number)
                    .minimum(Some(0))
                    .exclusive_maximum(Some(10f64.powi($digits) - 0.005))
                    .description(Some(concat!(
                        "From 0 to ", $max_text, ", rounded to two decimals (half away from zero)."
                    )))
                    .examples([$example])
                    .into()
            }
        }

        #[cfg(feature = "openapi")]
        impl ToSchema for $name {}
    };
}

decimal_field!(
    /// An amount of money (a lead's or a deal's value).
    Money, digits = 12, max_text = "999999999999.99", example = 12500.5
);
decimal_field!(
    /// A number of hours (a ticket's estimate or actual time).
    Hours, digits = 8, max_text = "99999999.99", example = 2.5
);

/// A JSON integer, also written with a zero fraction (`3.0`), as JSON Schema's `integer`
/// admits; anything past `i64` is out of range.
pub fn whole<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    struct Whole;
    impl serde::de::Visitor<'_> for Whole {
        type Value = i64;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an integer")
        }

        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<i64, E> {
            Ok(v)
        }

        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<i64, E> {
            i64::try_from(v).map_err(|_| invalid("out_of_range", "is too large"))
        }

        fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<i64, E> {
            if v.fract() != 0.0 || !v.is_finite() {
                return Err(E::invalid_type(serde::de::Unexpected::Float(v), &self));
            }
            // Exact below 2^63; above, out of range like any integer past i64.
            if v.abs() >= 9.223_372_036_854_776e18 {
                return Err(invalid("out_of_range", "is too large"));
            }
            Ok(v as i64)
        }
    }
    d.deserialize_any(Whole)
}

/// A whole number within bounds, for `displayOrder` and the like.
pub fn bounded_i32<'de, D: Deserializer<'de>>(d: D, min: i32, max: i32) -> Result<i32, D::Error> {
    let v = whole(d)?;
    if v < i64::from(min) || v > i64::from(max) {
        return Err(D::Error::custom(format!(
            "{RULE_MARK}out_of_range{RULE_MARK}must be between {min} and {max}"
        )));
    }
    Ok(v as i32)
}

/// A count or a number of seconds: 0 to `i32::MAX` (an `integer` column), or `null`.
pub fn optional_count<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i32>, D::Error> {
    struct Count(i32);
    impl<'de> Deserialize<'de> for Count {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            bounded_i32(d, 0, i32::MAX).map(Count)
        }
    }
    Ok(Option::<Count>::deserialize(d)?.map(|c| c.0))
}

/// A list of `integer` column values, or `null`.
pub fn optional_i32_list<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<i32>>, D::Error> {
    struct Item(i32);
    impl<'de> Deserialize<'de> for Item {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            bounded_i32(d, i32::MIN, i32::MAX).map(Item)
        }
    }
    Ok(Option::<Vec<Item>>::deserialize(d)?.map(|v| v.into_iter().map(|i| i.0).collect()))
}

/// The longest SLA target or warning: a year.
pub const MAX_SLA_SECONDS: i32 = 366 * 24 * 3600;

/// An SLA target in seconds: 1 to a year.
pub fn target_seconds<'de, D: Deserializer<'de>>(d: D) -> Result<i32, D::Error> {
    bounded_i32(d, 1, MAX_SLA_SECONDS)
}

/// An SLA warning threshold in seconds: 0 (no warning) to a year.
pub fn warning_seconds<'de, D: Deserializer<'de>>(d: D) -> Result<i32, D::Error> {
    bounded_i32(d, 0, MAX_SLA_SECONDS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_numbers_may_carry_a_zero_fraction() {
        let w = |json: &str| whole(&mut serde_json::Deserializer::from_str(json));
        assert_eq!(w("3").unwrap(), 3);
        assert_eq!(w("3.0").unwrap(), 3);
        assert_eq!(w("-1e3").unwrap(), -1000);
        assert!(w("3.5").is_err());
        assert!(w("1e300").is_err());
        assert!(w("18446744073709551615").is_err());
        assert!(w("\"3\"").is_err());
    }

    fn money(v: f64) -> Option<String> {
        Money::parse(v).map(|m| m.get().to_string())
    }

    #[test]
    fn amounts_keep_the_decimals_a_client_wrote() {
        assert_eq!(money(12500.1).as_deref(), Some("12500.1"));
        assert_eq!(money(0.125).as_deref(), Some("0.13"));
        assert_eq!(money(0.0).as_deref(), Some("0"));
        assert_eq!(
            money(999_999_999_999.99).as_deref(),
            Some("999999999999.99")
        );
        assert_eq!(
            money(999_999_999_999.994).as_deref(),
            Some("999999999999.99")
        );
    }

    #[test]
    fn amounts_past_the_column_are_refused() {
        for bad in [
            -0.01,
            999_999_999_999.995,
            1e12,
            1e300,
            f64::NAN,
            f64::INFINITY,
        ] {
            assert_eq!(money(bad), None, "{bad}");
        }
        assert!(Hours::parse(99_999_999.99).is_some());
        assert!(Hours::parse(-5.949097750308183e-223).is_none());
        assert!(Hours::parse(-0.0).is_some());
        assert!(Hours::parse(99_999_999.999).is_none());
        // The largest f64 below the document's bound still fits after rounding.
        let edge = f64::from_bits((1e8f64 - 0.005).to_bits() - 1);
        assert_eq!(Hours::parse(edge).unwrap().get().to_string(), "99999999.99");
    }
}
