//! The API's configuration: participants (credentials and accounts) and the accounts to open
//! and fund on a fresh data directory. JSON, unknown fields refused, validated before use.
//!
//! ```json
//! {
//!   "participants": [
//!     { "key_id": "bank-a", "secret": "at-least-16-bytes-of-secret", "accounts": [1, 2] }
//!   ],
//!   "operators": [{ "key_id": "ops", "secret": "another-16-bytes-or-more" }],
//!   "accounts": [
//!     { "id": 1, "currency": "EUR", "fund": "1000000.00" },
//!     { "id": 2, "currency": "EUR" }
//!   ]
//! }
//! ```

use crate::auth::Participant;
use crate::limits::SECRET_BYTES_MIN;
use crate::money;
use rtgs_core::entry::{AccountId, Currency};
use serde::Deserialize;
use std::collections::{BTreeSet, HashSet};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiConfig {
    pub participants: Vec<ParticipantConfig>,
    /// Operators: open, fund and close accounts (`/v1/operator/...`); separate credentials.
    #[serde(default)]
    pub operators: Vec<OperatorConfig>,
    #[serde(default)]
    pub accounts: Vec<AccountConfig>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperatorConfig {
    pub key_id: String,
    pub secret: String,
}

/// Who may call the API: participants and operators, each with its own credentials.
#[derive(Debug, Default)]
pub struct Credentials {
    pub participants: Vec<Participant>,
    pub operators: Vec<Participant>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParticipantConfig {
    pub key_id: String,
    pub secret: String,
    pub accounts: Vec<u64>,
}

#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub struct AccountConfig {
    pub id: u64,
    pub currency: String,
    /// Initial funding in major units (decimal string), if any.
    #[serde(default)]
    pub fund: Option<String>,
}

/// An account to open (and fund) at setup, validated.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct AccountSetup {
    pub id: AccountId,
    pub currency: Currency,
    pub fund_minor: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("config is not valid JSON for this schema: {0}")]
    Parse(#[from] serde_json::Error),
    #[error("no participants")]
    NoParticipants,
    #[error("participant key id {0:?} is empty, reserved (\"operator\") or repeated")]
    KeyId(String),
    #[error("participant {0:?}: secret shorter than {SECRET_BYTES_MIN} bytes")]
    SecretTooShort(String),
    #[error("participants {0:?} and {1:?} have the same bmi scope (rtgs_api::scope): rename one")]
    ScopeCollision(String, String),
    #[error("account {0} is owned by more than one participant")]
    SharedAccount(u64),
    #[error("account {0} is listed twice")]
    DuplicateAccount(u64),
    #[error("account {0}: unknown currency {1:?}")]
    Currency(u64, String),
    #[error("account {0}: fund amount: {1}")]
    Fund(u64, money::AmountError),
}

impl ApiConfig {
    pub fn from_json(text: &str) -> Result<ApiConfig, ConfigError> {
        Ok(serde_json::from_str(text)?)
    }

    /// Validates and builds the runtime parts: credentials and the accounts to set up.
    pub fn build(&self) -> Result<(Credentials, Vec<AccountSetup>), ConfigError> {
        if self.participants.is_empty() {
            return Err(ConfigError::NoParticipants);
        }
        // Key ids are unique across participants and operators (an entry's owner is its key id).
        let mut keys = HashSet::new();
        let mut check_key = |key_id: &str, secret: &str| {
            if key_id.is_empty() || key_id == crate::server::OPERATOR || !keys.insert(key_id.to_string()) {
                return Err(ConfigError::KeyId(key_id.to_string()));
            }
            if secret.len() < SECRET_BYTES_MIN {
                return Err(ConfigError::SecretTooShort(key_id.to_string()));
            }
            Ok(())
        };
        let mut owned = HashSet::new();
        let mut credentials = Credentials::default();
        // Two participants in one namespace would share their bmis: never (42-bit tags; a
        // coincidence is refused, not resolved).
        let mut scopes = std::collections::HashMap::new();
        for p in &self.participants {
            check_key(&p.key_id, &p.secret)?;
            if let Some(other) = scopes.insert(crate::scope::Scope::of(&p.key_id), p.key_id.clone()) {
                return Err(ConfigError::ScopeCollision(other, p.key_id.clone()));
            }
            for a in &p.accounts {
                if !owned.insert(*a) {
                    return Err(ConfigError::SharedAccount(*a));
                }
            }
            let accounts: BTreeSet<AccountId> = p.accounts.iter().map(|a| AccountId(*a)).collect();
            let secret = p.secret.as_bytes().to_vec();
            credentials.participants.push(Participant::new(p.key_id.clone(), secret, accounts));
        }
        for o in &self.operators {
            check_key(&o.key_id, &o.secret)?;
            let secret = o.secret.as_bytes().to_vec();
            credentials.operators.push(Participant::new(o.key_id.clone(), secret, BTreeSet::new()));
        }
        let mut ids = HashSet::new();
        let mut accounts = Vec::new();
        for a in &self.accounts {
            if !ids.insert(a.id) {
                return Err(ConfigError::DuplicateAccount(a.id));
            }
            let bad_currency = || ConfigError::Currency(a.id, a.currency.clone());
            let exponent = money::exponent(&a.currency).ok_or_else(bad_currency)?;
            let currency = Currency::new(a.currency.as_bytes()).map_err(|_| bad_currency())?;
            let fund_minor = match &a.fund {
                Some(text) => money::parse_minor(text, exponent).map_err(|e| ConfigError::Fund(a.id, e))?,
                None => 0,
            };
            accounts.push(AccountSetup { id: AccountId(a.id), currency, fund_minor });
        }
        Ok((credentials, accounts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"{
        "participants": [{ "key_id": "bank-a", "secret": "0123456789abcdef", "accounts": [1] }],
        "operators": [{ "key_id": "ops", "secret": "fedcba9876543210" }],
        "accounts": [{ "id": 1, "currency": "EUR", "fund": "10.00" }, { "id": 2, "currency": "JPY" }]
    }"#;

    #[test]
    fn builds_a_valid_config() {
        let (credentials, accounts) = ApiConfig::from_json(GOOD).and_then(|c| c.build()).expect("valid");
        let participants = &credentials.participants;
        assert_eq!((participants.len(), credentials.operators.len()), (1, 1));
        assert!(participants[0].owns(AccountId(1)) && !participants[0].owns(AccountId(2)));
        assert_eq!(accounts[0].fund_minor, 1000);
        assert_eq!(accounts[1].fund_minor, 0);
    }

    #[test]
    fn refuses_invalid_configs() {
        let cases = [
            (GOOD.replace("\"accounts\": [1]", "\"accounts\": [1], \"extra\": 1"), "Parse"),
            (GOOD.replace("0123456789abcdef", "short"), "SecretTooShort"),
            (GOOD.replace("\"EUR\"", "\"XXX\""), "Currency"),
            (GOOD.replace("10.00", "10.001"), "Fund"),
            (GOOD.replace("\"id\": 2", "\"id\": 1"), "DuplicateAccount"),
            (GOOD.replace("\"key_id\": \"bank-a\"", "\"key_id\": \"\""), "KeyId"),
            (GOOD.replace("\"key_id\": \"ops\"", "\"key_id\": \"bank-a\""), "KeyId"),
            (GOOD.replace("\"key_id\": \"ops\"", "\"key_id\": \"operator\""), "KeyId"),
            (GOOD.replace("fedcba9876543210", "short"), "SecretTooShort"),
        ];
        for (text, want) in cases {
            let got = ApiConfig::from_json(&text).and_then(|c| c.build()).err().map(|e| format!("{e:?}"));
            assert!(got.as_deref().is_some_and(|g| g.starts_with(want)), "{want}: {got:?}");
        }
    }
}
