//! ISO 20022 over real HTTP: a pacs.008 in (its head.001 BizMsgIdr as `bmi`), pacs.002 out, one
//! test per bad-input row, idempotency shared with the JSON endpoint; the journal is read back.

mod common;

use common::{fresh_dir, journaled, start};

fn pacs008(bmi: &str, tx: &str) -> Vec<u8> {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<Envelope>
  <h:AppHdr xmlns:h="urn:iso:std:iso:20022:tech:xsd:head.001.001.02">
    <h:Fr><h:FIId><h:FinInstnId><h:BICFI>BANKAAAAXXX</h:BICFI></h:FinInstnId></h:FIId></h:Fr>
    <h:To><h:FIId><h:FinInstnId><h:BICFI>RTGSXXXXXXX</h:BICFI></h:FinInstnId></h:FIId></h:To>
    <h:BizMsgIdr>{bmi}</h:BizMsgIdr><h:MsgDefIdr>pacs.008.001.08</h:MsgDefIdr>
    <h:CreDt>2026-11-30T01:00:00Z</h:CreDt>
  </h:AppHdr>
  <Document xmlns="urn:iso:std:iso:20022:tech:xsd:pacs.008.001.08"><FIToFICstmrCdtTrf>
    <GrpHdr><MsgId>{bmi}</MsgId><CreDtTm>2026-11-30T01:00:00Z</CreDtTm><NbOfTxs>1</NbOfTxs>
      <SttlmInf><SttlmMtd>CLRG</SttlmMtd></SttlmInf></GrpHdr>
    <CdtTrfTxInf>{tx}</CdtTrfTxInf>
  </FIToFICstmrCdtTrf></Document>
</Envelope>"#
    )
    .into_bytes()
}

fn tx(debtor: &str, creditor: &str, amount: &str, ccy: &str) -> String {
    format!(
        r#"<PmtId><EndToEndId>E2E</EndToEndId></PmtId><IntrBkSttlmAmt Ccy="{ccy}">{amount}</IntrBkSttlmAmt>
        <ChrgBr>SLEV</ChrgBr><Dbtr><Nm>A &amp; Co</Nm></Dbtr>
        <DbtrAcct><Id><Othr><Id>{debtor}</Id></Othr></Id></DbtrAcct>
        <DbtrAgt><FinInstnId><BICFI>BANKAAAAXXX</BICFI></FinInstnId></DbtrAgt>
        <CdtrAgt><FinInstnId><BICFI>BANKBBBB</BICFI></FinInstnId></CdtrAgt>
        <Cdtr><Nm>B</Nm></Cdtr><CdtrAcct><Id><Othr><Id>{creditor}</Id></Othr></Id></CdtrAcct>"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pacs008_settles_and_its_pacs002_follows_it() {
    let node = start(&fresh_dir("iso-settle"), true).await;
    let body = pacs008("X-1", &tx("1", "2", "12.34", "EUR"));
    let (status, answer) = node.send_signed_raw("bank-a", "POST", "/v1/iso20022/pacs008", &body).await;
    assert_eq!(status, 202, "{answer}");
    assert!(
        answer.contains("<OrgnlMsgId>X-1</OrgnlMsgId>") && answer.contains("<TxSts>ACSP</TxSts>"),
        "{answer}"
    );
    assert!(answer.contains("<ClrSysRef>"), "the seq is known: {answer}");
    // The same message again: the same answer; the JSON view agrees.
    let (again, _) = node.send_signed_raw("bank-a", "POST", "/v1/iso20022/pacs008", &body).await;
    assert_eq!(again, 202);
    let (status, report) =
        node.send_signed_raw("bank-a", "GET", "/v1/iso20022/pacs002/X-1?wait_s=5", b"").await;
    assert_eq!(status, 200, "{report}");
    assert!(report.contains("<TxSts>ACCC</TxSts>"), "{report}");
    let (_, json) = node.as_a("GET", "/v1/transfers/X-1", b"").await;
    assert_eq!(json["status"], "ACCC");
    assert_eq!(node.account_at(2, json["seq"].as_u64().unwrap_or(0)).await["balance"], "12.34");

    // A rejection carries its ISO reason.
    let (status, _) = node
        .send_signed_raw(
            "bank-a",
            "POST",
            "/v1/iso20022/pacs008",
            &pacs008("X-2", &tx("1", "2", "5000.00", "EUR")),
        )
        .await;
    assert_eq!(status, 202);
    let (_, report) = node.send_signed_raw("bank-a", "GET", "/v1/iso20022/pacs002/X-2", b"").await;
    assert!(report.contains("<TxSts>RJCT</TxSts>") && report.contains("<Cd>AM04</Cd>"), "{report}");
    // Same BizMsgIdr, other content: 422, as for JSON.
    let (status, answer) = node
        .send_signed_raw(
            "bank-a",
            "POST",
            "/v1/iso20022/pacs008",
            &pacs008("X-1", &tx("1", "2", "12.35", "EUR")),
        )
        .await;
    assert_eq!(status, 422, "{answer}");
    assert!(answer.contains("bmi_conflict"), "{answer}");
    let bmis = node.finish().await;
    assert_eq!(journaled(&bmis), ["X-1", "X-2"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_pacs008_input_gets_a_4xx_with_its_code_and_nothing_is_journaled() {
    let node = start(&fresh_dir("iso-bad"), true).await;
    let ok = tx("1", "2", "1.00", "EUR");
    let rows: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        ("not xml", b"{\"bmi\":\"x\"}".to_vec(), 400, "missing_field"),
        ("unclosed", b"<Envelope><AppHdr>".to_vec(), 400, "malformed_xml"),
        ("mismatched", b"<a><b></a>".to_vec(), 400, "malformed_xml"),
        ("doctype", b"<!DOCTYPE a [<!ENTITY x \"y\">]><a>&x;</a>".to_vec(), 400, "malformed_xml"),
        ("no BizMsgIdr", pacs008("", &ok), 400, "missing_field"),
        ("bmi too long", pacs008(&"B".repeat(36), &ok), 400, "invalid_bmi"),
        (
            "no amount",
            pacs008("B-1", &ok.replace(r#"<IntrBkSttlmAmt Ccy="EUR">1.00</IntrBkSttlmAmt>"#, "")),
            400,
            "missing_field",
        ),
        ("no currency", pacs008("B-2", &ok.replace(r#" Ccy="EUR""#, "")), 400, "missing_field"),
        ("unknown currency", pacs008("B-3", &tx("1", "2", "1.00", "XXX")), 400, "unknown_currency"),
        ("zero", pacs008("B-4", &tx("1", "2", "0.00", "EUR")), 400, "amount_not_positive"),
        ("negative", pacs008("B-5", &tx("1", "2", "-1.00", "EUR")), 400, "amount_not_positive"),
        ("decimals", pacs008("B-6", &tx("1", "2", "1.001", "EUR")), 400, "too_many_decimals"),
        ("overflow", pacs008("B-7", &tx("1", "2", "999999999999999999999", "EUR")), 400, "amount_too_large"),
        ("account", pacs008("B-8", &tx("one", "2", "1.00", "EUR")), 400, "invalid_account_id"),
        ("bic", pacs008("B-9", &ok.replace("BANKBBBB", "BANK-B")), 400, "invalid_bic"),
        (
            "iban",
            pacs008("B-10", &ok.replace("<Othr><Id>1</Id></Othr>", "<IBAN>DE00370400440532013000</IBAN>")),
            400,
            "invalid_iban",
        ),
        (
            "valid iban",
            pacs008("B-11", &ok.replace("<Othr><Id>1</Id></Othr>", "<IBAN>DE89370400440532013000</IBAN>")),
            400,
            "unsupported_account_scheme",
        ),
        (
            "two transactions",
            pacs008("B-12", &format!("{ok}</CdtTrfTxInf><CdtTrfTxInf>{ok}")),
            400,
            "invalid_field",
        ),
        ("not own debtor", pacs008("B-13", &tx("3", "2", "1.00", "EUR")), 403, "debtor_not_owned"),
        ("unknown creditor", pacs008("B-14", &tx("1", "77", "1.00", "EUR")), 422, "unknown_account"),
        ("too large", vec![b' '; rtgs_api::limits::BODY_BYTES_MAX + 1], 413, "body_too_large"),
    ];
    for (name, body, want, code) in rows {
        let (status, answer) = node.send_signed_raw("bank-a", "POST", "/v1/iso20022/pacs008", &body).await;
        let got: serde_json::Value = serde_json::from_str(&answer).unwrap_or_default();
        assert_eq!((status, got["code"].as_str()), (want, Some(code)), "{name}: {answer}");
    }
    let bmis = node.finish().await;
    assert_eq!(journaled(&bmis), Vec::<&str>::new());
}
