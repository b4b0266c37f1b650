//! The pacs.008 parser on arbitrary bytes: never a panic, and what it accepts has every field
//! the API needs (a `bmi`, an amount, a currency, both accounts).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../node/api/src/iso20022.rs"]
#[allow(dead_code)]
mod iso20022;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = iso20022::parse_pacs008(data) {
        assert!(!m.bmi.is_empty() && !m.amount.is_empty() && !m.currency.is_empty());
        assert!(!m.debtor_account.is_empty() && !m.creditor_account.is_empty());
        let _ = iso20022::pacs002("bank-a", &m.bmi, "ACSP", None, Some(1), 0);
    }
});
