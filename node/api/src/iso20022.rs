//! ISO 20022 in and out: a pacs.008 credit transfer (with its head.001 business application
//! header) read into the fields of a transfer, and a pacs.002 status report (with its own
//! head.001 header) written from a transfer's status.
//!
//! **Versions.** In: an `AppHdr` of [`HEAD_001_NAMESPACES`] with `MsgDefIdr` exactly
//! [`PACS_008_MSG_DEF`], and a `Document` of [`PACS_008_NAMESPACE`]. Out: [`PACS_002_MSG_DEF`]
//! under a [`HEAD_001_OUT_NAMESPACE`] header.
//!
//! **Read as XML says, or refused.** The body is read the way a conforming XML 1.0 reader with
//! namespaces reads it (quick-xml's `NsReader`), and what such a reader would not see as the
//! same document is refused with its own code, never read as another value:
//! * bytes that are not UTF-8, or a declared encoding other than UTF-8 (`xml_not_utf8`);
//! * a `DOCTYPE` (so no DTD, no entity declarations, no entity expansion: `xml_doctype`);
//! * a reference to an entity other than the five predefined ones (`xml_undeclared_entity`), a
//!   character reference that is malformed or names a character XML does not allow
//!   (`xml_invalid_char_ref`). Every other reference is decoded exactly: `&#48;`, `&#x30;` and
//!   `0` are the same text, in element content and in attribute values; CDATA is its text;
//! * a processing instruction other than the XML declaration (`xml_processing_instruction`);
//! * an element or attribute prefix no `xmlns:` declares (`xml_undeclared_prefix`);
//! * anything else that is not well-formed — mismatched or unclosed tags, a second root or text
//!   after the root, duplicate attributes (also two prefixes for one namespace), characters XML
//!   does not allow, malformed names or comments (`malformed_xml`);
//! * more than [`DEPTH_MAX`] levels or [`ELEMENTS_MAX`] elements (`xml_too_large`).
//!
//! **Fields only from their place in the schema.** A body holds the header and the document
//! side by side under one root element of any name (e.g.
//! `<Envelope><AppHdr>…</AppHdr><Document>…</Document></Envelope>`); the root holds nothing else
//! (`unexpected_element`). Every element under `AppHdr` is in the header's namespace and every
//! element under `Document` in pacs.008's (`wrong_namespace`), except inside the schemas' open
//! content (`AppHdr/Sgntr`, `SplmtryData/Envlp`), which is checked for well-formedness only.
//! Read, by exact path: `AppHdr/BizMsgIdr` (the `bmi`), `AppHdr/MsgDefIdr` (must be
//! [`PACS_008_MSG_DEF`]: `unsupported_message`), `FIToFICstmrCdtTrf/GrpHdr/{MsgId,NbOfTxs}`,
//! and in `FIToFICstmrCdtTrf/CdtTrfTxInf`: `PmtId/{EndToEndId,UETR}`, `IntrBkSttlmAmt` and its
//! `Ccy` attribute, `{DbtrAcct,CdtrAcct}/Id/Othr/Id` (the RTGS account number; an `IBAN` there is
//! checked — ISO 13616 — and then refused as unsupported) and
//! `{DbtrAgt,CdtrAgt}/FinInstnId/BICFI` (checked when present). An element of the same name
//! anywhere else is not one of these (an `IntrBkSttlmAmt` nested deeper gives no amount and no
//! currency). Each of these paths at most once (`duplicate_element`); a read element holds text
//! only (`unexpected_element`). `NbOfTxs` must count the `CdtTrfTxInf` elements
//! (`nb_of_txs_mismatch`), and that count must be 1 — batches go through the JSON batch
//! endpoint (`one_transaction_per_message`). `UETR`, when present, is a lowercase UUIDv4 as the
//! schema's pattern says (`invalid_uetr`); `MsgId` and `EndToEndId` are `Max35Text`.
//! Values are taken as written (string types preserve white space, so `" 1"` is not account
//! `1`); only the amount, an `xs:decimal`, has its surrounding white space collapsed away.
//! Attribute values are not white-space-normalized: the one read, `Ccy` (`[A-Z]{3}`), is
//! refused with any white space in it either way.
//! Other ISO elements are allowed and not read. The parser never panics on any input (a fuzz
//! target holds it to that).
//!
//! **What is written.** [`pacs002`]: an envelope with a head.001.001.02 `AppHdr` (from
//! [`REPORT_FROM_ID`] to the participant, `BizMsgIdr` = the report's `GrpHdr/MsgId`,
//! `MsgDefIdr` [`PACS_002_MSG_DEF`], `CreDt`) and the pacs.002.001.10 `Document`: the original
//! message id (the `bmi`), the status (ACSP / ACCC / RJCT), the ISO reason of a rejection and
//! the seq as clearing-system reference. Every identifier is within its `Max35Text`: the
//! report's own id is derived from what it reports ([`report_msg_id`]).
//!
//! **Oracle.** `tests/iso.rs` checks this module against `mx20022-model` 0.3.2, types generated
//! from the official XSDs by another project, (de)serialized by quick-xml's serde support:
//! messages it writes are read here as the same payment, and the reports written here read
//! there. It stays a test dependency: a serde model deserializes leniently (unknown elements,
//! repeated ones and foreign namespaces are not its concern), so it cannot replace the checks
//! above.

use quick_xml::events::{BytesStart, Event};
use quick_xml::name::{QName, ResolveResult};
use quick_xml::NsReader;
use sha2::{Digest, Sha256};

/// The business application header versions read (their elements used here are the same).
pub const HEAD_001_NAMESPACES: &[&str] = &[
    "urn:iso:std:iso:20022:tech:xsd:head.001.001.02",
    "urn:iso:std:iso:20022:tech:xsd:head.001.001.03",
    "urn:iso:std:iso:20022:tech:xsd:head.001.001.04",
];
/// The one pacs.008 version read.
pub const PACS_008_NAMESPACE: &str = "urn:iso:std:iso:20022:tech:xsd:pacs.008.001.08";
/// `AppHdr/MsgDefIdr` of an accepted message, exactly.
pub const PACS_008_MSG_DEF: &str = "pacs.008.001.08";
/// The header version of the reports written.
pub const HEAD_001_OUT_NAMESPACE: &str = "urn:iso:std:iso:20022:tech:xsd:head.001.001.02";
/// The report written.
pub const PACS_002_NAMESPACE: &str = "urn:iso:std:iso:20022:tech:xsd:pacs.002.001.10";
/// `AppHdr/MsgDefIdr` of the reports written.
pub const PACS_002_MSG_DEF: &str = "pacs.002.001.10";
/// `AppHdr/Fr/FIId/FinInstnId/Othr/Id` of the reports written: this system.
pub const REPORT_FROM_ID: &str = "RTGS";

/// Deepest element nesting accepted.
pub const DEPTH_MAX: usize = 32;
/// Most elements in one message.
pub const ELEMENTS_MAX: usize = 2_000;
/// `Max35Text`: ISO 20022 identifiers, in characters.
pub const MAX35: usize = 35;

/// The fields of a pacs.008 this node uses, as text (checked by the same functions as JSON).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pacs008 {
    pub bmi: String,
    pub msg_def: String,
    pub msg_id: Option<String>,
    pub end_to_end_id: Option<String>,
    pub uetr: Option<String>,
    pub amount: String,
    pub currency: String,
    pub debtor_account: String,
    pub creditor_account: String,
    pub debtor_bic: Option<String>,
    pub creditor_bic: Option<String>,
}

/// Why a body is not an acceptable pacs.008; each is a 400 with its own code ([`IsoError::code`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IsoError {
    #[error("not UTF-8: {0}")]
    NotUtf8(String),
    #[error("not well-formed XML: {0}")]
    Malformed(String),
    #[error("document type declarations (DTDs) are not accepted")]
    DocType,
    #[error("processing instructions are not accepted (the XML declaration is)")]
    ProcessingInstruction,
    #[error(
        "entity &{0}; is not declared (only &lt; &gt; &amp; &apos; &quot; and character references are)"
    )]
    UndeclaredEntity(String),
    #[error("invalid character reference: {0}")]
    InvalidCharRef(String),
    #[error("namespace prefix {0:?} is not declared")]
    UndeclaredPrefix(String),
    #[error("more than {DEPTH_MAX} levels or {ELEMENTS_MAX} elements")]
    TooLarge,
    #[error("{element} is in namespace {found:?}; expected {expected}")]
    WrongNamespace { element: String, found: String, expected: String },
    #[error("{0}")]
    UnexpectedElement(String),
    #[error("missing element {0}")]
    Missing(&'static str),
    #[error("element {0} appears more than once")]
    Repeated(&'static str),
    #[error("{0}")]
    Invalid(String),
    #[error("AppHdr/MsgDefIdr {0:?} is not a supported message (only {PACS_008_MSG_DEF})")]
    UnsupportedMessage(String),
    #[error("GrpHdr/NbOfTxs says {declared} but the message holds {found} CdtTrfTxInf")]
    NbOfTxsMismatch { declared: String, found: usize },
    #[error("{0} transactions: exactly one CdtTrfTxInf per message (NbOfTxs 1); use POST /v1/transfers/batch for batches")]
    NotOneTransaction(usize),
    #[error("PmtId/UETR {0:?} is not a lowercase UUIDv4 (xxxxxxxx-xxxx-4xxx-[89ab]xxx-xxxxxxxxxxxx)")]
    InvalidUetr(String),
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
            IsoError::NotUtf8(_) => "xml_not_utf8",
            IsoError::Malformed(_) => "malformed_xml",
            IsoError::DocType => "xml_doctype",
            IsoError::ProcessingInstruction => "xml_processing_instruction",
            IsoError::UndeclaredEntity(_) => "xml_undeclared_entity",
            IsoError::InvalidCharRef(_) => "xml_invalid_char_ref",
            IsoError::UndeclaredPrefix(_) => "xml_undeclared_prefix",
            IsoError::TooLarge => "xml_too_large",
            IsoError::WrongNamespace { .. } => "wrong_namespace",
            IsoError::UnexpectedElement(_) => "unexpected_element",
            IsoError::Missing(_) => "missing_field",
            IsoError::Repeated(_) => "duplicate_element",
            IsoError::Invalid(_) => "invalid_field",
            IsoError::UnsupportedMessage(_) => "unsupported_message",
            IsoError::NbOfTxsMismatch { .. } => "nb_of_txs_mismatch",
            IsoError::NotOneTransaction(_) => "one_transaction_per_message",
            IsoError::InvalidUetr(_) => "invalid_uetr",
            IsoError::InvalidBic(_) => "invalid_bic",
            IsoError::InvalidIban(_) => "invalid_iban",
            IsoError::UnsupportedAccountScheme => "unsupported_account_scheme",
        }
    }
}

/// Where an element is in the schema, as far as this parser reads it.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
enum Node {
    /// The root element, of any name.
    Envelope,
    AppHdr,
    BizMsgIdr,
    MsgDefIdr,
    Document,
    CdtTrf,
    GrpHdr,
    MsgId,
    NbOfTxs,
    Tx,
    PmtId,
    EndToEndId,
    Uetr,
    Amount,
    DbtrAcct,
    DbtrAcctId,
    DbtrOthr,
    DbtrOthrId,
    DbtrIban,
    CdtrAcct,
    CdtrAcctId,
    CdtrOthr,
    CdtrOthrId,
    CdtrIban,
    DbtrAgt,
    DbtrFinInstnId,
    DbtrBic,
    CdtrAgt,
    CdtrFinInstnId,
    CdtrBic,
    /// An ISO element not read (its namespace is still checked).
    Unread,
    /// A `CdtTrfTxInf` after the first: counted, not read.
    LaterTx,
    /// `SplmtryData`: its `Envlp` is open content.
    SplmtryData,
    /// The schemas' `xs:any` (`AppHdr/Sgntr`, `SplmtryData/Envlp`): any namespace.
    Open,
}

const NODES: usize = Node::Open as usize + 1;

/// The elements read, by parent and local name.
const CHILDREN: &[(Node, &str, Node)] = &[
    (Node::AppHdr, "BizMsgIdr", Node::BizMsgIdr),
    (Node::AppHdr, "MsgDefIdr", Node::MsgDefIdr),
    (Node::Document, "FIToFICstmrCdtTrf", Node::CdtTrf),
    (Node::CdtTrf, "GrpHdr", Node::GrpHdr),
    (Node::GrpHdr, "MsgId", Node::MsgId),
    (Node::GrpHdr, "NbOfTxs", Node::NbOfTxs),
    (Node::Tx, "PmtId", Node::PmtId),
    (Node::PmtId, "EndToEndId", Node::EndToEndId),
    (Node::PmtId, "UETR", Node::Uetr),
    (Node::Tx, "IntrBkSttlmAmt", Node::Amount),
    (Node::Tx, "DbtrAcct", Node::DbtrAcct),
    (Node::DbtrAcct, "Id", Node::DbtrAcctId),
    (Node::DbtrAcctId, "Othr", Node::DbtrOthr),
    (Node::DbtrOthr, "Id", Node::DbtrOthrId),
    (Node::DbtrAcctId, "IBAN", Node::DbtrIban),
    (Node::Tx, "CdtrAcct", Node::CdtrAcct),
    (Node::CdtrAcct, "Id", Node::CdtrAcctId),
    (Node::CdtrAcctId, "Othr", Node::CdtrOthr),
    (Node::CdtrOthr, "Id", Node::CdtrOthrId),
    (Node::CdtrAcctId, "IBAN", Node::CdtrIban),
    (Node::Tx, "DbtrAgt", Node::DbtrAgt),
    (Node::DbtrAgt, "FinInstnId", Node::DbtrFinInstnId),
    (Node::DbtrFinInstnId, "BICFI", Node::DbtrBic),
    (Node::Tx, "CdtrAgt", Node::CdtrAgt),
    (Node::CdtrAgt, "FinInstnId", Node::CdtrFinInstnId),
    (Node::CdtrFinInstnId, "BICFI", Node::CdtrBic),
];

impl Node {
    /// The element a `local` child of `self` is (`first_tx`: no `CdtTrfTxInf` seen yet).
    fn child(self, local: &str, first_tx: bool) -> Node {
        match (self, local) {
            (Node::Open, _) | (Node::AppHdr, "Sgntr") | (Node::SplmtryData, "Envlp") => Node::Open,
            (_, "SplmtryData") => Node::SplmtryData,
            (Node::CdtTrf, "CdtTrfTxInf") if first_tx => Node::Tx,
            (Node::CdtTrf, "CdtTrfTxInf") => Node::LaterTx,
            _ => CHILDREN
                .iter()
                .find(|(p, n, _)| *p == self && *n == local)
                .map_or(Node::Unread, |(_, _, c)| *c),
        }
    }

    /// Whether the element's text is read.
    fn is_leaf(self) -> bool {
        matches!(
            self,
            Node::BizMsgIdr
                | Node::MsgDefIdr
                | Node::MsgId
                | Node::NbOfTxs
                | Node::EndToEndId
                | Node::Uetr
                | Node::Amount
                | Node::DbtrOthrId
                | Node::DbtrIban
                | Node::CdtrOthrId
                | Node::CdtrIban
                | Node::DbtrBic
                | Node::CdtrBic
        )
    }

    /// Whether the schema allows the element once at most (all read ones do).
    fn is_single(self) -> bool {
        !matches!(
            self,
            Node::Envelope | Node::Unread | Node::LaterTx | Node::SplmtryData | Node::Open | Node::Tx
        )
    }

    fn name(self) -> &'static str {
        match self {
            Node::Envelope => "the root element",
            Node::AppHdr => "AppHdr",
            Node::BizMsgIdr => "AppHdr/BizMsgIdr",
            Node::MsgDefIdr => "AppHdr/MsgDefIdr",
            Node::Document => "Document",
            Node::CdtTrf => "Document/FIToFICstmrCdtTrf",
            Node::GrpHdr => "GrpHdr",
            Node::MsgId => "GrpHdr/MsgId",
            Node::NbOfTxs => "GrpHdr/NbOfTxs",
            Node::Tx | Node::LaterTx => "CdtTrfTxInf",
            Node::PmtId => "CdtTrfTxInf/PmtId",
            Node::EndToEndId => "PmtId/EndToEndId",
            Node::Uetr => "PmtId/UETR",
            Node::Amount => "CdtTrfTxInf/IntrBkSttlmAmt",
            Node::DbtrAcct => "CdtTrfTxInf/DbtrAcct",
            Node::DbtrAcctId => "DbtrAcct/Id",
            Node::DbtrOthr => "DbtrAcct/Id/Othr",
            Node::DbtrOthrId => "DbtrAcct/Id/Othr/Id",
            Node::DbtrIban => "DbtrAcct/Id/IBAN",
            Node::CdtrAcct => "CdtTrfTxInf/CdtrAcct",
            Node::CdtrAcctId => "CdtrAcct/Id",
            Node::CdtrOthr => "CdtrAcct/Id/Othr",
            Node::CdtrOthrId => "CdtrAcct/Id/Othr/Id",
            Node::CdtrIban => "CdtrAcct/Id/IBAN",
            Node::DbtrAgt => "CdtTrfTxInf/DbtrAgt",
            Node::DbtrFinInstnId => "DbtrAgt/FinInstnId",
            Node::DbtrBic => "DbtrAgt/FinInstnId/BICFI",
            Node::CdtrAgt => "CdtTrfTxInf/CdtrAgt",
            Node::CdtrFinInstnId => "CdtrAgt/FinInstnId",
            Node::CdtrBic => "CdtrAgt/FinInstnId/BICFI",
            Node::Unread | Node::SplmtryData | Node::Open => "an unread element",
        }
    }
}

/// An open element: where it is and the namespace its ISO children must have.
struct Frame {
    node: Node,
    namespace: &'static str,
}

/// What the walk over the events has found so far.
struct Walk {
    stack: Vec<Frame>,
    root_closed: bool,
    events: usize,
    elements: usize,
    transactions: usize,
    seen: [bool; NODES],
    /// The text of the open read element.
    text: String,
    values: [Option<String>; NODES],
    currency: Option<String>,
}

/// Parses a pacs.008 with its business application header (see the module docs).
pub fn parse_pacs008(xml: &[u8]) -> Result<Pacs008, IsoError> {
    let text = checked_text(xml)?;
    let mut reader = NsReader::from_str(text);
    let config = reader.config_mut();
    config.expand_empty_elements = true;
    config.check_end_names = true;
    config.check_comments = true;
    config.allow_unmatched_ends = false;
    config.allow_dangling_amp = false;
    config.trim_text(false);
    let mut walk = Walk {
        stack: Vec::new(),
        root_closed: false,
        events: 0,
        elements: 0,
        transactions: 0,
        seen: [false; NODES],
        text: String::new(),
        values: std::array::from_fn(|_| None),
        currency: None,
    };
    loop {
        let event = reader.read_event().map_err(xml_error)?;
        walk.events += 1;
        match event {
            Event::Start(e) => walk.start(&reader, &e)?,
            Event::End(_) => walk.end(),
            Event::Text(t) => {
                let t = t.xml10_content().map_err(|e| IsoError::NotUtf8(e.to_string()))?;
                walk.character_data(&t, true)?;
            }
            Event::CData(c) => {
                let c = c.xml10_content().map_err(|e| IsoError::NotUtf8(e.to_string()))?;
                walk.character_data(&c, false)?;
            }
            Event::GeneralRef(r) => {
                let name = r.decode().map_err(|e| IsoError::NotUtf8(e.to_string()))?;
                let resolved = resolve_reference(&name)?;
                walk.character_data(&resolved, false)?;
            }
            Event::Decl(d) => check_declaration(&d, walk.events)?,
            Event::PI(_) => return Err(IsoError::ProcessingInstruction),
            Event::DocType(_) => return Err(IsoError::DocType),
            Event::Comment(_) => {}
            Event::Empty(_) => return Err(IsoError::Malformed("unexpected empty-element event".into())),
            Event::Eof => break,
        }
    }
    if !walk.root_closed {
        return Err(IsoError::Malformed(if walk.stack.is_empty() {
            "no root element".into()
        } else {
            "the document ends inside an element".into()
        }));
    }
    walk.finish()
}

impl Walk {
    fn start(&mut self, reader: &NsReader<&[u8]>, e: &BytesStart) -> Result<(), IsoError> {
        self.elements += 1;
        if self.elements > ELEMENTS_MAX || self.stack.len() >= DEPTH_MAX {
            return Err(IsoError::TooLarge);
        }
        if self.root_closed {
            return Err(IsoError::Malformed("an element after the root element".into()));
        }
        let qname = e.name();
        check_qname(qname)?;
        let (resolved, local) = reader.resolve_element(qname);
        let namespace = namespace_of(resolved, qname)?;
        let local = std::str::from_utf8(local.as_ref()).map_err(|e| IsoError::NotUtf8(e.to_string()))?;
        let (node, expected) = match self.stack.last() {
            None => (Node::Envelope, ""),
            Some(parent) if parent.node == Node::Envelope => envelope_child(local, &namespace)?,
            Some(parent) if parent.node.is_leaf() => {
                return Err(IsoError::UnexpectedElement(format!(
                    "{} holds text only, not element {local}",
                    parent.node.name()
                )))
            }
            Some(parent) => {
                let node = parent.node.child(local, self.transactions == 0);
                if parent.node != Node::Open && namespace != parent.namespace {
                    return Err(IsoError::WrongNamespace {
                        element: local.to_string(),
                        found: namespace,
                        expected: parent.namespace.to_string(),
                    });
                }
                (node, parent.namespace)
            }
        };
        if node.is_single() {
            if self.seen[node as usize] {
                return Err(IsoError::Repeated(node.name()));
            }
            self.seen[node as usize] = true;
        }
        if matches!(node, Node::Tx | Node::LaterTx) {
            self.transactions += 1;
        }
        let currency = check_attributes(reader, e, node == Node::Amount)?;
        if node == Node::Amount {
            self.currency = currency;
        }
        self.text.clear();
        self.stack.push(Frame { node, namespace: expected });
        Ok(())
    }

    fn end(&mut self) {
        if let Some(frame) = self.stack.pop() {
            if frame.node.is_leaf() {
                self.values[frame.node as usize] = Some(std::mem::take(&mut self.text));
            }
        }
        if self.stack.is_empty() {
            self.root_closed = true;
        }
    }

    /// Text, CDATA or a resolved reference; `literal`: as written (checked for `]]>`).
    fn character_data(&mut self, text: &str, literal: bool) -> Result<(), IsoError> {
        if literal && text.contains("]]>") {
            return Err(IsoError::Malformed("']]>' in text".into()));
        }
        match self.stack.last() {
            None if literal && text.chars().all(is_xml_space) => Ok(()),
            None => Err(IsoError::Malformed("content outside the root element".into())),
            Some(frame) => {
                if frame.node.is_leaf() {
                    self.text.push_str(text);
                }
                Ok(())
            }
        }
    }

    fn take(&mut self, node: Node) -> Option<String> {
        self.values[node as usize].take()
    }

    /// A read element's text; an empty one is as good as absent.
    fn need(&mut self, node: Node) -> Result<String, IsoError> {
        self.take(node).filter(|v| !v.is_empty()).ok_or(IsoError::Missing(node.name()))
    }

    /// The message, from what the walk found.
    fn finish(mut self) -> Result<Pacs008, IsoError> {
        for node in [Node::AppHdr, Node::Document] {
            if !self.seen[node as usize] {
                return Err(IsoError::Missing(node.name()));
            }
        }
        let bmi = self.need(Node::BizMsgIdr)?;
        let msg_def = self.need(Node::MsgDefIdr)?;
        if msg_def != PACS_008_MSG_DEF {
            return Err(IsoError::UnsupportedMessage(msg_def));
        }
        let msg_id = self.take(Node::MsgId).map(|v| max35(v, Node::MsgId)).transpose()?;
        self.check_transactions()?;
        let end_to_end_id = self.take(Node::EndToEndId).map(|v| max35(v, Node::EndToEndId)).transpose()?;
        let uetr = self.take(Node::Uetr);
        if let Some(u) = &uetr {
            if !is_uuid_v4(u) {
                return Err(IsoError::InvalidUetr(u.clone()));
            }
        }
        let debtor_bic = self.take(Node::DbtrBic);
        let creditor_bic = self.take(Node::CdtrBic);
        for bic in debtor_bic.iter().chain(&creditor_bic) {
            if !is_bic(bic) {
                return Err(IsoError::InvalidBic(bic.clone()));
            }
        }
        for node in [Node::DbtrIban, Node::CdtrIban] {
            if let Some(iban) = self.take(node) {
                return Err(if is_iban(&iban) {
                    IsoError::UnsupportedAccountScheme
                } else {
                    IsoError::InvalidIban(iban)
                });
            }
        }
        // xs:decimal collapses white space; every other value read is a string type (kept as is).
        let amount = self.need(Node::Amount)?.trim_matches(is_xml_space).to_string();
        if amount.is_empty() {
            return Err(IsoError::Missing(Node::Amount.name()));
        }
        Ok(Pacs008 {
            bmi,
            msg_def,
            msg_id,
            end_to_end_id,
            uetr,
            amount,
            currency: self
                .currency
                .take()
                .filter(|c| !c.is_empty())
                .ok_or(IsoError::Missing("CdtTrfTxInf/IntrBkSttlmAmt@Ccy"))?,
            debtor_account: self.need(Node::DbtrOthrId)?,
            creditor_account: self.need(Node::CdtrOthrId)?,
            debtor_bic,
            creditor_bic,
        })
    }

    /// `NbOfTxs` (`Max15NumericText`) counts the transactions, and there is one.
    fn check_transactions(&mut self) -> Result<(), IsoError> {
        if !self.seen[Node::CdtTrf as usize] {
            return Err(IsoError::Missing(Node::CdtTrf.name()));
        }
        let declared = self.need(Node::NbOfTxs)?;
        let numeric =
            !declared.is_empty() && declared.len() <= 15 && declared.bytes().all(|b| b.is_ascii_digit());
        if !numeric {
            return Err(IsoError::Invalid(format!("GrpHdr/NbOfTxs {declared:?} is not 1 to 15 digits")));
        }
        if declared.parse::<usize>().ok() != Some(self.transactions) {
            return Err(IsoError::NbOfTxsMismatch { declared, found: self.transactions });
        }
        match self.transactions {
            0 => Err(IsoError::Missing("CdtTrfTxInf")),
            1 => Ok(()),
            n => Err(IsoError::NotOneTransaction(n)),
        }
    }
}

/// A child of the root: the header or the document, each in a namespace read here.
fn envelope_child(local: &str, namespace: &str) -> Result<(Node, &'static str), IsoError> {
    let wrong = |expected: String| IsoError::WrongNamespace {
        element: local.to_string(),
        found: namespace.to_string(),
        expected,
    };
    match local {
        "AppHdr" => HEAD_001_NAMESPACES
            .iter()
            .find(|n| **n == namespace)
            .map(|n| (Node::AppHdr, *n))
            .ok_or_else(|| wrong(format!("one of {HEAD_001_NAMESPACES:?}"))),
        "Document" if namespace == PACS_008_NAMESPACE => Ok((Node::Document, PACS_008_NAMESPACE)),
        "Document" => Err(wrong(PACS_008_NAMESPACE.to_string())),
        _ => Err(IsoError::UnexpectedElement(format!(
            "the root element holds AppHdr and Document only, not {local}"
        ))),
    }
}

/// The namespace name of an element or attribute (`""` for none), or why it has none.
fn namespace_of(resolved: ResolveResult, qname: QName) -> Result<String, IsoError> {
    let prefix =
        || qname.prefix().map(|p| String::from_utf8_lossy(p.as_ref()).into_owned()).unwrap_or_default();
    match resolved {
        ResolveResult::Unknown(p) => {
            Err(IsoError::UndeclaredPrefix(String::from_utf8_lossy(&p).into_owned()))
        }
        ResolveResult::Bound(ns) if ns.as_ref().is_empty() && qname.prefix().is_some() => {
            Err(IsoError::UndeclaredPrefix(prefix()))
        }
        ResolveResult::Bound(ns) => {
            std::str::from_utf8(ns.as_ref()).map(str::to_string).map_err(|e| IsoError::NotUtf8(e.to_string()))
        }
        ResolveResult::Unbound => Ok(String::new()),
    }
}

/// Every attribute of an element: a well-formed name with a declared prefix, unique by
/// namespace and local name, a value whose references are declared and valid. Returns the
/// unprefixed `Ccy` of a `want_ccy` element.
fn check_attributes(
    reader: &NsReader<&[u8]>,
    e: &BytesStart,
    want_ccy: bool,
) -> Result<Option<String>, IsoError> {
    let mut names: Vec<(String, Vec<u8>)> = Vec::new();
    let mut ccy = None;
    for attribute in e.attributes() {
        let attribute = attribute.map_err(|e| IsoError::Malformed(e.to_string()))?;
        check_qname(attribute.key)?;
        if attribute.value.contains(&b'<') {
            return Err(IsoError::Malformed("'<' in an attribute value".into()));
        }
        let value = attribute.unescape_value().map_err(xml_error)?;
        if let Some(c) = value.chars().find(|c| !is_xml_char(*c)) {
            return Err(IsoError::InvalidCharRef(format!("U+{:04X} is not an XML character", u32::from(c))));
        }
        if attribute.key.as_namespace_binding().is_some() {
            // Namespace names are compared as written; one written with references is refused
            // rather than compared unresolved.
            if attribute.value.contains(&b'&') {
                return Err(IsoError::WrongNamespace {
                    element: String::from_utf8_lossy(e.name().as_ref()).into_owned(),
                    found: value.into_owned(),
                    expected: "a namespace name without references".into(),
                });
            }
            continue;
        }
        let (resolved, local) = reader.resolve_attribute(attribute.key);
        let namespace = namespace_of(resolved, attribute.key)?;
        let local = local.as_ref().to_vec();
        if names.iter().any(|(n, l)| *n == namespace && *l == local) {
            return Err(IsoError::Malformed("an attribute appears twice (by namespace and name)".into()));
        }
        if want_ccy && namespace.is_empty() && local == b"Ccy" {
            ccy = Some(value.into_owned());
        }
        names.push((namespace, local));
    }
    Ok(ccy)
}

/// A general reference's replacement text: a predefined entity or a character reference
/// naming an XML character; anything else is refused.
fn resolve_reference(name: &str) -> Result<String, IsoError> {
    if let Some(number) = name.strip_prefix('#') {
        // XML: '&#' [0-9]+ ';' | '&#x' [0-9a-fA-F]+ ';' — no sign, lowercase x only.
        let (digits, radix) = match number.strip_prefix('x') {
            Some(hex) => (hex, 16),
            None => (number, 10),
        };
        let invalid = || IsoError::InvalidCharRef(format!("&{name};"));
        if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
            return Err(invalid());
        }
        let code = u32::from_str_radix(digits, radix).map_err(|_| invalid())?;
        return match char::from_u32(code) {
            Some(c) if is_xml_char(c) => Ok(c.to_string()),
            _ => Err(invalid()),
        };
    }
    if !is_name(name, false) {
        return Err(IsoError::Malformed(format!("&{name}; is not a reference")));
    }
    quick_xml::escape::resolve_predefined_entity(name)
        .map(str::to_string)
        .ok_or_else(|| IsoError::UndeclaredEntity(name.to_string()))
}

/// The XML declaration: first, version 1.0, and UTF-8 if it names an encoding.
fn check_declaration(d: &quick_xml::events::BytesDecl, events: usize) -> Result<(), IsoError> {
    if events != 1 {
        return Err(IsoError::Malformed("the XML declaration is not at the start".into()));
    }
    let version = d.version().map_err(xml_error)?;
    if version.as_ref() != b"1.0" {
        return Err(IsoError::Malformed(format!(
            "XML version {:?}: only 1.0",
            String::from_utf8_lossy(&version)
        )));
    }
    if let Some(encoding) = d.encoding() {
        let encoding = encoding.map_err(|e| IsoError::Malformed(e.to_string()))?;
        if !encoding.eq_ignore_ascii_case(b"UTF-8") {
            return Err(IsoError::NotUtf8(format!(
                "declared encoding {:?}: only UTF-8",
                String::from_utf8_lossy(&encoding)
            )));
        }
    }
    Ok(())
}

/// The body as text: UTF-8 (a UTF-8 byte order mark is dropped) of XML characters only.
fn checked_text(xml: &[u8]) -> Result<&str, IsoError> {
    let xml = xml.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(xml);
    let text = std::str::from_utf8(xml)
        .map_err(|e| IsoError::NotUtf8(format!("invalid UTF-8 at byte {}", e.valid_up_to())))?;
    if let Some((at, c)) = text.char_indices().find(|(_, c)| !is_xml_char(*c)) {
        return Err(IsoError::Malformed(format!(
            "U+{:04X} at byte {at} is not an XML character",
            u32::from(c)
        )));
    }
    Ok(text)
}

fn xml_error(e: quick_xml::Error) -> IsoError {
    use quick_xml::escape::EscapeError;
    match e {
        quick_xml::Error::Escape(EscapeError::UnrecognizedEntity(_, name)) => {
            IsoError::UndeclaredEntity(name)
        }
        quick_xml::Error::Escape(EscapeError::InvalidCharRef(e)) => IsoError::InvalidCharRef(e.to_string()),
        quick_xml::Error::Namespace(quick_xml::name::NamespaceError::UnknownPrefix(p)) => {
            IsoError::UndeclaredPrefix(String::from_utf8_lossy(&p).into_owned())
        }
        quick_xml::Error::Encoding(e) => IsoError::NotUtf8(e.to_string()),
        e => IsoError::Malformed(e.to_string()),
    }
}

/// XML 1.0 `Char`.
fn is_xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..='\u{10FFFF}')
}

/// XML 1.0 `S`.
fn is_xml_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r')
}

/// XML 1.0 `NameStartChar` (`colon`: whether ':' counts).
fn is_name_start(c: char, colon: bool) -> bool {
    matches!(c,
        'A'..='Z' | '_' | 'a'..='z' | '\u{C0}'..='\u{D6}' | '\u{D8}'..='\u{F6}' | '\u{F8}'..='\u{2FF}'
        | '\u{370}'..='\u{37D}' | '\u{37F}'..='\u{1FFF}' | '\u{200C}'..='\u{200D}' | '\u{2070}'..='\u{218F}'
        | '\u{2C00}'..='\u{2FEF}' | '\u{3001}'..='\u{D7FF}' | '\u{F900}'..='\u{FDCF}' | '\u{FDF0}'..='\u{FFFD}'
        | '\u{10000}'..='\u{EFFFF}')
        || (colon && c == ':')
}

/// XML 1.0 `Name` (`colon`: whether ':' counts, as in `Name`; not, as in `NCName`).
fn is_name(s: &str, colon: bool) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| is_name_start(c, colon)) && chars.all(|c| {
        is_name_start(c, colon)
            || matches!(c, '-' | '.' | '0'..='9' | '\u{B7}' | '\u{300}'..='\u{36F}' | '\u{203F}'..='\u{2040}')
    })
}

/// Namespaces in XML `QName`: `NCName (':' NCName)?`.
fn check_qname(qname: QName) -> Result<(), IsoError> {
    let text = std::str::from_utf8(qname.as_ref()).map_err(|e| IsoError::NotUtf8(e.to_string()))?;
    let ok = match text.split_once(':') {
        Some((prefix, local)) => is_name(prefix, false) && is_name(local, false),
        None => is_name(text, false),
    };
    if ok {
        Ok(())
    } else {
        Err(IsoError::Malformed(format!("{text:?} is not a qualified name")))
    }
}

/// `Max35Text`: 1 to 35 characters.
fn max35(value: String, node: Node) -> Result<String, IsoError> {
    let chars = value.chars().count();
    if (1..=MAX35).contains(&chars) {
        Ok(value)
    } else {
        Err(IsoError::Invalid(format!("{} is {chars} characters; Max35Text is 1 to 35", node.name())))
    }
}

/// The schema's `UUIDv4Identifier`: `[a-f0-9]{8}-[a-f0-9]{4}-4[a-f0-9]{3}-[89ab][a-f0-9]{3}-[a-f0-9]{12}`.
pub fn is_uuid_v4(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, &c)| match i {
            8 | 13 | 18 | 23 => c == b'-',
            14 => c == b'4',
            19 => matches!(c, b'8' | b'9' | b'a' | b'b'),
            _ => c.is_ascii_digit() || (b'a'..=b'f').contains(&c),
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

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A `Max35Text` naming `text`: itself when it fits, else `prefix` and a digest of it — the
/// same text always gives the same id.
fn within35(prefix: &str, text: &str) -> String {
    if !text.is_empty() && text.chars().count() <= MAX35 {
        return text.to_string();
    }
    let digest = hex_of(&Sha256::digest(text.as_bytes()));
    format!("{prefix}{}", &digest[..MAX35 - prefix.len()])
}

/// The `GrpHdr/MsgId` (and `AppHdr/BizMsgIdr`) of a report: `STATUS-` and 30 hex digits of a
/// digest of everything it reports (recipient, `bmi`, status, reason, seq), so the same report
/// always has the same id, and two different reports different ones. 35 characters.
pub fn report_msg_id(to: &str, bmi: &str, status: &str, reason: Option<&str>, seq: Option<u64>) -> String {
    let mut hash = Sha256::new();
    for part in [Some(to), Some(bmi), Some(status), reason] {
        // Length-prefixed, so no two lists of parts hash the same bytes; u64::MAX: absent.
        hash.update(part.map_or(u64::MAX, |p| p.len() as u64).to_be_bytes());
        hash.update(part.unwrap_or("").as_bytes());
    }
    hash.update(seq.map_or([0xff; 9], |s| {
        let mut b = [0; 9];
        b[1..].copy_from_slice(&s.to_be_bytes());
        b
    }));
    let digest = hex_of(&hash.finalize());
    let status: String = status.chars().filter(char::is_ascii_alphanumeric).take(4).collect();
    format!("{status:X<4}-{}", &digest[..MAX35 - 5])
}

/// A pacs.002 status report for one transfer, to participant `to` (its key id), with its
/// head.001 header (see the module docs).
pub fn pacs002(
    to: &str,
    bmi: &str,
    status: &str,
    reason: Option<&str>,
    seq: Option<u64>,
    now_s: u64,
) -> String {
    let created = rfc3339(now_s);
    let msg_id = report_msg_id(to, bmi, status, reason, seq);
    let to = escape(&within35("K-", to));
    let bmi = escape(bmi);
    let status = escape(status);
    let reason =
        reason.map_or(String::new(), |r| format!("<StsRsnInf><Rsn><Cd>{}</Cd></Rsn></StsRsnInf>", escape(r)));
    let seq = seq.map_or(String::new(), |s| format!("<ClrSysRef>{s}</ClrSysRef>"));
    let party = |id: &str| format!("<FIId><FinInstnId><Othr><Id>{id}</Id></Othr></FinInstnId></FIId>");
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <Envelope>\
         <AppHdr xmlns=\"{HEAD_001_OUT_NAMESPACE}\"><Fr>{from}</Fr><To>{to}</To>\
         <BizMsgIdr>{msg_id}</BizMsgIdr><MsgDefIdr>{PACS_002_MSG_DEF}</MsgDefIdr><CreDt>{created}</CreDt></AppHdr>\
         <Document xmlns=\"{PACS_002_NAMESPACE}\"><FIToFIPmtStsRpt>\
         <GrpHdr><MsgId>{msg_id}</MsgId><CreDtTm>{created}</CreDtTm></GrpHdr>\
         <OrgnlGrpInfAndSts><OrgnlMsgId>{bmi}</OrgnlMsgId><OrgnlMsgNmId>{PACS_008_MSG_DEF}</OrgnlMsgNmId></OrgnlGrpInfAndSts>\
         <TxInfAndSts><OrgnlTxId>{bmi}</OrgnlTxId><TxSts>{status}</TxSts>{reason}{seq}</TxInfAndSts>\
         </FIToFIPmtStsRpt></Document>\
         </Envelope>\n",
        from = party(REPORT_FROM_ID),
        to = party(&to),
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

    pub const TX: &str = r#"<PmtId><EndToEndId>E2E-1</EndToEndId>
        <UETR>8a562c67-ca16-48ba-b074-65581be6f011</UETR></PmtId>
        <IntrBkSttlmAmt Ccy="EUR">12.34</IntrBkSttlmAmt><ChrgBr>SLEV</ChrgBr>
        <Dbtr><Nm>A</Nm></Dbtr><DbtrAcct><Id><Othr><Id>1</Id></Othr></Id></DbtrAcct>
        <DbtrAgt><FinInstnId><BICFI>BANKAAAAXXX</BICFI></FinInstnId></DbtrAgt>
        <CdtrAgt><FinInstnId><BICFI>BANKBBBB</BICFI></FinInstnId></CdtrAgt>
        <Cdtr><Nm>B</Nm></Cdtr><CdtrAcct><Id><Othr><Id>2</Id></Othr></Id></CdtrAcct>"#;

    fn parsed(xml: &str) -> Pacs008 {
        parse_pacs008(xml.as_bytes()).unwrap_or_else(|e| panic!("{e}: {xml}"))
    }

    /// The code a body is refused with (`None`: accepted).
    fn code(xml: &str) -> Option<&'static str> {
        parse_pacs008(xml.as_bytes()).err().map(|e| e.code())
    }

    /// The standard message with `from` replaced by `to` (which must be there).
    fn with(from: &str, to: &str) -> String {
        let plain = message("M-1", TX);
        assert!(plain.contains(from), "{from:?} is not in the message");
        plain.replacen(from, to, 1)
    }

    #[test]
    fn reads_the_fields_it_uses() {
        let p = parsed(&message("M-1", TX));
        assert_eq!((p.bmi.as_str(), p.amount.as_str(), p.currency.as_str()), ("M-1", "12.34", "EUR"));
        assert_eq!((p.debtor_account.as_str(), p.creditor_account.as_str()), ("1", "2"));
        assert_eq!(p.creditor_bic.as_deref(), Some("BANKBBBB"));
        assert_eq!(p.end_to_end_id.as_deref(), Some("E2E-1"));
        assert_eq!(p.uetr.as_deref(), Some("8a562c67-ca16-48ba-b074-65581be6f011"));
        assert_eq!((p.msg_def.as_str(), p.msg_id.as_deref()), ("pacs.008.001.08", Some("M-1")));
        // Every header version named is read, with prefixes or without.
        for ns in HEAD_001_NAMESPACES {
            let p = parsed(&with("head.001.001.02", &ns[ns.len() - 15..]));
            assert_eq!(p.bmi, "M-1");
        }
        let prefixed = message("M-1", TX)
            .replace("<AppHdr xmlns=", "<h:AppHdr xmlns:h=")
            .replace("</AppHdr>", "</h:AppHdr>")
            .replace("<BizMsgIdr>M-1</BizMsgIdr>", "<h:BizMsgIdr>M-2</h:BizMsgIdr>")
            .replace("<MsgDefIdr>pacs.008.001.08</MsgDefIdr>", "<h:MsgDefIdr>pacs.008.001.08</h:MsgDefIdr>")
            .replace("<Fr>", "<h:Fr>")
            .replace("</Fr>", "</h:Fr>")
            .replace("<To>", "<h:To>")
            .replace("</To>", "</h:To>")
            .replace("<CreDt>", "<h:CreDt>")
            .replace("</CreDt>", "</h:CreDt>")
            .replace("<FIId><FinInstnId><BICFI>", "<h:FIId><h:FinInstnId><h:BICFI>")
            .replace("</BICFI></FinInstnId></FIId>", "</h:BICFI></h:FinInstnId></h:FIId>");
        assert_eq!(parsed(&prefixed).bmi, "M-2");
    }

    #[test]
    fn refuses_what_it_cannot_use() {
        let tx = |from: &str, to: &str| code(&message("M-2", &TX.replacen(from, to, 1)));
        assert_eq!(tx("BANKBBBB", "bank-b"), Some("invalid_bic"));
        assert_eq!(tx(r#" Ccy="EUR""#, ""), Some("missing_field"));
        let iban = |i: &str| tx("<Othr><Id>1</Id></Othr>", &format!("<IBAN>{i}</IBAN>"));
        assert_eq!(iban("DE89370400440532013000"), Some("unsupported_account_scheme"));
        assert_eq!(iban("DE00370400440532013000"), Some("invalid_iban"));
        assert_eq!(tx("<Id>2</Id>", "<Id>2</Id><Id>3</Id>"), Some("duplicate_element"));
        assert_eq!(tx("<Id>2</Id>", ""), Some("missing_field"));
        assert_eq!(tx("<Id>2</Id>", "<Id>2<b/></Id>"), Some("unexpected_element"));
        assert_eq!(tx("E2E-1", &"E".repeat(36)), Some("invalid_field"));
        assert_eq!(code(""), Some("malformed_xml"));
        assert_eq!(code("<a/>"), Some("missing_field"));
        assert_eq!(code(&message("", TX)), Some("missing_field"));
        assert_eq!(code(&with("<BizMsgIdr>M-1</BizMsgIdr>", "")), Some("missing_field"));
        assert_eq!(
            code(&with("<MsgId>M-1</MsgId>", &format!("<MsgId>{}</MsgId>", "M".repeat(36)))),
            Some("invalid_field")
        );
    }

    #[test]
    fn the_fuzz_seed_is_a_message_and_blank_fields_are_missing() {
        let seed = parsed(include_str!("../../../fuzz/seeds/pacs008/valid.xml"));
        assert_eq!(
            (seed.bmi.as_str(), seed.amount.as_str(), seed.currency.as_str()),
            ("M-1", "12.34", "EUR")
        );
        assert_eq!(code(&with(r#"Ccy="EUR""#, r#"Ccy="""#)), Some("missing_field"));
        assert_eq!(code(&with(">12.34<", "> <")), Some("missing_field"));
        assert_eq!(code(&with("<Id>2</Id>", "<Id></Id>")), Some("missing_field"));
    }

    #[test]
    fn ibans_bics_and_uetrs_follow_their_standards() {
        assert!(is_iban("DE89370400440532013000") && is_iban("GB82WEST12345698765432"));
        assert!(!is_iban("DE89370400440532013001") && !is_iban("de89370400440532013000") && !is_iban("DE8"));
        assert!(is_bic("DEUTDEFF") && is_bic("DEUTDEFF500") && !is_bic("DEUTDEF") && !is_bic("1EUTDEFF"));
        assert!(is_uuid_v4("8a562c67-ca16-48ba-b074-65581be6f011"));
        for bad in [
            "8A562C67-CA16-48BA-B074-65581BE6F011", // uppercase: the schema's pattern is lowercase
            "8a562c67-ca16-18ba-b074-65581be6f011", // version 1
            "8a562c67-ca16-48ba-c074-65581be6f011", // not the RFC 4122 variant
            "{8a562c67-ca16-48ba-b074-65581be6f011}",
            "8a562c67ca1648bab07465581be6f011",
            "8a562c67-ca16-48ba-b074-65581be6f01g",
            "",
        ] {
            assert!(!is_uuid_v4(bad), "{bad}");
        }
    }

    /// Every field class (header text, group header text, transaction text, account ids, BICs,
    /// the amount and the `Ccy` attribute) through character references, predefined entities,
    /// CDATA and comments: the same payment as written plainly.
    #[test]
    fn references_in_every_field_class_are_decoded_exactly() {
        let f = Fields::standard();
        let plain = parsed(&f.render(&|s| literal(s, false), &|s| literal(s, true)));
        assert_eq!((plain.bmi.as_str(), plain.amount.as_str()), ("A&B<C>'D\"", "12.34"));
        let renderings: [(&str, Render, Render); 4] =
            [
                ("decimal", Box::new(|s| refs(s, 10)), Box::new(|s| refs(s, 10))),
                ("hex", Box::new(|s| refs(s, 16)), Box::new(|s| refs(s, 16))),
                ("cdata", Box::new(|s| format!("<![CDATA[{s}]]>")), Box::new(|s| literal(s, true))),
                (
                    "split",
                    Box::new(|s| {
                        s.chars().map(|c| format!("{}<!-- c -->", literal(&c.to_string(), false))).collect()
                    }),
                    Box::new(|s| {
                        s.chars()
                            .map(|c| {
                                if c.is_ascii_alphabetic() {
                                    c.to_string()
                                } else {
                                    refs(&c.to_string(), 10)
                                }
                            })
                            .collect()
                    }),
                ),
            ];
        for (name, text, attr) in &renderings {
            let xml = f.render(text.as_ref(), attr.as_ref());
            assert_eq!(parsed(&xml), plain, "{name}: {xml}");
        }
        // A reference never vanishes: `1&#48;0` is 100, not 10.
        assert_eq!(parsed(&with(">12.34<", ">1&#48;0<")).amount, "100");
        assert_eq!(parsed(&with("<Id>2</Id>", "<Id>2&#x30;</Id>")).creditor_account, "20");
        assert_eq!(parsed(&with(r#"Ccy="EUR""#, r#"Ccy="E&#85;R""#)).currency, "EUR");
    }

    #[test]
    fn references_xml_refuses_are_refused() {
        for bad in [
            "&#0;",
            "&#1;",
            "&#x1F;",
            "&#xFFFE;",
            "&#xD800;",
            "&#X30;",
            "&#+48;",
            "&#-1;",
            "&#x;",
            "&#;",
            "&#1a;",
            "&#99999999999;",
            "&#x110000;",
        ] {
            assert_eq!(
                code(&with(">12.34<", &format!(">12{bad}34<"))),
                Some("xml_invalid_char_ref"),
                "text {bad}"
            );
            let in_attr = with(r#"Ccy="EUR""#, &format!(r#"Ccy="EU{bad}""#));
            assert!(
                matches!(code(&in_attr), Some("xml_invalid_char_ref" | "malformed_xml")),
                "attribute {bad}"
            );
        }
        // A lone '&' is not a reference at all.
        assert_eq!(code(&with(">12.34<", ">12 & 34<")), Some("malformed_xml"));
    }

    #[test]
    fn undeclared_entities_are_refused() {
        for entity in ["&nbsp;", "&x;", "&AMP;", "&eacute;"] {
            assert_eq!(
                code(&with("<Id>1</Id>", &format!("<Id>1{entity}</Id>"))),
                Some("xml_undeclared_entity")
            );
            let in_attr = with(r#"Ccy="EUR""#, &format!(r#"Ccy="EUR{entity}""#));
            assert_eq!(code(&in_attr), Some("xml_undeclared_entity"), "{entity}");
            // Also where nothing is read: a conforming reader refuses the whole document.
            assert_eq!(
                code(&with("<Nm>A</Nm>", &format!("<Nm>A{entity}</Nm>"))),
                Some("xml_undeclared_entity")
            );
        }
    }

    #[test]
    fn dtds_are_refused_before_anything_is_expanded() {
        let laughs = r#"<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]><lolz>&lol3;</lolz>"#;
        assert_eq!(code(laughs), Some("xml_doctype"));
        let external = with("<Envelope>", "<!DOCTYPE Envelope SYSTEM \"file:///etc/passwd\"><Envelope>");
        assert_eq!(code(&external), Some("xml_doctype"));
        let internal = with("<Envelope>", "<!DOCTYPE Envelope [<!ENTITY amt \"99.99\">]><Envelope>");
        assert_eq!(code(&internal.replace(">12.34<", ">&amt;<")), Some("xml_doctype"));
    }

    #[test]
    fn only_utf8_is_read() {
        let mut latin1 = message("M-1", TX).into_bytes();
        let at = latin1.windows(3).position(|w| w == b"<Nm").unwrap_or(0) + 4;
        latin1.insert(at, 0xE9);
        assert_eq!(parse_pacs008(&latin1).err().map(|e| e.code()), Some("xml_not_utf8"));
        let utf16: Vec<u8> = std::iter::once([0xFF, 0xFE])
            .chain(message("M-1", TX).encode_utf16().map(u16::to_le_bytes))
            .flatten()
            .collect();
        assert_eq!(parse_pacs008(&utf16).err().map(|e| e.code()), Some("xml_not_utf8"));
        assert_eq!(code(&with("UTF-8", "ISO-8859-1")), Some("xml_not_utf8"));
        assert_eq!(code(&with("UTF-8", "utf-8")), None);
        // A byte order mark is no content.
        let bom = [b"\xEF\xBB\xBF".as_slice(), message("M-1", TX).as_bytes()].concat();
        assert_eq!(parse_pacs008(&bom).map(|p| p.bmi), Ok("M-1".to_string()));
    }

    #[test]
    fn undeclared_prefixes_are_refused() {
        assert_eq!(
            code(&with("<GrpHdr>", "<x:GrpHdr>").replacen("</GrpHdr>", "</x:GrpHdr>", 1)),
            Some("xml_undeclared_prefix")
        );
        assert_eq!(code(&with(r#"Ccy="EUR""#, r#"Ccy="EUR" y:Ccy="USD""#)), Some("xml_undeclared_prefix"));
        assert_eq!(
            code(&with("<Envelope>", "<e:Envelope>").replace("</Envelope>", "</e:Envelope>")),
            Some("xml_undeclared_prefix")
        );
        assert_eq!(code(&with("<Nm>A</Nm>", "<q:Nm>A</q:Nm>")), Some("xml_undeclared_prefix"));
    }

    #[test]
    fn only_one_well_formed_document_is_read() {
        let plain = message("M-1", TX);
        for (name, xml) in [
            ("second root", format!("{plain}<Envelope/>")),
            ("text after the root", format!("{plain}x")),
            ("reference after the root", format!("{plain}&#48;")),
            ("CDATA after the root", format!("{plain}<![CDATA[x]]>")),
            ("text before the root", format!("x{plain}")),
            ("unclosed", plain.replace("</Envelope>", "")),
            ("mismatched", plain.replacen("</GrpHdr>", "</GrpHdrX>", 1)),
            ("stray end", plain.replacen("</GrpHdr>", "</GrpHdr></Foo>", 1)),
            ("duplicate attribute", plain.replacen(r#"Ccy="EUR""#, r#"Ccy="EUR" Ccy="USD""#, 1)),
            (
                "one attribute by two prefixes",
                plain.replacen(
                    r#"Ccy="EUR""#,
                    r#"xmlns:a="urn:x" xmlns:b="urn:x" a:n="1" b:n="2" Ccy="EUR""#,
                    1,
                ),
            ),
            ("'<' in an attribute", plain.replacen(r#"Ccy="EUR""#, r#"Ccy="E<R""#, 1)),
            ("raw control character", plain.replacen("<Nm>A</Nm>", "<Nm>A\u{1}</Nm>", 1)),
            ("bad comment", plain.replacen("<Nm>A</Nm>", "<Nm>A<!-- a--b --></Nm>", 1)),
            ("]]> in text", plain.replacen("<Nm>A</Nm>", "<Nm>A]]></Nm>", 1)),
            ("bad name", plain.replacen("<Nm>A</Nm>", "<1Nm>A</1Nm>", 1)),
            ("declaration not first", format!(" {plain}")),
            ("XML 1.1", plain.replacen("version=\"1.0\"", "version=\"1.1\"", 1)),
        ] {
            assert_eq!(code(&xml), Some("malformed_xml"), "{name}");
        }
        let pi = plain.replacen("<Envelope>", "<Envelope><?evil x?>", 1);
        assert_eq!(code(&pi), Some("xml_processing_instruction"));
        let deep = format!("<Nm>A</Nm>{}{}", "<x>".repeat(DEPTH_MAX), "</x>".repeat(DEPTH_MAX));
        assert_eq!(code(&with("<Nm>A</Nm>", &deep)), Some("xml_too_large"));
        let many = format!("<Nm>A</Nm>{}", "<x/>".repeat(ELEMENTS_MAX));
        assert_eq!(code(&with("<Nm>A</Nm>", &many)), Some("xml_too_large"));
        // Comments and white space around the root are part of a document.
        assert_eq!(code(&format!("{plain}\n<!-- end -->\n")), None);
    }

    #[test]
    fn namespaces_are_checked() {
        assert_eq!(code(&with("head.001.001.02", "head.001.001.01")), Some("wrong_namespace"));
        assert_eq!(code(&with("pacs.008.001.08\"", "pacs.008.001.09\"")), Some("wrong_namespace"));
        assert_eq!(
            code(&with(r#" xmlns="urn:iso:std:iso:20022:tech:xsd:pacs.008.001.08""#, "")),
            Some("wrong_namespace")
        );
        // An element of another namespace where an ISO one is read.
        let foreign = with(
            "<IntrBkSttlmAmt Ccy=\"EUR\">12.34</IntrBkSttlmAmt>",
            r#"<f:IntrBkSttlmAmt xmlns:f="urn:x" Ccy="EUR">12.34</f:IntrBkSttlmAmt>"#,
        );
        assert_eq!(code(&foreign), Some("wrong_namespace"));
        // A namespace name written with references is not compared unresolved.
        assert_eq!(code(&with("pacs.008.001.08\"", "pacs.008.001.0&#56;\"")), Some("wrong_namespace"));
        // The root holds the header and the document only.
        assert_eq!(code(&with("</Envelope>", "<Extra/></Envelope>")), Some("unexpected_element"));
        // Open content (xs:any) may be in any namespace, and is not read.
        let open = with(
            "<Cdtr><Nm>B</Nm></Cdtr>",
            r#"<Cdtr><Nm>B</Nm></Cdtr><SplmtryData><Envlp><x:IntrBkSttlmAmt xmlns:x="urn:x" Ccy="USD">9</x:IntrBkSttlmAmt></Envlp></SplmtryData>"#,
        );
        assert_eq!(parsed(&open).currency, "EUR");
    }

    #[test]
    fn only_the_supported_message_is_read() {
        for bad in [
            "pacs.008.001.08x",
            "pacs.008",
            "pacs.008.001.09",
            " pacs.008.001.08",
            "pacs.008.001.8",
            "PACS.008.001.08",
        ] {
            let xml =
                with("<MsgDefIdr>pacs.008.001.08</MsgDefIdr>", &format!("<MsgDefIdr>{bad}</MsgDefIdr>"));
            assert_eq!(code(&xml), Some("unsupported_message"), "{bad}");
        }
        // With references, it is the same id.
        assert_eq!(code(&with(">pacs.008.001.08<", ">pacs&#46;008.001.08<")), None);
    }

    #[test]
    fn nb_of_txs_counts_the_transactions() {
        let nb = |n: &str, txs: usize| {
            let body = vec![TX; txs].join("</CdtTrfTxInf><CdtTrfTxInf>");
            code(&message("M-1", &body).replacen(
                "<NbOfTxs>1</NbOfTxs>",
                &format!("<NbOfTxs>{n}</NbOfTxs>"),
                1,
            ))
        };
        assert_eq!(nb("1", 1), None);
        assert_eq!(nb("2", 1), Some("nb_of_txs_mismatch"));
        assert_eq!(nb("1", 2), Some("nb_of_txs_mismatch"));
        assert_eq!(nb("0", 1), Some("nb_of_txs_mismatch"));
        assert_eq!(nb("2", 2), Some("one_transaction_per_message"));
        assert_eq!(nb("1 ", 1), Some("invalid_field"));
        assert_eq!(nb("+1", 1), Some("invalid_field"));
        assert_eq!(nb("1234567890123456", 1), Some("invalid_field"));
        assert_eq!(nb("", 1), Some("missing_field"));
        assert_eq!(code(&with("<NbOfTxs>1</NbOfTxs>", "")), Some("missing_field"));
        assert_eq!(nb("&#49;", 1), None);
    }

    #[test]
    fn the_currency_comes_from_its_place_only() {
        let nested = r#"<RmtInf><Strd><RfrdDocAmt><DuePyblAmt Ccy="USD">1</DuePyblAmt></RfrdDocAmt></Strd></RmtInf>
            <SplmtryData><Envlp><IntrBkSttlmAmt Ccy="USD">9</IntrBkSttlmAmt></Envlp></SplmtryData>"#;
        let tx = format!("{}{nested}", TX);
        assert_eq!(parsed(&message("M-1", &tx)).currency, "EUR");
        assert_eq!(code(&message("M-1", &tx.replacen(r#" Ccy="EUR""#, "", 1))), Some("missing_field"));
        // An amount element nested deeper in the transaction is not the amount.
        let deeper = TX.replacen(
            r#"<IntrBkSttlmAmt Ccy="EUR">12.34</IntrBkSttlmAmt>"#,
            r#"<InstdAmt><IntrBkSttlmAmt Ccy="USD">99</IntrBkSttlmAmt></InstdAmt>"#,
            1,
        );
        assert_eq!(code(&message("M-1", &deeper)), Some("missing_field"));
        // A prefixed Ccy is another attribute; the group's total is another element.
        let prefixed = with(r#"Ccy="EUR""#, r#"xmlns:p="urn:x" p:Ccy="EUR""#);
        assert_eq!(code(&prefixed), Some("missing_field"));
        let total = with("<NbOfTxs>", r#"<TtlIntrBkSttlmAmt Ccy="USD">12.34</TtlIntrBkSttlmAmt><NbOfTxs>"#);
        assert_eq!(parsed(&total).currency, "EUR");
    }

    #[test]
    fn a_uetr_is_a_lowercase_uuid_v4() {
        let uetr = "8a562c67-ca16-48ba-b074-65581be6f011";
        for bad in [uetr.to_uppercase(), uetr.replacen("-48ba-", "-18ba-", 1), format!(" {uetr}"), "x".into()]
        {
            assert_eq!(code(&with(uetr, &bad)), Some("invalid_uetr"), "{bad}");
        }
        assert_eq!(parsed(&with(&format!("<UETR>{uetr}</UETR>"), "")).uetr, None);
    }

    #[test]
    fn read_fields_appear_once() {
        let amount = r#"<IntrBkSttlmAmt Ccy="EUR">12.34</IntrBkSttlmAmt>"#;
        let twice = |what: &str| code(&with(what, &format!("{what}{what}")));
        assert_eq!(twice(amount), Some("duplicate_element"));
        assert_eq!(
            code(&with(amount, &format!("{amount}<IntrBkSttlmAmt Ccy=\"EUR\">99</IntrBkSttlmAmt>"))),
            Some("duplicate_element")
        );
        assert_eq!(twice("<BizMsgIdr>M-1</BizMsgIdr>"), Some("duplicate_element"));
        assert_eq!(twice("<NbOfTxs>1</NbOfTxs>"), Some("duplicate_element"));
        assert_eq!(twice("<EndToEndId>E2E-1</EndToEndId>"), Some("duplicate_element"));
        assert_eq!(
            code(&with("</PmtId>", "</PmtId><PmtId><TxId>T</TxId></PmtId>")),
            Some("duplicate_element")
        );
        assert_eq!(twice("<CdtrAcct><Id><Othr><Id>2</Id></Othr></Id></CdtrAcct>"), Some("duplicate_element"));
        assert_eq!(
            twice("<DbtrAgt><FinInstnId><BICFI>BANKAAAAXXX</BICFI></FinInstnId></DbtrAgt>"),
            Some("duplicate_element")
        );
        let header = message("M-1", TX);
        let start = header.find("<AppHdr").unwrap_or(0);
        let end = header.find("</AppHdr>").map_or(0, |e| e + "</AppHdr>".len());
        let two_headers = format!("{}{}{}", &header[..end], &header[start..end], &header[end..]);
        assert_eq!(code(&two_headers), Some("duplicate_element"));
    }

    #[test]
    fn values_are_taken_as_written() {
        // String types keep white space (the checks downstream then refuse it); the decimal
        // amount collapses it.
        assert_eq!(parsed(&with("<Id>1</Id>", "<Id> 1</Id>")).debtor_account, " 1");
        assert_eq!(parsed(&with(">12.34<", ">\n  12.34\r\n  <")).amount, "12.34");
        assert_eq!(parsed(&with(">12.34<", "> 1 2 <")).amount, "1 2");
        assert_eq!(parsed(&with("<BizMsgIdr>M-1</BizMsgIdr>", "<BizMsgIdr>M-1 </BizMsgIdr>")).bmi, "M-1 ");
    }

    /// A way of writing a value.
    type Render = Box<dyn Fn(&str) -> String>;

    /// Field values for a rendered message.
    struct Fields {
        bmi: String,
        msg_id: String,
        e2e: String,
        uetr: String,
        amount: String,
        ccy: String,
        debtor: String,
        creditor: String,
        debtor_bic: String,
        creditor_bic: String,
    }

    impl Fields {
        fn standard() -> Fields {
            Fields {
                bmi: "A&B<C>'D\"".into(),
                msg_id: "MSG/1 & 2".into(),
                e2e: "E2E <1>".into(),
                uetr: "8a562c67-ca16-48ba-b074-65581be6f011".into(),
                amount: "12.34".into(),
                ccy: "EUR".into(),
                debtor: "1".into(),
                creditor: "20".into(),
                debtor_bic: "BANKAAAAXXX".into(),
                creditor_bic: "BANKBBBB".into(),
            }
        }

        /// The message, every read value (and `MsgDefIdr`, `NbOfTxs`) through `text`, the
        /// currency through `attr`.
        fn render(&self, text: &dyn Fn(&str) -> String, attr: &dyn Fn(&str) -> String) -> String {
            let tx = format!(
                r#"<PmtId><EndToEndId>{}</EndToEndId><UETR>{}</UETR></PmtId>
                <IntrBkSttlmAmt Ccy="{}">{}</IntrBkSttlmAmt><ChrgBr>SLEV</ChrgBr>
                <Dbtr><Nm>A</Nm></Dbtr><DbtrAcct><Id><Othr><Id>{}</Id></Othr></Id></DbtrAcct>
                <DbtrAgt><FinInstnId><BICFI>{}</BICFI></FinInstnId></DbtrAgt>
                <CdtrAgt><FinInstnId><BICFI>{}</BICFI></FinInstnId></CdtrAgt>
                <Cdtr><Nm>B</Nm></Cdtr><CdtrAcct><Id><Othr><Id>{}</Id></Othr></Id></CdtrAcct>"#,
                text(&self.e2e),
                text(&self.uetr),
                attr(&self.ccy),
                text(&self.amount),
                text(&self.debtor),
                text(&self.debtor_bic),
                text(&self.creditor_bic),
                text(&self.creditor),
            );
            message("BMI", &tx)
                .replacen(
                    "<BizMsgIdr>BMI</BizMsgIdr>",
                    &format!("<BizMsgIdr>{}</BizMsgIdr>", text(&self.bmi)),
                    1,
                )
                .replacen("<MsgId>BMI</MsgId>", &format!("<MsgId>{}</MsgId>", text(&self.msg_id)), 1)
                .replacen(">pacs.008.001.08<", &format!(">{}<", text("pacs.008.001.08")), 1)
                .replacen("<NbOfTxs>1</NbOfTxs>", &format!("<NbOfTxs>{}</NbOfTxs>", text("1")), 1)
        }
    }

    /// As written, only what must be escaped escaped (`"` too in attribute values).
    fn literal(s: &str, attr: bool) -> String {
        if attr {
            quick_xml::escape::escape(s).into_owned()
        } else {
            quick_xml::escape::partial_escape(s).into_owned()
        }
    }

    /// Every character as a character reference.
    fn refs(s: &str, radix: u32) -> String {
        s.chars()
            .map(
                |c| {
                    if radix == 16 {
                        format!("&#x{:X};", u32::from(c))
                    } else {
                        format!("&#{};", u32::from(c))
                    }
                },
            )
            .collect()
    }

    /// One character, written in the way `how` picks.
    fn written(c: char, how: u8, attr: bool) -> String {
        let one = c.to_string();
        match how % 5 {
            0 => literal(&one, attr),
            1 => format!("&#{};", u32::from(c)),
            2 => format!("&#x{:x};", u32::from(c)),
            3 => match c {
                '<' => "&lt;".into(),
                '>' => "&gt;".into(),
                '&' => "&amp;".into(),
                '\'' => "&apos;".into(),
                '"' => "&quot;".into(),
                _ => literal(&one, attr),
            },
            _ if attr => literal(&one, attr),
            _ => format!("<![CDATA[{c}]]><!---->"),
        }
    }

    proptest::proptest! {
        #[test]
        fn an_escaped_rendering_is_the_same_payment(
            bmi in "[!-~]{1,35}",
            msg_id in "[ -~]{1,35}",
            e2e in "[ -~\u{e9}\u{20ac}\u{1F600}]{1,35}",
            uetr in proptest::num::u128::ANY,
            whole in "[0-9]{1,12}",
            cents in "[0-9]{2}",
            ccy in "[A-Z]{3}",
            debtor in "[0-9]{1,12}",
            creditor in "[0-9]{1,12}",
            debtor_bic in "[A-Z]{6}[A-Z0-9]{2}([A-Z0-9]{3})?",
            creditor_bic in "[A-Z]{6}[A-Z0-9]{2}",
            hows in proptest::collection::vec(proptest::num::u8::ANY, 1..64),
        ) {
            let u = format!("{uetr:032x}");
            let uetr = format!("{}-{}-4{}-{}{}-{}", &u[..8], &u[8..12], &u[13..16], ["8", "9", "a", "b"][usize::from(u.as_bytes()[16] % 4)], &u[17..20], &u[20..32]);
            let f = Fields {
                bmi, msg_id, e2e, uetr, amount: format!("{whole}.{cents}"), ccy, debtor, creditor, debtor_bic, creditor_bic,
            };
            let plain = parse_pacs008(f.render(&|s| literal(s, false), &|s| literal(s, true)).as_bytes());
            let plain = plain.map_err(|e| proptest::test_runner::TestCaseError::fail(e.to_string()))?;
            proptest::prop_assert_eq!(&plain.bmi, &f.bmi);
            proptest::prop_assert_eq!(&plain.e2e_or_empty(), &f.e2e);
            let at = std::cell::Cell::new(0usize);
            let pick = || { let h = hows[at.get() % hows.len()]; at.set(at.get() + 1); h };
            let text = |s: &str| s.chars().map(|c| written(c, pick(), false)).collect::<String>();
            let attr = |s: &str| s.chars().map(|c| written(c, pick(), true)).collect::<String>();
            let escaped = f.render(&text, &attr);
            proptest::prop_assert_eq!(parse_pacs008(escaped.as_bytes()), Ok(plain), "{}", escaped);
        }

        /// A valid message with a few bytes spliced in somewhere: read or refused, never a
        /// panic, and what is read has every field the API needs.
        #[test]
        fn spliced_messages_are_read_or_refused(at in 0usize..2_000, bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..6)) {
            let mut xml = message("M-1", TX).into_bytes();
            let at = at % (xml.len() + 1);
            xml.splice(at..at, bytes);
            if let Ok(m) = parse_pacs008(&xml) {
                proptest::prop_assert!(!m.bmi.is_empty() && !m.amount.is_empty() && !m.currency.is_empty());
                proptest::prop_assert!(!m.debtor_account.is_empty() && !m.creditor_account.is_empty());
                proptest::prop_assert_eq!(m.msg_def, PACS_008_MSG_DEF);
            }
        }
    }

    impl Pacs008 {
        fn e2e_or_empty(&self) -> String {
            self.end_to_end_id.clone().unwrap_or_default()
        }
    }

    #[test]
    fn writes_a_status_report_with_its_header() {
        let x = pacs002("bank-a", "M<1", "RJCT", Some("AM04"), Some(17), 1_796_000_000);
        assert!(x.contains("<OrgnlMsgId>M&lt;1</OrgnlMsgId>") && x.contains("<TxSts>RJCT</TxSts>"), "{x}");
        assert!(x.contains("<Cd>AM04</Cd>") && x.contains("<ClrSysRef>17</ClrSysRef>"), "{x}");
        assert!(x.contains("<CreDtTm>2026-11-30T") && x.contains("<CreDt>2026-11-30T"), "{x}");
        assert!(x.contains(&format!("<AppHdr xmlns=\"{HEAD_001_OUT_NAMESPACE}\">")), "{x}");
        assert!(x.contains(&format!("<Document xmlns=\"{PACS_002_NAMESPACE}\">")), "{x}");
        assert!(x.contains("<MsgDefIdr>pacs.002.001.10</MsgDefIdr>"), "{x}");
        assert!(
            x.contains("<To><FIId><FinInstnId><Othr><Id>bank-a</Id></Othr></FinInstnId></FIId></To>"),
            "{x}"
        );
        let id = report_msg_id("bank-a", "M<1", "RJCT", Some("AM04"), Some(17));
        assert!(
            x.contains(&format!("<BizMsgIdr>{id}</BizMsgIdr>"))
                && x.contains(&format!("<MsgId>{id}</MsgId>"))
        );
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn report_identifiers_fit_max35_and_are_deterministic() {
        let long_bmi = "B".repeat(35);
        let id = report_msg_id("bank-a", &long_bmi, "ACSP", None, None);
        assert_eq!(id.len(), 35);
        assert!(id.starts_with("ACSP-"), "{id}");
        assert_eq!(id, report_msg_id("bank-a", &long_bmi, "ACSP", None, None));
        // Another status, seq, reason, bmi or recipient: another report, another id.
        for other in [
            report_msg_id("bank-a", &long_bmi, "ACCC", None, None),
            report_msg_id("bank-a", &long_bmi, "ACSP", None, Some(0)),
            report_msg_id("bank-a", &long_bmi, "ACSP", Some(""), None),
            report_msg_id("bank-a", "B", "ACSP", None, None),
            report_msg_id("bank-b", &long_bmi, "ACSP", None, None),
        ] {
            assert_ne!(other, id);
        }
        let long_key = "k".repeat(80);
        let to = within35("K-", &long_key);
        assert_eq!((to.len(), to.starts_with("K-")), (35, true));
        assert_eq!(within35("K-", &long_key), to);
        let x = pacs002(&long_key, &long_bmi, "ACCC", None, Some(u64::MAX), 0);
        for tag in ["Id", "BizMsgIdr", "MsgId", "OrgnlMsgId", "OrgnlTxId", "ClrSysRef"] {
            for value in x.split(&format!("<{tag}>")).skip(1).filter_map(|rest| rest.split('<').next()) {
                assert!(value.chars().count() <= MAX35, "{tag} {value:?} is longer than 35");
            }
        }
    }
}
