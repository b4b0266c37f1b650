//! ISO 20022 over real HTTP: a pacs.008 in (its head.001 BizMsgIdr as `bmi`), pacs.002 out, one
//! row per bad-input class, idempotency shared with the JSON endpoint; the journal is read back.
//! And the parser against an independent implementation (`mx20022-model`, generated from the
//! official XSDs): what it writes is read here as the same payment, what is written here reads
//! there and meets the XSDs' constraints.

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
    // Written with character references and entities: the same payment as the plain one below.
    let escaped = pacs008("X&#45;1", &tx("&#x31;", "&#50;", "1&#50;.3<![CDATA[4]]>", "E&#85;R"));
    let (status, answer) = node.send_signed_raw("bank-a", "POST", "/v1/iso20022/pacs008", &escaped).await;
    assert_eq!(status, 202, "{answer}");
    assert!(
        answer.contains("<OrgnlMsgId>X-1</OrgnlMsgId>") && answer.contains("<TxSts>ACSP</TxSts>"),
        "{answer}"
    );
    assert!(answer.contains("<ClrSysRef>"), "the seq is known: {answer}");
    assert!(answer.contains("<AppHdr xmlns=\"urn:iso:std:iso:20022:tech:xsd:head.001.001.02\">"), "{answer}");
    assert!(answer.contains("<MsgDefIdr>pacs.002.001.10</MsgDefIdr>"), "{answer}");
    assert!(answer.contains("<To><FIId><FinInstnId><Othr><Id>bank-a</Id>"), "{answer}");
    // The same message written plainly: the same payment (a retry, not a conflict); the JSON
    // view agrees.
    let body = pacs008("X-1", &tx("1", "2", "12.34", "EUR"));
    let (again, answer) = node.send_signed_raw("bank-a", "POST", "/v1/iso20022/pacs008", &body).await;
    assert_eq!(again, 202, "{answer}");
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
    let ok_message = pacs008("B-0", &ok);
    let ok_text = String::from_utf8_lossy(&ok_message).into_owned();
    let edit = |from: &str, to: &str| {
        assert!(ok_text.contains(from), "{from:?}");
        ok_text.replacen(from, to, 1).into_bytes()
    };
    let mut latin1 = ok_message.clone();
    latin1.splice(0..0, b"<!-- \xE9 -->".iter().copied());
    let rows: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        ("not xml", b"{\"bmi\":\"x\"}".to_vec(), 400, "malformed_xml"),
        ("unclosed", edit("</Envelope>", ""), 400, "malformed_xml"),
        ("mismatched", edit("</GrpHdr>", "</GrpHdrX>"), 400, "malformed_xml"),
        ("trailing content", [ok_message.as_slice(), b"<Envelope/>"].concat(), 400, "malformed_xml"),
        ("duplicate attribute", edit(r#"Ccy="EUR""#, r#"Ccy="EUR" Ccy="USD""#), 400, "malformed_xml"),
        ("doctype", b"<!DOCTYPE a [<!ENTITY x \"y\">]><a>&x;</a>".to_vec(), 400, "xml_doctype"),
        ("undeclared entity", edit(">1.00<", ">1.00&zero;<"), 400, "xml_undeclared_entity"),
        ("char ref to a non-XML char", edit(">1.00<", ">1.00&#1;<"), 400, "xml_invalid_char_ref"),
        ("not UTF-8", latin1, 400, "xml_not_utf8"),
        (
            "undeclared prefix",
            edit("<Dbtr><Nm>A &amp; Co</Nm></Dbtr>", "<p:Dbtr><Nm>A &amp; Co</Nm></p:Dbtr>"),
            400,
            "xml_undeclared_prefix",
        ),
        (
            "processing instruction",
            edit("<Envelope>", "<Envelope><?x y?>"),
            400,
            "xml_processing_instruction",
        ),
        ("too many elements", edit("<Nm>A", &format!("<Nm>{}A", "<x/>".repeat(2_001))), 400, "xml_too_large"),
        ("wrong namespace", edit("pacs.008.001.08\"", "pacs.008.001.13\""), 400, "wrong_namespace"),
        ("wrong MsgDefIdr", edit(">pacs.008.001.08<", ">pacs.008.001.08.x<"), 400, "unsupported_message"),
        ("NbOfTxs mismatch", edit("<NbOfTxs>1<", "<NbOfTxs>2<"), 400, "nb_of_txs_mismatch"),
        (
            "two transactions",
            pacs008("B-12", &format!("{ok}</CdtTrfTxInf><CdtTrfTxInf>{ok}")),
            400,
            "nb_of_txs_mismatch",
        ),
        (
            "a batch",
            String::from_utf8_lossy(&pacs008("B-15", &format!("{ok}</CdtTrfTxInf><CdtTrfTxInf>{ok}")))
                .replacen("<NbOfTxs>1<", "<NbOfTxs>2<", 1)
                .into_bytes(),
            400,
            "one_transaction_per_message",
        ),
        (
            "UETR not v4",
            edit(
                "<EndToEndId>E2E</EndToEndId>",
                "<EndToEndId>E2E</EndToEndId><UETR>8a562c67-ca16-18ba-b074-65581be6f011</UETR>",
            ),
            400,
            "invalid_uetr",
        ),
        (
            "two amounts",
            edit("<ChrgBr>", r#"<IntrBkSttlmAmt Ccy="EUR">9.00</IntrBkSttlmAmt><ChrgBr>"#),
            400,
            "duplicate_element",
        ),
        ("element in a value", edit(">1.00<", ">1.00<x/><"), 400, "unexpected_element"),
        (
            "currency from a wrong place",
            pacs008(
                "B-17",
                &ok.replace(r#" Ccy="EUR">1.00<"#, ">1.00<")
                    .replace("<ChrgBr>", r#"<InstdAmt Ccy="EUR">1.00</InstdAmt><ChrgBr>"#),
            ),
            400,
            "missing_field",
        ),
        ("no BizMsgIdr", pacs008("", &ok), 400, "missing_field"),
        (
            "bmi too long",
            edit("<h:BizMsgIdr>B-0<", &format!("<h:BizMsgIdr>{}<", "B".repeat(36))),
            400,
            "invalid_bmi",
        ),
        ("MsgId too long", pacs008(&"B".repeat(36), &ok), 400, "invalid_field"),
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
        ("account with a space", pacs008("B-16", &tx(" 1", "2", "1.00", "EUR")), 400, "invalid_account_id"),
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

/// The independent side: `mx20022-model` 0.3.2's types for head.001.001.04, pacs.008.001.08
/// and pacs.002.001.10, generated from the official XSDs, written and read by quick-xml's serde
/// support. (Its head.001.001.02 module is shipped but not compiled in — `generated/head/mod.rs`
/// declares 04 only — so our head.001.001.02 report header is read with the 04 types: the
/// elements written, `Fr`/`To` `FIId/FinInstnId/Othr/Id`, `BizMsgIdr`, `MsgDefIdr`, `CreDt`, are
/// the same in both.)
mod oracle {
    pub use mx20022_model::common::validate::{IsoMessage, Validatable};
    pub use mx20022_model::common::ChoiceWrapper;
    pub use mx20022_model::generated::head::head_001_001_04 as head;
    pub use mx20022_model::generated::pacs::pacs_002_001_10 as p002;
    pub use mx20022_model::generated::pacs::pacs_008_001_08 as p008;

    /// One payment's fields, as the oracle is given them.
    #[derive(Clone, Debug)]
    pub struct Payment {
        pub bmi: String,
        pub uetr: String,
        pub amount: String,
        pub ccy: String,
        pub debtor: String,
        pub creditor: String,
        pub end_to_end_id: String,
        pub debtor_bic: String,
    }

    fn fi(bic: &str) -> p008::BranchAndFinancialInstitutionIdentification6 {
        p008::BranchAndFinancialInstitutionIdentification6 {
            fin_instn_id: p008::FinancialInstitutionIdentification18 {
                bicfi: Some(p008::BICFIDec2014Identifier(bic.into())),
                clr_sys_mmb_id: None,
                lei: None,
                nm: None,
                pstl_adr: None,
                othr: None,
            },
            brnch_id: None,
        }
    }

    fn account(id: &str) -> p008::CashAccount38 {
        p008::CashAccount38 {
            id: ChoiceWrapper::new(p008::AccountIdentification4Choice::Othr(
                p008::GenericAccountIdentification1 {
                    id: p008::Max34Text(id.into()),
                    schme_nm: None,
                    issr: None,
                },
            )),
            tp: None,
            ccy: None,
            nm: None,
            prxy: None,
        }
    }

    fn party(name: &str) -> p008::PartyIdentification135 {
        p008::PartyIdentification135 {
            nm: Some(p008::Max140Text(name.into())),
            pstl_adr: None,
            id: None,
            ctry_of_res: None,
            ctct_dtls: None,
        }
    }

    fn header(bmi: &str) -> head::BusinessApplicationHeaderV04 {
        let fi = |bic: &str| {
            ChoiceWrapper::new(head::Party51Choice::FIId(
                head::BranchAndFinancialInstitutionIdentification8 {
                    fin_instn_id: head::FinancialInstitutionIdentification23 {
                        bicfi: Some(head::BICFIDec2014Identifier(bic.into())),
                        clr_sys_mmb_id: None,
                        lei: None,
                        nm: None,
                        pstl_adr: None,
                        othr: None,
                    },
                    brnch_id: None,
                },
            ))
        };
        head::BusinessApplicationHeaderV04 {
            char_set: None,
            fr: fi("BANKAAAAXXX"),
            to: fi("RTGSXXXXXXX"),
            biz_msg_idr: head::Max35Text(bmi.into()),
            msg_def_idr: head::Max35Text("pacs.008.001.08".into()),
            biz_svc: None,
            mkt_prctc: None,
            cre_dt: head::ISODateTime("2026-11-30T01:00:00Z".into()),
            biz_prcg_dt: None,
            cpy_dplct: None,
            pssbl_dplct: None,
            prty: None,
            sgntr: None,
            rltd: Vec::new(),
        }
    }

    fn document(p: &Payment) -> p008::Document {
        let tx = p008::CreditTransferTransaction39::builder()
            .pmt_id(p008::PaymentIdentification7 {
                instr_id: None,
                end_to_end_id: p008::Max35Text(p.end_to_end_id.clone()),
                tx_id: None,
                uetr: Some(p008::UUIDv4Identifier(p.uetr.clone())),
                clr_sys_ref: None,
            })
            .intr_bk_sttlm_amt(p008::ActiveCurrencyAndAmount {
                value: p008::ActiveCurrencyAndAmountSimpleType(p.amount.clone()),
                ccy: p008::ActiveCurrencyCode(p.ccy.clone()),
            })
            .chrg_br(p008::ChargeBearerType1Code::Slev)
            .dbtr(party("A & Co <debtor>"))
            .dbtr_acct(account(&p.debtor))
            .dbtr_agt(fi(&p.debtor_bic))
            .cdtr_agt(fi("BANKBBBB"))
            .cdtr(party("B 'creditor'"))
            .cdtr_acct(account(&p.creditor))
            .build();
        let tx = tx.unwrap_or_else(|e| panic!("{e:?}"));
        let grp_hdr = p008::GroupHeader93::builder()
            .msg_id(p008::Max35Text(p.bmi.clone()))
            .cre_dt_tm(p008::ISODateTime("2026-11-30T01:00:00Z".into()))
            .nb_of_txs(p008::Max15NumericText("1".into()))
            .sttlm_inf(
                p008::SettlementInstruction7::builder()
                    .sttlm_mtd(p008::SettlementMethod1Code::Clrg)
                    .build()
                    .unwrap_or_else(|e| panic!("{e:?}")),
            )
            .build()
            .unwrap_or_else(|e| panic!("{e:?}"));
        p008::Document {
            fi_to_fi_cstmr_cdt_trf: p008::FIToFICustomerCreditTransferV08::builder()
                .grp_hdr(grp_hdr)
                .cdt_trf_tx_inf(vec![tx])
                .build()
                .unwrap_or_else(|e| panic!("{e:?}")),
        }
    }

    /// The payment as the oracle writes it: its header and document in an envelope.
    pub fn pacs008(p: &Payment) -> String {
        let document = document(p);
        let violations = document.validate_message();
        assert!(violations.is_empty(), "the oracle's own message breaks the XSD: {violations:?}");
        let header = quick_xml::se::to_string_with_root("AppHdr", &header(&p.bmi));
        let document = quick_xml::se::to_string_with_root("Document", &document);
        let (header, document) = match (header, document) {
            (Ok(h), Ok(d)) => (h, d),
            (h, d) => panic!("the oracle cannot write: {h:?} {d:?}"),
        };
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Envelope>{}{}</Envelope>",
            header.replacen(
                "<AppHdr>",
                "<AppHdr xmlns=\"urn:iso:std:iso:20022:tech:xsd:head.001.001.04\">",
                1
            ),
            document.replacen(
                "<Document>",
                "<Document xmlns=\"urn:iso:std:iso:20022:tech:xsd:pacs.008.001.08\">",
                1
            ),
        )
    }

    /// A report as the oracle reads it.
    #[derive(serde::Deserialize)]
    pub struct Report {
        #[serde(rename = "AppHdr")]
        pub app_hdr: head::BusinessApplicationHeaderV04,
        #[serde(rename = "Document")]
        pub document: p002::Document,
    }
}

fn payment(bmi: &str, amount: &str) -> oracle::Payment {
    oracle::Payment {
        bmi: bmi.into(),
        uetr: "8a562c67-ca16-48ba-b074-65581be6f011".into(),
        amount: amount.into(),
        ccy: "EUR".into(),
        debtor: "1".into(),
        creditor: "2".into(),
        end_to_end_id: "E2E & <1>".into(),
        debtor_bic: "BANKAAAAXXX".into(),
    }
}

/// What the oracle writes is read here as the same payment.
fn assert_read_as_written(p: &oracle::Payment) -> Result<(), String> {
    let xml = oracle::pacs008(p);
    let read = rtgs_api::iso20022::parse_pacs008(xml.as_bytes()).map_err(|e| format!("{e}: {xml}"))?;
    let got = (&read.bmi, &read.amount, &read.currency, &read.debtor_account, &read.creditor_account);
    let want = (&p.bmi, &p.amount, &p.ccy, &p.debtor, &p.creditor);
    if got != want {
        return Err(format!("{got:?} != {want:?}: {xml}"));
    }
    let more =
        (read.uetr.as_ref(), read.end_to_end_id.as_ref(), read.debtor_bic.as_ref(), read.msg_id.as_ref());
    if more != (Some(&p.uetr), Some(&p.end_to_end_id), Some(&p.debtor_bic), Some(&p.bmi)) {
        return Err(format!("{more:?}: {xml}"));
    }
    Ok(())
}

#[test]
fn messages_the_oracle_writes_are_read_as_the_same_payment() {
    for p in [payment("O-1", "12.34"), payment("A&B<C>'D\"", "0.01"), payment("O-3", "9999999999999999.99")] {
        assert_read_as_written(&p).unwrap_or_else(|e| panic!("{e}"));
    }
}

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config { cases: 64, ..Default::default() })]
    #[test]
    fn any_payment_the_oracle_writes_is_read_as_written(
        bmi in "[!-~]{1,35}",
        end_to_end_id in "[ -~\u{e9}\u{20ac}]{1,35}",
        amount in "[0-9]{1,13}(\\.[0-9]{1,5})?",
        ccy in "[A-Z]{3}",
        debtor in "[0-9]{1,19}",
        creditor in "[ -~]{1,34}",
        uetr in proptest::num::u128::ANY,
    ) {
        let u = format!("{uetr:032x}");
        let p = oracle::Payment {
            bmi, end_to_end_id, amount, ccy, debtor, creditor,
            uetr: format!("{}-{}-4{}-a{}-{}", &u[..8], &u[8..12], &u[13..16], &u[17..20], &u[20..32]),
            debtor_bic: "BANKAAAAXXX".into(),
        };
        let checked = assert_read_as_written(&p);
        proptest::prop_assert!(checked.is_ok(), "{:?}", checked);
    }
}

/// Reports written here read there, meet the XSDs' constraints and say what was written.
#[test]
fn our_pacs002_reads_in_the_oracle() {
    use oracle::{head, p002, IsoMessage, Validatable};
    let cases = [
        ("bank-a", "X-1", "ACSP", None, None),
        ("bank-a", "A&B<C>'D\"", "ACCC", None, Some(17)),
        (
            "a-key-id-longer-than-thirty-five-characters",
            &*"B".repeat(35),
            "RJCT",
            Some("AM04"),
            Some(u64::MAX),
        ),
    ];
    for (to, bmi, status, reason, seq) in cases {
        let xml = rtgs_api::iso20022::pacs002(to, bmi, status, reason, seq, 1_796_000_000);
        let report: oracle::Report = quick_xml::de::from_str(&xml).unwrap_or_else(|e| panic!("{e}: {xml}"));
        let violations = report.document.validate_message();
        assert!(violations.is_empty(), "{violations:?}: {xml}");
        let mut violations = Vec::new();
        report.app_hdr.validate_constraints("/AppHdr", &mut violations);
        assert!(violations.is_empty(), "{violations:?}: {xml}");
        let h = &report.app_hdr;
        let r = &report.document.fi_to_fi_pmt_sts_rpt;
        assert_eq!(h.msg_def_idr.0, "pacs.002.001.10");
        assert_eq!(h.biz_msg_idr.0, r.grp_hdr.msg_id.0);
        assert_eq!(h.cre_dt.0, r.grp_hdr.cre_dt_tm.0);
        let head::Party51Choice::FIId(to_fi) = &h.to.inner else { panic!("To is not an FIId: {xml}") };
        let to_id = to_fi.fin_instn_id.othr.as_ref().map(|o| o.id.0.clone()).unwrap_or_default();
        assert!(to_id == to || (to.len() > 35 && to_id.len() == 35), "{to_id}");
        assert_eq!(r.orgnl_grp_inf_and_sts.first().map(|o| o.orgnl_msg_id.0.as_str()), Some(bmi));
        let tx = r.tx_inf_and_sts.first().unwrap_or_else(|| panic!("no TxInfAndSts: {xml}"));
        assert_eq!(tx.tx_sts.as_ref().map(|s| s.0.as_str()), Some(status));
        assert_eq!(tx.clr_sys_ref.as_ref().map(|s| s.0.clone()), seq.map(|s| s.to_string()));
        let code = tx.sts_rsn_inf.first().and_then(|i| i.rsn.as_ref()).map(|r| match &r.inner {
            p002::StatusReason6Choice::Cd(c) => c.0.clone(),
            p002::StatusReason6Choice::Prtry(p) => p.0.clone(),
        });
        assert_eq!(code.as_deref(), reason);
    }
}
