//! ISO 20022 in and out: a pacs.008 credit transfer (with its head.001 business application
//! header) parsed into the fields of a transfer, and a pacs.002 status report written from a
//! transfer's status.
//!
//! **What is read.** A body holds the header and the document side by side under one root
//! element of any name (e.g. `<Envelope><AppHdr>…</AppHdr><Document>…</Document></Envelope>`);
//! elements are matched by local name, so namespace prefixes do not matter. Used:
//! `AppHdr/BizMsgIdr` (the `bmi`), `AppHdr/MsgDefIdr` (must name pacs.008),
//! `GrpHdr/NbOfTxs` (must be 1: batches go through the JSON batch endpoint),
//! `CdtTrfTxInf/IntrBkSttlmAmt` with its `Ccy`, the debtor's and creditor's account
//! (`DbtrAcct|CdtrAcct/Id/Othr/Id`: the RTGS account number), and the agents' BICs
//! (`DbtrAgt|CdtrAgt/FinInstnId/BICFI`, checked when present). Other ISO elements are allowed and
//! ignored. An `IBAN` is checked (ISO 13616: letters, length, mod 97) and then refused as
//! unsupported: accounts here are numbered, not IBANs. A repeated single-valued element, a
//! document type declaration, more than [`DEPTH_MAX`] levels or [`ELEMENTS_MAX`] elements are
//! refused. The parser never panics on any input (a fuzz target holds it to that).
//!
//! **What is written.** `pacs.002.001.10` with the original message id (the `bmi`), the status
//! (ACSP / ACCC / RJCT), the ISO reason of a rejection and the seq as clearing-system reference.

use quick_xml::events::Event;
use quick_xml::Reader;

/// Deepest element nesting accepted.
pub const DEPTH_MAX: usize = 32;
/// Most elements in one message.
pub const ELEMENTS_MAX: usize = 2_000;

/// The fields of a pacs.008 this node uses, as text (checked by the same functions as JSON).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pacs008 {
    pub bmi: String,
    pub msg_def: Option<String>,
    pub msg_id: Option<String>,
    pub end_to_end_id: Option<String>,
    pub amount: String,
    pub currency: String,
    pub debtor_account: String,
    pub creditor_account: String,
    pub debtor_bic: Option<String>,
    pub creditor_bic: Option<String>,
}

/// Why a body is not an acceptable pacs.008; each is a 400 with its own code.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IsoError {
    #[error("not well-formed XML: {0}")]
    Malformed(String),
    #[error("document type declarations are not accepted")]
    DocType,
    #[error("more than {DEPTH_MAX} levels or {ELEMENTS_MAX} elements")]
    TooLarge,
    #[error("missing element {0}")]
    Missing(&'static str),
    #[error("element {0} appears more than once")]
    Repeated(&'static str),
    #[error("{0}")]
    Invalid(String),
    #[error("exactly one CdtTrfTxInf per message (NbOfTxs 1); use POST /v1/transfers/batch for batches")]
    NotOneTransaction,
    #[error("{0:?} is not a BIC (4 letters, 2 letters, 2 letters or digits, optional 3 letters or digits)")]
    InvalidBic(String),
    #[error("{0:?} is not a valid IBAN")]
    InvalidIban(String),
    #[error("accounts are identified by Othr/Id (the RTGS account number), not by IBAN")]
    UnsupportedAccountScheme,
}

impl IsoError {
    /// The machine-readable code of the 400 answer.
    pub fn code(&self) -> &'static str {
        match self {
            IsoError::Malformed(_) | IsoError::DocType | IsoError::TooLarge => "malformed_xml",
            IsoError::Missing(_) => "missing_field",
            IsoError::Repeated(_) | IsoError::Invalid(_) | IsoError::NotOneTransaction => "invalid_field",
            IsoError::InvalidBic(_) => "invalid_bic",
            IsoError::InvalidIban(_) => "invalid_iban",
            IsoError::UnsupportedAccountScheme => "unsupported_account_scheme",
        }
    }
}

/// Where a text belongs, by the element path's tail (local names).
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
enum Field {
    Bmi,
    MsgDef,
    MsgId,
    NbOfTxs,
    EndToEndId,
    Amount,
    DebtorAccount,
    CreditorAccount,
    DebtorIban,
    CreditorIban,
    DebtorBic,
    CreditorBic,
}

impl Field {
    fn of(path: &[String]) -> Option<Field> {
        let ends = |tail: &[&str]| {
            path.len() >= tail.len() && path[path.len() - tail.len()..].iter().zip(tail).all(|(a, b)| a == b)
        };
        let in_tx = path.iter().any(|p| p == "CdtTrfTxInf");
        Some(if ends(&["AppHdr", "BizMsgIdr"]) {
            Field::Bmi
        } else if ends(&["AppHdr", "MsgDefIdr"]) {
            Field::MsgDef
        } else if ends(&["GrpHdr", "MsgId"]) {
            Field::MsgId
        } else if ends(&["GrpHdr", "NbOfTxs"]) {
            Field::NbOfTxs
        } else if !in_tx {
            return None;
        } else if ends(&["CdtTrfTxInf", "PmtId", "EndToEndId"]) {
            Field::EndToEndId
        } else if ends(&["CdtTrfTxInf", "IntrBkSttlmAmt"]) {
            Field::Amount
        } else if ends(&["CdtTrfTxInf", "DbtrAcct", "Id", "Othr", "Id"]) {
            Field::DebtorAccount
        } else if ends(&["CdtTrfTxInf", "CdtrAcct", "Id", "Othr", "Id"]) {
            Field::CreditorAccount
        } else if ends(&["CdtTrfTxInf", "DbtrAcct", "Id", "IBAN"]) {
            Field::DebtorIban
        } else if ends(&["CdtTrfTxInf", "CdtrAcct", "Id", "IBAN"]) {
            Field::CreditorIban
        } else if ends(&["CdtTrfTxInf", "DbtrAgt", "FinInstnId", "BICFI"]) {
            Field::DebtorBic
        } else if ends(&["CdtTrfTxInf", "CdtrAgt", "FinInstnId", "BICFI"]) {
            Field::CreditorBic
        } else {
            return None;
        })
    }

    fn name(self) -> &'static str {
        match self {
            Field::Bmi => "AppHdr/BizMsgIdr",
            Field::MsgDef => "AppHdr/MsgDefIdr",
            Field::MsgId => "GrpHdr/MsgId",
            Field::NbOfTxs => "GrpHdr/NbOfTxs",
            Field::EndToEndId => "PmtId/EndToEndId",
            Field::Amount => "IntrBkSttlmAmt",
            Field::DebtorAccount => "DbtrAcct/Id/Othr/Id",
            Field::CreditorAccount => "CdtrAcct/Id/Othr/Id",
            Field::DebtorIban => "DbtrAcct/Id/IBAN",
            Field::CreditorIban => "CdtrAcct/Id/IBAN",
            Field::DebtorBic => "DbtrAgt/FinInstnId/BICFI",
            Field::CreditorBic => "CdtrAgt/FinInstnId/BICFI",
        }
    }
}

const FIELDS: usize = 12;

fn index(f: Field) -> usize {
    f as usize
}

/// Parses a pacs.008 with its business application header (see the module docs).
pub fn parse_pacs008(xml: &[u8]) -> Result<Pacs008, IsoError> {
    let mut reader = Reader::from_reader(xml);
    reader.config_mut().trim_text(true);
    let mut path: Vec<String> = Vec::new();
    let mut values: [Option<String>; FIELDS] = Default::default();
    let mut currency: Option<String> = None;
    let (mut elements, mut transactions) = (0usize, 0usize);
    let mut buf = Vec::new();
    loop {
        let event = reader.read_event_into(&mut buf).map_err(|e| IsoError::Malformed(e.to_string()))?;
        match event {
            Event::Start(e) => {
                elements += 1;
                if elements > ELEMENTS_MAX || path.len() >= DEPTH_MAX {
                    return Err(IsoError::TooLarge);
                }
                let name = String::from_utf8_lossy(e.local_name().as_ref()).into_owned();
                if name == "CdtTrfTxInf" {
                    transactions += 1;
                }
                if name == "IntrBkSttlmAmt" && path.iter().any(|p| p == "CdtTrfTxInf") {
                    for a in e.attributes() {
                        let a = a.map_err(|e| IsoError::Malformed(e.to_string()))?;
                        if a.key.local_name().as_ref() == b"Ccy" {
                            if currency.is_some() {
                                return Err(IsoError::Repeated("IntrBkSttlmAmt@Ccy"));
                            }
                            let v = a.unescape_value().map_err(|e| IsoError::Malformed(e.to_string()))?;
                            if !v.trim().is_empty() {
                                currency = Some(v.trim().to_string());
                            }
                        }
                    }
                }
                path.push(name);
            }
            Event::Empty(e) => {
                elements += 1;
                if elements > ELEMENTS_MAX {
                    return Err(IsoError::TooLarge);
                }
                if e.local_name().as_ref() == b"CdtTrfTxInf" {
                    transactions += 1;
                }
            }
            Event::End(_) => {
                path.pop();
            }
            Event::Text(t) => {
                if let Some(field) = Field::of(&path) {
                    let text = t.decode().map_err(|e| IsoError::Malformed(e.to_string()))?;
                    let text =
                        quick_xml::escape::unescape(&text).map_err(|e| IsoError::Malformed(e.to_string()))?;
                    let text = text.trim();
                    let slot = &mut values[index(field)];
                    if slot.is_some() {
                        return Err(IsoError::Repeated(field.name()));
                    }
                    // Blank (e.g. only an escaped space) is as good as absent.
                    if !text.is_empty() {
                        *slot = Some(text.to_string());
                    }
                }
            }
            Event::CData(_) => return Err(IsoError::Malformed("CDATA sections are not accepted".into())),
            Event::DocType(_) => return Err(IsoError::DocType),
            Event::Eof => break,
            Event::Decl(_) | Event::PI(_) | Event::Comment(_) | Event::GeneralRef(_) => {}
        }
        buf.clear();
    }
    if !path.is_empty() {
        return Err(IsoError::Malformed("the document ends inside an element".into()));
    }
    let take = |values: &mut [Option<String>; FIELDS], f: Field| values[index(f)].take();
    let need =
        |values: &mut [Option<String>; FIELDS], f: Field| take(values, f).ok_or(IsoError::Missing(f.name()));
    if transactions != 1 {
        return Err(if transactions == 0 {
            IsoError::Missing("CdtTrfTxInf")
        } else {
            IsoError::NotOneTransaction
        });
    }
    if let Some(n) = take(&mut values, Field::NbOfTxs) {
        if n != "1" {
            return Err(IsoError::NotOneTransaction);
        }
    }
    let msg_def = take(&mut values, Field::MsgDef);
    if let Some(d) = &msg_def {
        if !d.starts_with("pacs.008") {
            return Err(IsoError::Invalid(format!("AppHdr/MsgDefIdr {d:?} is not a pacs.008")));
        }
    }
    let debtor_bic = take(&mut values, Field::DebtorBic);
    let creditor_bic = take(&mut values, Field::CreditorBic);
    for bic in debtor_bic.iter().chain(&creditor_bic) {
        if !is_bic(bic) {
            return Err(IsoError::InvalidBic(bic.clone()));
        }
    }
    for f in [Field::DebtorIban, Field::CreditorIban] {
        if let Some(iban) = take(&mut values, f) {
            return Err(if is_iban(&iban) {
                IsoError::UnsupportedAccountScheme
            } else {
                IsoError::InvalidIban(iban)
            });
        }
    }
    Ok(Pacs008 {
        bmi: need(&mut values, Field::Bmi)?,
        msg_def,
        msg_id: take(&mut values, Field::MsgId),
        end_to_end_id: take(&mut values, Field::EndToEndId),
        amount: need(&mut values, Field::Amount)?,
        currency: currency.ok_or(IsoError::Missing("IntrBkSttlmAmt@Ccy"))?,
        debtor_account: need(&mut values, Field::DebtorAccount)?,
        creditor_account: need(&mut values, Field::CreditorAccount)?,
        debtor_bic,
        creditor_bic,
    })
}

/// ISO 9362: 4 letters (institution), 2 letters (country), 2 letters or digits (location),
/// optionally 3 letters or digits (branch).
pub fn is_bic(s: &str) -> bool {
    let b = s.as_bytes();
    (b.len() == 8 || b.len() == 11)
        && b[..6].iter().all(u8::is_ascii_uppercase)
        && b[6..].iter().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
}

/// ISO 13616: 2 letters, 2 check digits, up to 30 letters or digits, and mod 97 of the
/// rearranged number is 1.
pub fn is_iban(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 5 || b.len() > 34 {
        return false;
    }
    if !b[..2].iter().all(u8::is_ascii_uppercase)
        || !b[2..4].iter().all(u8::is_ascii_digit)
        || !b[4..].iter().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
    {
        return false;
    }
    let mut rem = 0u32;
    for &c in b[4..].iter().chain(&b[..4]) {
        let v = if c.is_ascii_digit() { u32::from(c - b'0') } else { u32::from(c - b'A') + 10 };
        rem = if v >= 10 { (rem * 100 + v) % 97 } else { (rem * 10 + v) % 97 };
    }
    rem == 1
}

fn escape(s: &str) -> String {
    quick_xml::escape::escape(s).into_owned()
}

/// A pacs.002 status report for one transfer.
pub fn pacs002(bmi: &str, status: &str, reason: Option<&str>, seq: Option<u64>, now_s: u64) -> String {
    let created = rfc3339(now_s);
    let bmi = escape(bmi);
    let reason =
        reason.map_or(String::new(), |r| format!("<StsRsnInf><Rsn><Cd>{}</Cd></Rsn></StsRsnInf>", escape(r)));
    let seq = seq.map_or(String::new(), |s| format!("<ClrSysRef>{s}</ClrSysRef>"));
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <Document xmlns=\"urn:iso:std:iso:20022:tech:xsd:pacs.002.001.10\"><FIToFIPmtStsRpt>\
         <GrpHdr><MsgId>STS-{bmi}</MsgId><CreDtTm>{created}</CreDtTm></GrpHdr>\
         <OrgnlGrpInfAndSts><OrgnlMsgId>{bmi}</OrgnlMsgId><OrgnlMsgNmId>pacs.008.001.08</OrgnlMsgNmId></OrgnlGrpInfAndSts>\
         <TxInfAndSts><OrgnlTxId>{bmi}</OrgnlTxId><TxSts>{status}</TxSts>{reason}{seq}</TxInfAndSts>\
         </FIToFIPmtStsRpt></Document>\n"
    )
}

/// `YYYY-MM-DDThh:mm:ssZ` of Unix seconds (civil-from-days, proleptic Gregorian).
fn rfc3339(s: u64) -> String {
    let days = (s / 86_400) as i64;
    let secs = s % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", secs / 3_600, secs / 60 % 60, secs % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pacs.008 as a participant sends it; `{tx}` is the CdtTrfTxInf body.
    pub fn message(bmi: &str, tx: &str) -> String {
        format!(
            r#"<?xml version="1.0" encoding="UTF-8"?>
<Envelope>
  <AppHdr xmlns="urn:iso:std:iso:20022:tech:xsd:head.001.001.02">
    <Fr><FIId><FinInstnId><BICFI>BANKAAAAXXX</BICFI></FinInstnId></FIId></Fr>
    <To><FIId><FinInstnId><BICFI>RTGSXXXXXXX</BICFI></FinInstnId></FIId></To>
    <BizMsgIdr>{bmi}</BizMsgIdr>
    <MsgDefIdr>pacs.008.001.08</MsgDefIdr>
    <CreDt>2026-11-30T01:00:00Z</CreDt>
  </AppHdr>
  <Document xmlns="urn:iso:std:iso:20022:tech:xsd:pacs.008.001.08">
    <FIToFICstmrCdtTrf>
      <GrpHdr><MsgId>{bmi}</MsgId><CreDtTm>2026-11-30T01:00:00Z</CreDtTm><NbOfTxs>1</NbOfTxs>
        <SttlmInf><SttlmMtd>CLRG</SttlmMtd></SttlmInf></GrpHdr>
      <CdtTrfTxInf>{tx}</CdtTrfTxInf>
    </FIToFICstmrCdtTrf>
  </Document>
</Envelope>"#
        )
    }

    pub const TX: &str = r#"<PmtId><EndToEndId>E2E-1</EndToEndId></PmtId>
        <IntrBkSttlmAmt Ccy="EUR">12.34</IntrBkSttlmAmt><ChrgBr>SLEV</ChrgBr>
        <Dbtr><Nm>A</Nm></Dbtr><DbtrAcct><Id><Othr><Id>1</Id></Othr></Id></DbtrAcct>
        <DbtrAgt><FinInstnId><BICFI>BANKAAAAXXX</BICFI></FinInstnId></DbtrAgt>
        <CdtrAgt><FinInstnId><BICFI>BANKBBBB</BICFI></FinInstnId></CdtrAgt>
        <Cdtr><Nm>B</Nm></Cdtr><CdtrAcct><Id><Othr><Id>2</Id></Othr></Id></CdtrAcct>"#;

    #[test]
    fn reads_the_fields_it_uses() {
        let p = parse_pacs008(message("M-1", TX).as_bytes());
        let p = p.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((p.bmi.as_str(), p.amount.as_str(), p.currency.as_str()), ("M-1", "12.34", "EUR"));
        assert_eq!((p.debtor_account.as_str(), p.creditor_account.as_str()), ("1", "2"));
        assert_eq!(p.creditor_bic.as_deref(), Some("BANKBBBB"));
        assert_eq!(p.end_to_end_id.as_deref(), Some("E2E-1"));
    }

    #[test]
    fn refuses_what_it_cannot_use() {
        let with = |tx: &str| parse_pacs008(message("M-2", tx).as_bytes()).err().map(|e| e.code());
        assert_eq!(with(&TX.replace("BANKBBBB", "bank-b")), Some("invalid_bic"));
        assert_eq!(with(&TX.replace(r#" Ccy="EUR""#, "")), Some("missing_field"));
        assert_eq!(
            with(&TX.replace("<Othr><Id>1</Id></Othr>", "<IBAN>DE89370400440532013000</IBAN>")),
            Some("unsupported_account_scheme")
        );
        assert_eq!(
            with(&TX.replace("<Othr><Id>1</Id></Othr>", "<IBAN>DE00370400440532013000</IBAN>")),
            Some("invalid_iban")
        );
        assert_eq!(with(&format!("{TX}</CdtTrfTxInf><CdtTrfTxInf>{TX}")), Some("invalid_field"));
        assert_eq!(with(&TX.replace("<Id>2</Id>", "<Id>2</Id><Id>3</Id>")), Some("invalid_field"));
        let bad = |xml: &str| parse_pacs008(xml.as_bytes()).err().map(|e| e.code());
        assert_eq!(bad("<a><b></a>"), Some("malformed_xml"));
        assert_eq!(bad("<!DOCTYPE x [<!ENTITY e \"x\">]><a/>"), Some("malformed_xml"));
        assert_eq!(bad(""), Some("missing_field"));
        assert_eq!(bad(&"<a>".repeat(40)), Some("malformed_xml"));
        assert_eq!(bad(&message("", TX).replace("<BizMsgIdr></BizMsgIdr>", "")), Some("missing_field"));
    }

    #[test]
    fn ibans_and_bics_follow_their_standards() {
        assert!(is_iban("DE89370400440532013000") && is_iban("GB82WEST12345698765432"));
        assert!(!is_iban("DE89370400440532013001") && !is_iban("de89370400440532013000") && !is_iban("DE8"));
        assert!(is_bic("DEUTDEFF") && is_bic("DEUTDEFF500") && !is_bic("DEUTDEF") && !is_bic("1EUTDEFF"));
    }

    #[test]
    fn writes_a_status_report() {
        let x = pacs002("M<1", "RJCT", Some("AM04"), Some(17), 1_796_000_000);
        assert!(x.contains("<OrgnlMsgId>M&lt;1</OrgnlMsgId>") && x.contains("<TxSts>RJCT</TxSts>"), "{x}");
        assert!(x.contains("<Cd>AM04</Cd>") && x.contains("<ClrSysRef>17</ClrSysRef>"), "{x}");
        assert!(x.contains("<CreDtTm>2026-11-30T"), "{x}");
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
    }
}
