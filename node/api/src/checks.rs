//! Field checks shared by every endpoint: each failure is a 400 with its own code.

use crate::error::ApiError;
use crate::money::{self, AmountError};
use rtgs_core::entry::{AccountId, Bmi, Currency, InputError};
use rtgs_core::limits::BMI_TEXT_BYTES_MAX;
use serde::de::DeserializeOwned;

/// JSON into `T` (whose fields are `deny_unknown_fields`; every struct from an object, never a
/// positional array: [`crate::json`]): `malformed_json`, `not_an_object`, `unknown_field`,
/// `missing_field` or `invalid_field`.
pub fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    crate::json::from_slice(body).map_err(|e| {
        use serde_json::error::Category;
        let text = e.to_string();
        let code = match e.classify() {
            Category::Syntax | Category::Eof | Category::Io => "malformed_json",
            Category::Data if text.contains(&format!("expected {}", crate::json::NOT_AN_OBJECT)) => {
                "not_an_object"
            }
            Category::Data if text.starts_with("unknown field") => "unknown_field",
            Category::Data if text.starts_with("missing field") => "missing_field",
            Category::Data => "invalid_field",
        };
        ApiError::bad_request(code, text)
    })
}

/// A `bmi` text as a participant or an operator writes it: 1 to 35 printable ASCII (ISO 20022
/// `Max35Text`); a participant's is journaled under its scoped key ([`crate::scope`]).
pub fn parse_bmi(text: &str) -> Result<Bmi, ApiError> {
    let invalid = |message: String| ApiError::bad_request("invalid_bmi", message);
    if text.len() > BMI_TEXT_BYTES_MAX {
        return Err(invalid(format!("bmi must be 1 to {BMI_TEXT_BYTES_MAX} bytes")));
    }
    Bmi::new(text.as_bytes()).map_err(|e| match e {
        InputError::BmiLength => invalid(format!("bmi must be 1 to {BMI_TEXT_BYTES_MAX} bytes")),
        e => invalid(e.to_string()),
    })
}

/// An operator's (or an internal route's) `bmi`: journaled as written, so it may not start with
/// the participants' scope mark (`~`): no raw `bmi` can be a participant's key.
pub fn parse_operator_bmi(text: &str) -> Result<Bmi, ApiError> {
    let bmi = parse_bmi(text)?;
    if bmi.as_bytes().first() == Some(&crate::scope::SCOPE_MARK) {
        let message = "an operator's bmi may not start with '~' (participants' scoped keys do)";
        return Err(ApiError::bad_request("invalid_bmi", message));
    }
    Ok(bmi)
}

/// A journaled `bmi` as an operator names it (a participant's scoped key included: up to
/// `BMI_BYTES_MAX` bytes).
pub fn parse_journaled_bmi(text: &str) -> Result<Bmi, ApiError> {
    Bmi::new(text.as_bytes()).map_err(|e| ApiError::bad_request("invalid_bmi", e.to_string()))
}

/// A currency the API accepts, with its minor-unit exponent.
pub fn parse_currency(text: &str) -> Result<(Currency, u32), ApiError> {
    let unknown = || ApiError::bad_request("unknown_currency", format!("currency {text:?} is not accepted"));
    let exponent = money::exponent(text).ok_or_else(unknown)?;
    let currency = Currency::new(text.as_bytes()).map_err(|_| unknown())?;
    Ok((currency, exponent))
}

pub fn parse_amount(text: &str, exponent: u32) -> Result<u64, ApiError> {
    money::parse_minor(text, exponent).map_err(|e| {
        let code = match e {
            AmountError::Malformed => "invalid_amount",
            AmountError::TooManyDecimals(_) => "too_many_decimals",
            AmountError::NotPositive => "amount_not_positive",
            AmountError::TooLarge => "amount_too_large",
        };
        ApiError::bad_request(code, e.to_string())
    })
}

pub fn parse_account_id(text: &str) -> Result<AccountId, ApiError> {
    let invalid = || ApiError::bad_request("invalid_account_id", "account ids are unsigned integers");
    text.parse::<u64>().map(AccountId).map_err(|_| invalid())
}
