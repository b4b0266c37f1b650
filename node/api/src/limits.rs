//! Every bound of the API in one place.

use std::time::Duration;

/// Largest request body accepted (bytes). A single JSON transfer is well under 1 KiB; anything
/// larger is answered 413 `body_too_large` before it is parsed or its signature is checked.
pub const BODY_BYTES_MAX: usize = 16 * 1024;

/// Transfers in one `POST /v1/transfers/batch` (the engine takes up to 1,024 per submission).
pub const BATCH_TRANSFERS_MAX: usize = 1_000;

/// Largest batch body (bytes): 1,000 transfers of up to ~200 bytes each, with room to spare.
pub const BATCH_BODY_BYTES_MAX: usize = 256 * 1024;

/// Write signatures remembered against replays (16-byte prefix + timestamp: ~40 bytes each, so
/// ≤ ~340 MB; 300 s of 28,000 writes/s — a batch of 1,000 transfers is one write). Beyond it the
/// oldest are forgotten first.
pub const REPLAY_GUARD_ENTRIES_MAX: usize = 1 << 23;

/// Statement lines kept per account in the read model (the most recent; older ones are
/// dropped and a statement asked from before them says `truncated`).
pub const STATEMENT_LINES_MAX: usize = 1_024;

/// Lines in one statement answer when the request names no `limit`.
pub const STATEMENT_PAGE_DEFAULT: usize = 100;

/// Most lines in one statement answer.
pub const STATEMENT_PAGE_MAX: usize = 500;

/// Longest long-poll of a transfer's status (`GET /v1/transfers/{bmi}?wait_s=N`), seconds.
pub const LONG_POLL_S_MAX: u64 = 30;

/// A signed request's timestamp may differ from the server's clock by at most this (seconds).
pub const TIMESTAMP_SKEW_S_MAX: u64 = 300;

/// Transfers whose `bmi`, content, seq and status the API remembers (oldest forgotten first).
/// Beyond it a retry is still never journaled twice — both engines know every `bmi` ever
/// sequenced and answer it with the original seq, its status then reading the outcome from the
/// read model or the engine's stored entries — but a status query before any retry answers 404.
pub const TRACKED_TRANSFERS_MAX: usize = 1 << 20;

/// How long a submission waits for its seq before answering 202 without one. The embedded
/// engine reports a seq together with the entry's finality (or with a refusal), so this is also
/// the longest a `POST` waits when finality has halted (two centers down).
pub const SEQ_WAIT: Duration = Duration::from_secs(10);

/// How often the balance read model looks for newly final entries to apply.
pub const READ_MODEL_POLL: Duration = Duration::from_millis(20);

/// Entries the read model holds read ahead of finality (the feed holds back the rest).
pub const READ_MODEL_AHEAD_MAX: usize = 1 << 18;

/// How long a read waits for the read model to apply what is already final (read-your-writes)
/// before answering 503 `read_model_behind`.
pub const READ_MODEL_WAIT: Duration = Duration::from_secs(2);

/// How often the metrics' histogram samples are folded in when nobody scrapes.
pub const METRICS_UPKEEP: Duration = Duration::from_secs(5);

/// Smallest accepted participant secret (bytes).
pub const SECRET_BYTES_MIN: usize = 16;

const _: () = assert!(BODY_BYTES_MAX >= 1024, "a transfer body must fit");

/// Orders whose customers' PII one API keeps at once (`pii::PiiStore`; a further order is
/// answered 503 `unavailable`).
pub const PII_ORDERS_MAX: usize = 1_000_000;

/// Characters of each PII field (name, phone, bank account).
pub const PII_FIELD_CHARS_MAX: usize = 128;

/// A PII record's body on disk (JSON): three fields of at most 128 characters (6 bytes each at
/// worst, a JSON-escaped control character), a key id and an order number. A larger one is
/// refused, never cut; on reading, a larger length is corruption.
pub const PII_RECORD_BODY_BYTES_MAX: usize = 8_192;

const _: () = assert!(PII_RECORD_BODY_BYTES_MAX >= 3 * PII_FIELD_CHARS_MAX * 6 + 1_024);

// The HTTP edge (`edge`): what one connection may hold and for how long. A client that trickles
// or stalls a request holds a connection slot and a task; these bound both, so that neither a
// slow client nor a shutdown waits on it for long.

/// A request's head (request line and headers) must be complete within this of the moment the
/// connection is ready for one: accepted, or the previous answer sent. hyper runs one clock for
/// both, so this is also the keep-alive idle timeout: a connection that sends no complete head
/// within it is closed, without an answer (the client is not waiting for one: it has not
/// finished asking). 5 s: a head arrives in one segment in well under a second on any working
/// network; 5 s is also the keep-alive idle timeout of Node.js and Apache, which clients and
/// their pools are made for (a client reconnects when it needs to).
pub const REQUEST_HEAD_TIMEOUT: Duration = Duration::from_secs(5);

/// A request's body must be read whole within this of the handler starting to read it (each
/// does so first); otherwise 408 `body_timeout`. The largest body, a 256 KiB batch, then needs at
/// least ~26 KB/s: far below any working link, far above a trickle.
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections served at once. Beyond it the listener is not accepted from: a further client
/// waits in the kernel's accept backlog (back-pressure, never an unbounded number of tasks) until
/// a slot is free, which [`REQUEST_HEAD_TIMEOUT`] and [`BODY_READ_TIMEOUT`] guarantee a slow or
/// stalled client cannot hold off for long. Not a 503: answering needs the accept (and a slot's
/// worth of work) that the limit is there to bound, and a client in the backlog is served as soon
/// as there is room instead of being told to retry blind. 4,096: far above what the load tools
/// keep open (k6: hundreds), a few MB of buffers at most (see [`HTTP1_HEAD_BYTES_MAX`]).
pub const CONNECTIONS_MAX: usize = 4_096;

/// On shutdown: idle connections are closed at once, requests in flight may finish within this
/// (a status long-poll is answered at once with the status then); then every connection still
/// open is dropped, so the process exits within it whatever a client does.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// The longest request target (path and query, bytes) the API reads; longer is 414
/// `uri_too_long`. The longest real one is a `bmi` (≤ 35 characters, percent-encoded at worst ×3)
/// with a query: well under 1 KiB.
pub const URI_BYTES_MAX: usize = 4 * 1024;

/// Headers (names and values, bytes) of one request; more is 431 `headers_too_large`.
pub const HEADERS_BYTES_MAX: usize = 16 * 1024;

/// Headers of one request; more is 431 `headers_too_large`.
pub const HEADERS_COUNT_MAX: usize = 64;

/// hyper's own bound on a request head (its read buffer): a head beyond it is answered by hyper
/// before any request exists — 431 with no body (see `edge`). Above the API's bounds so that
/// every head a client would send reaches the API, which answers with the error contract; below
/// hyper's 65,534-byte URI bound, so that hyper's own 414 cannot happen (a longer URI overflows
/// this buffer first).
pub const HTTP1_HEAD_BYTES_MAX: usize = 32 * 1024;

/// hyper's own bound on the number of headers (beyond it: hyper's bare 431, as above).
pub const HTTP1_HEADERS_COUNT_MAX: usize = 100;

const _: () = assert!(URI_BYTES_MAX + HEADERS_BYTES_MAX + 1024 <= HTTP1_HEAD_BYTES_MAX);
const _: () = assert!(HTTP1_HEAD_BYTES_MAX < 65_534, "hyper's 414 must stay out of reach");
const _: () = assert!(HTTP1_HEAD_BYTES_MAX >= 8_192, "hyper's smallest read buffer");
const _: () = assert!(HEADERS_COUNT_MAX < HTTP1_HEADERS_COUNT_MAX);

/// Items in one operator list answer (STALE batches, QUEUED groups and their rows, skipped
/// groups, relayers): beyond it the answer says `truncated`.
pub const OPERATOR_LIST_ITEMS_MAX: usize = 1_000;
