//! Field checks shared by every endpoint: each failure is a 400 with its own code.

use crate::error::ApiError;
use crate::money::{self, AmountError};
use rtgs_core::entry::{AccountId, Bmi, Currency};
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

pub fn parse_bmi(text: &str) -> Result<Bmi, ApiError> {
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
