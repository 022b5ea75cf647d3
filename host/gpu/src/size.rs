//! Sizes with units: `141GiB`, `79.6GiB`, `80 GB`, `512mib`.
//!
//! Binary units (KiB, MiB, GiB, TiB) count in 1024s, decimal ones (KB, MB, GB,
//! TB) in 1000s, as GPU vendors print them; units are case-insensitive and a
//! unit is required, since a bare `141` could mean bytes or GiB.

/// The units a size may carry, with their size in bytes.
const UNITS: [(&str, u64); 9] = [
    ("b", 1),
    ("kib", 1 << 10),
    ("mib", 1 << 20),
    ("gib", 1 << 30),
    ("tib", 1 << 40),
    ("kb", 1_000),
    ("mb", 1_000_000),
    ("gb", 1_000_000_000),
    ("tb", 1_000_000_000_000),
];

/// The most decimal places a size may have: 18 keeps `fraction * unit` inside
/// a `u128` for the largest unit, and no one measures a GPU in attobytes.
const MAX_DECIMALS: usize = 18;

/// A size that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    /// Nothing was given.
    #[error("the size is empty; write one like 141GiB")]
    Empty,
    /// A number without a unit.
    #[error(
        "the size {0:?} has no unit; write one like 141GiB (units: B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)"
    )]
    MissingUnit(String),
    /// A unit this parser does not know.
    #[error(
        "the size {input:?} has an unknown unit {unit:?}; use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB"
    )]
    UnknownUnit {
        /// The whole size as given.
        input: String,
        /// The unit as given.
        unit: String,
    },
    /// The number part is not a plain decimal number.
    #[error("the size {0:?} does not start with a number like 141 or 79.6")]
    BadNumber(String),
    /// More than 18 decimal places.
    #[error("the size {0:?} has more than 18 decimal places")]
    TooPrecise(String),
    /// More bytes than a `u64` holds.
    #[error("the size {0:?} is too large")]
    TooLarge(String),
}

/// Reads a size with a unit into bytes, rounding a fraction of a byte down.
pub fn parse_size(input: &str) -> Result<u64, SizeError> {
    let text = input.trim();
    if text.is_empty() {
        return Err(SizeError::Empty);
    }
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = (&text[..split], text[split..].trim_start());
    if number.is_empty() {
        return Err(SizeError::BadNumber(input.to_owned()));
    }
    if unit.is_empty() {
        return Err(SizeError::MissingUnit(input.to_owned()));
    }
    let multiplier = UNITS
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(unit))
        .map(|&(_, bytes)| bytes)
        .ok_or_else(|| SizeError::UnknownUnit {
            input: input.to_owned(),
            unit: unit.to_owned(),
        })?;

    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let digits_only = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let dot_without_digits = number.contains('.') && fraction.is_empty();
    if whole.is_empty() || !digits_only(fraction) || dot_without_digits {
        return Err(SizeError::BadNumber(input.to_owned()));
    }
    if fraction.len() > MAX_DECIMALS {
        return Err(SizeError::TooPrecise(input.to_owned()));
    }

    let too_large = || SizeError::TooLarge(input.to_owned());
    let whole: u64 = whole.parse().map_err(|_| too_large())?;
    let whole_bytes = whole.checked_mul(multiplier).ok_or_else(too_large)?;
    let fraction_bytes = if fraction.is_empty() {
        0
    } else {
        // Exact integer arithmetic: 79.6GiB must not become 79.59999…GiB.
        let numerator: u128 = fraction.parse().map_err(|_| too_large())?;
        let denominator = 10u128.pow(fraction.len() as u32);
        u64::try_from(numerator * u128::from(multiplier) / denominator).map_err(|_| too_large())?
    };
    whole_bytes
        .checked_add(fraction_bytes)
        .ok_or_else(too_large)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    #[test]
    fn every_unit_in_any_case() {
        let cases = [
            ("512B", 512),
            ("1KiB", 1024),
            ("1kib", 1024),
            ("2MiB", 2 << 20),
            ("141GiB", 141 * GIB),
            ("141gib", 141 * GIB),
            ("1TiB", 1 << 40),
            ("1KB", 1_000),
            ("1mb", 1_000_000),
            ("80GB", 80_000_000_000),
            ("2Tb", 2_000_000_000_000),
        ];
        for (input, bytes) in cases {
            assert_eq!(parse_size(input), Ok(bytes), "{input}");
        }
    }

    #[test]
    fn spaces_around_and_before_the_unit() {
        assert_eq!(parse_size(" 80 GB "), Ok(80_000_000_000));
        assert_eq!(parse_size("141\tGiB"), Ok(141 * GIB));
    }

    #[test]
    fn decimals_are_exact_and_round_down() {
        // 79.6 × 2^30 = 85_469_849_190.4
        assert_eq!(parse_size("79.6GiB"), Ok(85_469_849_190));
        assert_eq!(parse_size("0.5KiB"), Ok(512));
        assert_eq!(parse_size("1.5B"), Ok(1));
        assert_eq!(parse_size("79.600GB"), Ok(79_600_000_000));
    }

    #[test]
    fn a_unit_is_required() {
        assert_eq!(parse_size("141"), Err(SizeError::MissingUnit("141".into())));
        assert_eq!(parse_size("  "), Err(SizeError::Empty));
    }

    #[test]
    fn unknown_units_are_named() {
        let error = parse_size("141G").unwrap_err();
        assert_eq!(
            error,
            SizeError::UnknownUnit {
                input: "141G".into(),
                unit: "G".into()
            }
        );
        assert!(error.to_string().contains("unknown unit \"G\""), "{error}");
        assert!(matches!(
            parse_size("141 GiB/s"),
            Err(SizeError::UnknownUnit { .. })
        ));
    }

    #[test]
    fn malformed_numbers_are_refused() {
        for input in ["GiB", ".5GiB", "5.GiB", "1.2.3GiB", "-1GiB", "+1GiB"] {
            assert_eq!(
                parse_size(input),
                Err(SizeError::BadNumber(input.into())),
                "{input}"
            );
        }
        // An exponent reads as a unit, and not one that is known.
        assert!(matches!(
            parse_size("1e9B"),
            Err(SizeError::UnknownUnit { unit, .. }) if unit == "e9B"
        ));
    }

    #[test]
    fn overflow_is_refused() {
        assert_eq!(
            parse_size("16777216TiB"),
            Err(SizeError::TooLarge("16777216TiB".into()))
        );
        assert!(matches!(
            parse_size("99999999999999999999999B"),
            Err(SizeError::TooLarge(_))
        ));
        assert_eq!(parse_size("16777215TiB"), Ok(16_777_215 << 40));
        assert!(matches!(
            parse_size("0.1234567890123456789GiB"),
            Err(SizeError::TooPrecise(_))
        ));
    }
}
