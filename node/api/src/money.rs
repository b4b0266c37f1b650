//! Amounts at the edge: decimal text in major units ⇄ integer minor units. No floating point.

use rtgs_core::limits::AMOUNT_MINOR_MAX;

/// The currencies the API accepts, with their ISO 4217 minor-unit exponents.
pub const CURRENCIES: &[(&str, u32)] = &[
    ("CHF", 2),
    ("CZK", 2),
    ("DKK", 2),
    ("EUR", 2),
    ("GBP", 2),
    ("JPY", 0),
    ("KWD", 3),
    ("NOK", 2),
    ("PLN", 2),
    ("SEK", 2),
    ("USD", 2),
];

/// The minor-unit exponent of a known currency.
pub fn exponent(currency: &str) -> Option<u32> {
    CURRENCIES.iter().find(|(code, _)| *code == currency).map(|(_, e)| *e)
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AmountError {
    #[error("amount must be a decimal string such as \"12.34\"")]
    Malformed,
    #[error("amount has more than {0} decimals for its currency")]
    TooManyDecimals(u32),
    #[error("amount must be greater than zero")]
    NotPositive,
    #[error("amount exceeds the largest representable amount")]
    TooLarge,
}

/// Parses `"12.34"` (major units, at most `exponent` decimals, no sign, no exponent notation)
/// into minor units. A leading `-` is reported as [`AmountError::NotPositive`], not as malformed.
///
/// The value is computed by `rust_decimal`; what is checked here first is the text's shape,
/// because `rust_decimal` reads more than the API accepts (`+1`, `1_000`, `.5`, `1.`) and
/// would round or overflow on what the API refuses for a reason of its own. In order:
/// [`Malformed`](AmountError::Malformed) (not `digits[.digits]`, optionally after one `-`),
/// [`TooManyDecimals`](AmountError::TooManyDecimals) (more fraction digits than the currency
/// has, trailing zeros included), [`NotPositive`](AmountError::NotPositive) (a `-`, or zero),
/// [`TooLarge`](AmountError::TooLarge) (above [`AMOUNT_MINOR_MAX`] minor units).
pub fn parse_minor(text: &str, exponent: u32) -> Result<u64, AmountError> {
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (whole, fraction) = match unsigned.split_once('.') {
        Some((w, f)) => (w, Some(f)),
        None => (unsigned, None),
    };
    let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !all_digits(whole) || fraction.is_some_and(|f| !all_digits(f)) {
        return Err(AmountError::Malformed);
    }
    let fraction = fraction.unwrap_or("");
    if fraction.len() > exponent as usize {
        return Err(AmountError::TooManyDecimals(exponent));
    }
    if negative {
        return Err(AmountError::NotPositive);
    }
    // Leading zeros carry no value but count against rust_decimal's 28 digits.
    let whole = whole.trim_start_matches('0');
    let significant = match (whole.is_empty(), fraction.is_empty()) {
        (true, true) => "0".to_string(),
        (true, false) => format!("0.{fraction}"),
        (false, true) => whole.to_string(),
        (false, false) => format!("{whole}.{fraction}"),
    };
    // The shape is checked, so the only error left is a value beyond 96 bits.
    let value = rust_decimal::Decimal::from_str_exact(&significant).map_err(|_| AmountError::TooLarge)?;
    // value = mantissa × 10^-scale with scale ≤ exponent ≤ 28: minor = mantissa × 10^(exponent − scale).
    let scale_up = exponent.checked_sub(value.scale()).ok_or(AmountError::TooManyDecimals(exponent))?;
    let minor = 10i128
        .checked_pow(scale_up)
        .and_then(|factor| value.mantissa().checked_mul(factor))
        .ok_or(AmountError::TooLarge)?;
    match u64::try_from(minor) {
        Ok(0) => Err(AmountError::NotPositive),
        Ok(minor) if minor <= AMOUNT_MINOR_MAX => Ok(minor),
        _ => Err(AmountError::TooLarge),
    }
}

/// Formats minor units as major-unit decimal text (`1234`, exponent 2 ⇒ `"12.34"`).
pub fn format_minor(minor: u64, exponent: u32) -> String {
    if exponent == 0 {
        return minor.to_string();
    }
    let text = format!("{minor:0>width$}", width = exponent as usize + 1);
    let (whole, fraction) = text.split_at(text.len() - exponent as usize);
    format!("{whole}.{fraction}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_major_units_into_minor_units() {
        assert_eq!(parse_minor("12.34", 2), Ok(1234));
        assert_eq!(parse_minor("12.3", 2), Ok(1230));
        assert_eq!(parse_minor("12", 2), Ok(1200));
        assert_eq!(parse_minor("0.01", 2), Ok(1));
        assert_eq!(parse_minor("007", 0), Ok(7));
        assert_eq!(parse_minor("1.234", 3), Ok(1234));
        assert_eq!(parse_minor("92233720368547758.07", 2), Ok(AMOUNT_MINOR_MAX));
        assert_eq!(parse_minor("9223372036854775807", 0), Ok(AMOUNT_MINOR_MAX));
        // Leading zeros are no value, however many (rust_decimal holds 28 digits).
        assert_eq!(parse_minor(&format!("{}1.50", "0".repeat(60)), 2), Ok(150));
        assert_eq!(parse_minor("0.001", 3), Ok(1));
        assert_eq!(parse_minor("1.10", 2), Ok(110));
    }

    #[test]
    fn refuses_bad_amounts_with_a_reason() {
        assert_eq!(parse_minor("12.345", 2), Err(AmountError::TooManyDecimals(2)));
        assert_eq!(parse_minor("1.0", 0), Err(AmountError::TooManyDecimals(0)));
        assert_eq!(parse_minor("0", 2), Err(AmountError::NotPositive));
        assert_eq!(parse_minor("0.00", 2), Err(AmountError::NotPositive));
        assert_eq!(parse_minor("-5", 2), Err(AmountError::NotPositive));
        assert_eq!(parse_minor("92233720368547758.08", 2), Err(AmountError::TooLarge));
        assert_eq!(parse_minor("99999999999999999999999", 2), Err(AmountError::TooLarge));
        // Beyond rust_decimal's 96 bits, and far beyond: still the same reason.
        assert_eq!(parse_minor(&"9".repeat(29), 0), Err(AmountError::TooLarge));
        assert_eq!(parse_minor(&"9".repeat(400), 2), Err(AmountError::TooLarge));
        // The decimals are judged before the size, the sign before the size.
        assert_eq!(parse_minor(&format!("{}.123", "9".repeat(40)), 2), Err(AmountError::TooManyDecimals(2)));
        assert_eq!(parse_minor(&format!("-{}", "9".repeat(40)), 2), Err(AmountError::NotPositive));
        assert_eq!(parse_minor("-1.234", 2), Err(AmountError::TooManyDecimals(2)));
        assert_eq!(parse_minor("-0", 2), Err(AmountError::NotPositive));
        for bad in [
            "", ".", "1.", ".5", "+1", "1e3", "1,00", " 1", "1 ", "--1", "0x10", "١", "1_000", "-", "-.5",
            "1.2.3", "+1.00", "1E3", "NaN", "inf", "1.5e-3", "\u{0}1", "１",
        ] {
            assert_eq!(parse_minor(bad, 2), Err(AmountError::Malformed), "{bad:?}");
        }
    }

    #[test]
    fn formats_minor_units() {
        assert_eq!(format_minor(1234, 2), "12.34");
        assert_eq!(format_minor(5, 2), "0.05");
        assert_eq!(format_minor(0, 3), "0.000");
        assert_eq!(format_minor(42, 0), "42");
        for minor in [0, 1, 99, 100, 123_456_789, AMOUNT_MINOR_MAX] {
            let text = format_minor(minor, 2);
            assert_eq!(parse_minor(&text, 2).unwrap_or(0), minor, "{text}");
        }
    }

    /// A reference for decimal-shaped text: the value in minor units, computed in u128.
    fn reference(whole: &str, fraction: &str, exponent: u32) -> Result<u64, AmountError> {
        if fraction.len() > exponent as usize {
            return Err(AmountError::TooManyDecimals(exponent));
        }
        let digits = format!("{whole}{fraction:0<width$}", width = exponent as usize);
        let value = digits.trim_start_matches('0');
        let value: u128 = if value.is_empty() { 0 } else { value.parse().unwrap_or(u128::MAX) };
        match value {
            0 => Err(AmountError::NotPositive),
            v if v > u128::from(AMOUNT_MINOR_MAX) => Err(AmountError::TooLarge),
            v => Ok(v as u64),
        }
    }

    proptest::proptest! {
        #[test]
        fn decimal_text_parses_as_the_reference_says(
            whole in "[0-9]{1,40}",
            fraction in proptest::option::of("[0-9]{0,4}"),
            exponent in 0u32..=3,
        ) {
            let text = match &fraction {
                Some(f) => format!("{whole}.{f}"),
                None => whole.clone(),
            };
            let want = match fraction.as_deref() {
                Some("") => Err(AmountError::Malformed),
                f => reference(&whole, f.unwrap_or(""), exponent),
            };
            proptest::prop_assert_eq!(parse_minor(&text, exponent), want, "{}", text);
        }

        #[test]
        fn every_amount_round_trips(minor in 1..=AMOUNT_MINOR_MAX, exponent in 0u32..=3) {
            proptest::prop_assert_eq!(parse_minor(&format_minor(minor, exponent), exponent), Ok(minor));
        }

        #[test]
        fn any_text_is_parsed_or_refused_without_panicking(text in "\\PC{0,40}", exponent in 0u32..=3) {
            if let Ok(minor) = parse_minor(&text, exponent) {
                proptest::prop_assert!(minor > 0 && minor <= AMOUNT_MINOR_MAX);
            }
        }
    }

    #[test]
    fn currencies_are_sorted_and_unique() {
        assert!(CURRENCIES.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(exponent("EUR"), Some(2));
        assert_eq!(exponent("XXX"), None);
    }
}
