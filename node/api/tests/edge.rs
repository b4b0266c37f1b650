//! The HTTP edge attacked as a hostile client would, one test per attack class: slow and stalled
//! requests (head, body, idle), too many connections, a shutdown with such clients connected,
//! every kind of error answer (the framework's and hyper's own included), duplicate credential
//! headers, structs sent as positional arrays, and an IPv4-mapped loopback caller. Bounds on time
//! are correctness bounds (what must have happened by then), far above the limits they check.

mod common;

use common::{fresh_dir, journaled, start, start_edge, transfer, Edge, Node, SECRET_A};
use rtgs_api::auth::sign;
use rtgs_api::limits::{BODY_READ_TIMEOUT, REQUEST_HEAD_TIMEOUT};
use rtgs_api::server::EdgeLimits;
use serde_json::Value;
use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// What must have happened by then: far beyond every limit under test, on a loaded machine too.
const BOUND: Duration = Duration::from_secs(30);

async fn connect(addr: SocketAddr) -> TcpStream {
    TcpStream::connect(addr).await.expect("connect")
}

/// Writes `bytes` as they are (no client library to fix them up).
async fn write(stream: &mut TcpStream, bytes: &[u8]) {
    stream.write_all(bytes).await.expect("write");
}

/// Everything the server sends until it closes the connection; `None` if it has not closed it
/// within `bound`.
async fn read_to_close(stream: &mut TcpStream, bound: Duration) -> Option<Vec<u8>> {
    let mut got = Vec::new();
    let read = tokio::time::timeout(bound, async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    });
    read.await.ok().map(|()| got)
}

/// A raw answer's status and body (the text after the head).
fn parse_answer(raw: &[u8]) -> (u16, String) {
    let text = String::from_utf8_lossy(raw);
    let status = text.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_string();
    (status, body)
}

/// `{code, message}` and nothing else, `code` as expected.
fn assert_contract(what: &str, status: u16, body: &str, want_status: u16, want_code: &str) {
    assert_eq!(status, want_status, "{what}: {body}");
    let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {body:?}"));
    let object = v.as_object().unwrap_or_else(|| panic!("{what}: not an object: {body}"));
    assert_eq!(object.len(), 2, "{what}: {body}");
    assert_eq!(v["code"].as_str(), Some(want_code), "{what}: {body}");
    assert!(v["message"].as_str().is_some_and(|m| !m.is_empty()), "{what}: {body}");
    let doc: Value = serde_json::from_str(rtgs_api::server::OPENAPI_JSON).expect("openapi.json is JSON");
    let codes = doc["components"]["schemas"]["Error"]["properties"]["code"]["enum"].as_array().cloned();
    assert!(
        codes.unwrap_or_default().contains(&Value::from(want_code)),
        "{want_code} is not in openapi.json"
    );
}

/// Signature headers (bank-a) for a request, as header lines.
fn signed_lines(method: &str, path: &str, body: &[u8]) -> String {
    static NONCE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NONCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_secs();
    let ts = format!("{now}.e{n}");
    let sig = sign(SECRET_A.as_bytes(), method, path, &ts, body);
    format!("x-rtgs-key: bank-a\r\nx-rtgs-timestamp: {ts}\r\nx-rtgs-signature: {sig}\r\n")
}

fn signed(method: &str, path: &str, body: &[u8]) -> Vec<(String, String)> {
    signed_lines(method, path, body)
        .lines()
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_or_trickled_head_is_closed_after_the_head_timeout() {
    const _: () = assert!(REQUEST_HEAD_TIMEOUT.as_secs() * 3 <= BOUND.as_secs());
    let node = start(&fresh_dir("edge-head"), false).await;
    // Slowloris: a head that never ends, a byte at a time; a connection that says nothing; one
    // idle after a first answer (keep-alive).
    let mut trickled = connect(node.addr()).await;
    write(&mut trickled, b"GET /v1/openapi.json HTTP/1.1\r\nhost: x\r\n").await;
    let trickle = async {
        for _ in 0..(BOUND.as_secs() * 2) {
            if trickled.write_all(b"x").await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    };
    let mut silent = connect(node.addr()).await;
    let mut idle = connect(node.addr()).await;
    write(&mut idle, b"GET /v1/openapi.json HTTP/1.1\r\nhost: x\r\n\r\n").await;
    let mut first = vec![0u8; 64];
    let n = idle.read(&mut first).await.expect("the first answer");
    assert!(first[..n].starts_with(b"HTTP/1.1 200"), "{:?}", String::from_utf8_lossy(&first[..n]));

    let closed = tokio::time::timeout(BOUND, trickle).await;
    assert!(closed.is_ok(), "a trickled head kept its connection for {BOUND:?}");
    assert!(read_to_close(&mut silent, BOUND).await.is_some(), "a silent connection stayed open");
    assert!(read_to_close(&mut idle, BOUND).await.is_some(), "an idle keep-alive connection stayed open");
    node.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_body_is_answered_408_body_timeout_and_nothing_is_journaled() {
    const _: () = assert!(BODY_READ_TIMEOUT.as_secs() * 2 <= BOUND.as_secs());
    let node = start(&fresh_dir("edge-body"), true).await;
    let body = transfer("E-STALL", 1, 2, "1.00");
    let mut stream = connect(node.addr()).await;
    let head = format!(
        "POST /v1/transfers HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{}\r\n",
        body.len(),
        signed_lines("POST", "/v1/transfers", &body)
    );
    write(&mut stream, head.as_bytes()).await;
    write(&mut stream, &body[..10]).await;
    let raw = read_to_close(&mut stream, BOUND).await.expect("answered and closed within the bound");
    let (status, answer) = parse_answer(&raw);
    assert_contract("stalled body", status, &answer, 408, "body_timeout");
    let bmis = node.finish().await;
    assert!(journaled(&bmis).is_empty(), "{bmis:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_bound_wait_for_a_free_slot() {
    // Heads may take long here: the slots are held by connections that say nothing.
    let limits = EdgeLimits { connections_max: 2, request_head_timeout: BOUND * 4, ..Default::default() };
    let node = start_edge(&fresh_dir("edge-conns"), Edge { limits, ..Default::default() }).await;
    let mut holders = vec![connect(node.addr()).await, connect(node.addr()).await];
    // Both accepted (a slot each) before the third arrives.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut third = connect(node.addr()).await; // the kernel's backlog takes it
    write(&mut third, b"GET /v1/openapi.json HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").await;
    let early = read_to_close(&mut third, Duration::from_secs(1)).await;
    assert!(early.is_none(), "a third connection was served beyond the bound of two: {early:?}");
    // A slot frees: the waiting connection is accepted and answered.
    drop(holders.pop());
    let raw = read_to_close(&mut third, BOUND).await.expect("served once a slot was free");
    assert_eq!(parse_answer(&raw).0, 200, "{}", String::from_utf8_lossy(&raw));
    drop(holders);
    node.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_finishes_requests_in_flight_and_does_not_wait_for_half_sent_ones() {
    let mut node = start(&fresh_dir("edge-shutdown"), true).await;
    // Half a head, half a body, and an idle keep-alive connection.
    let mut half_head = connect(node.addr()).await;
    write(&mut half_head, b"POST /v1/transfers HTTP/1.1\r\nhost: x\r\ncontent-le").await;
    let mut half_body = connect(node.addr()).await;
    write(&mut half_body, b"POST /v1/transfers HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n{\"bmi\":")
        .await;
    let mut idle = connect(node.addr()).await;
    write(&mut idle, b"GET /v1/openapi.json HTTP/1.1\r\nhost: x\r\n\r\n").await;
    let mut first = vec![0u8; 64];
    let n = idle.read(&mut first).await.expect("the first answer");
    assert!(first[..n].starts_with(b"HTTP/1.1 200"));
    // A signed transfer whose body is still on its way when the shutdown comes.
    let body = transfer("E-INFLIGHT", 1, 2, "2.00");
    let mut in_flight = connect(node.addr()).await;
    let head = format!(
        "POST /v1/transfers HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n{}\r\n",
        body.len(),
        signed_lines("POST", "/v1/transfers", &body)
    );
    write(&mut in_flight, head.as_bytes()).await;
    write(&mut in_flight, &body[..5]).await;
    tokio::time::sleep(Duration::from_millis(200)).await; // the head is read: a request in flight

    node.begin_shutdown();
    tokio::time::sleep(Duration::from_millis(200)).await;
    // The in-flight request completes and is answered.
    write(&mut in_flight, &body[5..]).await;
    let raw = read_to_close(&mut in_flight, BOUND).await.expect("answered and closed");
    let (status, answer) = parse_answer(&raw);
    assert_eq!(status, 202, "{answer}");
    let answer: Value = serde_json::from_str(&answer).unwrap_or(Value::Null);
    assert_eq!((answer["bmi"].as_str(), answer["status"].as_str()), (Some("E-INFLIGHT"), Some("ACSP")));
    // The idle one is closed, and the half-sent ones do not hold the server.
    assert!(read_to_close(&mut idle, BOUND).await.is_some(), "the idle connection stayed open");
    assert!(
        node.server_stopped_within(Duration::from_secs(10)).await,
        "the server waited for half-sent requests"
    );
    assert!(read_to_close(&mut half_head, BOUND).await.is_some());
    assert!(read_to_close(&mut half_body, BOUND).await.is_some());
    // No new connection is served.
    let refused = match TcpStream::connect(node.addr()).await {
        Err(_) => true,
        Ok(mut s) => {
            let _ = s.write_all(b"GET /v1/openapi.json HTTP/1.1\r\nhost: x\r\n\r\n").await;
            read_to_close(&mut s, BOUND).await.is_some_and(|raw| raw.is_empty())
        }
    };
    assert!(refused, "a connection was served after the shutdown");
    let bmis = node.finish().await;
    assert_eq!(journaled(&bmis), ["E-INFLIGHT"]);
}

/// A raw request answered and closed (`connection: close`).
async fn raw_answer(node: &Node, request: &[u8]) -> (u16, String) {
    let mut stream = connect(node.addr()).await;
    write(&mut stream, request).await;
    let raw = read_to_close(&mut stream, BOUND).await.expect("answered and closed");
    parse_answer(&raw)
}

/// (what, method, path, headers, body, status, code)
type Row<'a> = (&'a str, &'a str, &'a str, Vec<(String, String)>, Vec<u8>, u16, &'a str);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_error_answer_carries_code_and_message() {
    let node = start(&fresh_dir("edge-contract"), true).await;
    let long_bmi = "A".repeat(5_000);
    let long_path = format!("/v1/transfers/{long_bmi}");
    let array = br#"["E-ARR", 1, 2, "1.00", "EUR"]"#.to_vec();
    let nested = br#"{"transfers": [["E-NEST", 1, 2, "1.00", "EUR"]]}"#.to_vec();
    let big_headers: Vec<(String, String)> =
        (0..20).map(|i| (format!("x-pad-{i}"), "p".repeat(1_000))).collect();
    let many_headers: Vec<(String, String)> = (0..70).map(|i| (format!("x-h-{i}"), "1".into())).collect();
    let bad_json = b"{\"bmi\": ".to_vec();
    let missing = br#"{"bmi":"E-MISS","debtor":1,"creditor":2,"currency":"EUR"}"#.to_vec();
    let rows: Vec<Row> = vec![
        ("unknown route", "GET", "/v1/nothing", vec![], vec![], 404, "not_found"),
        ("unknown route, POST", "POST", "/nothing", vec![], b"{}".to_vec(), 404, "not_found"),
        ("wrong method", "DELETE", "/v1/transfers", vec![], vec![], 405, "method_not_allowed"),
        ("wrong method on a read", "POST", "/v1/openapi.json", vec![], vec![], 405, "method_not_allowed"),
        ("bad percent-encoding", "GET", "/v1/transfers/%ff%fe", vec![], vec![], 400, "invalid_path"),
        (
            "bad percent-encoding, operator",
            "GET",
            "/v1/operator/entries/%c3%28",
            vec![],
            vec![],
            400,
            "invalid_path",
        ),
        ("target too long", "GET", &long_path, vec![], vec![], 414, "uri_too_long"),
        ("headers too large", "GET", "/v1/openapi.json", big_headers, vec![], 431, "headers_too_large"),
        ("too many headers", "GET", "/v1/openapi.json", many_headers, vec![], 431, "headers_too_large"),
        ("body too large", "POST", "/v1/transfers", vec![], vec![b'x'; 17 * 1024], 413, "body_too_large"),
        (
            "unsigned",
            "POST",
            "/v1/transfers",
            vec![],
            transfer("E-U", 1, 2, "1.00"),
            401,
            "missing_credentials",
        ),
        (
            "a struct as an array",
            "POST",
            "/v1/transfers",
            signed("POST", "/v1/transfers", &array),
            array.clone(),
            400,
            "not_an_object",
        ),
        (
            "a nested struct as an array",
            "POST",
            "/v1/transfers/batch",
            signed("POST", "/v1/transfers/batch", &nested),
            nested.clone(),
            400,
            "not_an_object",
        ),
        (
            "JSON syntax",
            "POST",
            "/v1/transfers",
            signed("POST", "/v1/transfers", &bad_json),
            bad_json.clone(),
            400,
            "malformed_json",
        ),
        (
            "missing field",
            "POST",
            "/v1/transfers",
            signed("POST", "/v1/transfers", &missing),
            missing.clone(),
            400,
            "missing_field",
        ),
        (
            "not JSON, whatever the content type",
            "POST",
            "/v1/transfers",
            [signed("POST", "/v1/transfers", b"a=1"), vec![("content-type".into(), "text/plain".into())]]
                .concat(),
            b"a=1".to_vec(),
            400,
            "malformed_json",
        ),
    ];
    for (what, method, path, headers, body, want_status, want_code) in rows {
        let (status, text) = node.send_raw(method, path, &headers, &body).await;
        assert_contract(what, status, &text, want_status, want_code);
    }
    // A chunked body that breaks its own framing.
    let broken = b"POST /v1/transfers HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\nzz\r\n";
    let (status, body) = raw_answer(&node, broken).await;
    assert_contract("broken chunked body", status, &body, 400, "malformed_body");
    // A request that is not HTTP at all, and one whose head overflows hyper's own buffer: hyper
    // answers these before any request exists (see `rtgs_api::edge`): a bare status, no body.
    let (status, body) = raw_answer(&node, b"GET /v1/openapi.json HTTP/1.1\r\nbad header line\r\n\r\n").await;
    assert_eq!((status, body.as_str()), (400, ""));
    let huge =
        format!("GET /v1/openapi.json HTTP/1.1\r\nhost: x\r\nx-pad: {}\r\n\r\n", "p".repeat(40 * 1024));
    let (status, body) = raw_answer(&node, huge.as_bytes()).await;
    assert_eq!((status, body.as_str()), (431, ""));
    // Within hyper's bounds the same kinds of head get the contract.
    let head = format!(
        "GET /v1/openapi.json HTTP/1.1\r\nhost: x\r\nconnection: close\r\nx-pad: {}\r\n\r\n",
        "p".repeat(17 * 1024)
    );
    let (status, body) = raw_answer(&node, head.as_bytes()).await;
    assert_contract("a 17 KiB header", status, &body, 431, "headers_too_large");
    let bmis = node.finish().await;
    assert!(journaled(&bmis).is_empty(), "{bmis:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_credential_headers_are_refused_whichever_copy_is_right() {
    let node = start(&fresh_dir("edge-dup"), true).await;
    let body = transfer("E-DUP", 1, 2, "1.00");
    let good = signed("POST", "/v1/transfers", &body);
    for name in ["x-rtgs-key", "x-rtgs-timestamp", "x-rtgs-signature"] {
        let (_, value) = good.iter().find(|(k, _)| k == name).cloned().expect("signed header");
        // The same value twice, the right one first, the right one second.
        for extra in [value.clone(), "0".repeat(value.len())] {
            for right_first in [true, false] {
                let mut headers: Vec<(String, String)> =
                    good.iter().filter(|(k, _)| k != name).cloned().collect();
                let copies =
                    if right_first { [value.clone(), extra.clone()] } else { [extra.clone(), value.clone()] };
                headers.extend(copies.into_iter().map(|v| (name.to_string(), v)));
                let (status, text) = node.send_raw("POST", "/v1/transfers", &headers, &body).await;
                assert_contract(name, status, &text, 401, "duplicate_credentials");
            }
        }
    }
    // The same request with each header once is accepted.
    let (status, answer) = node.send("POST", "/v1/transfers", &good, &body).await;
    assert_eq!(status, 202, "{answer}");
    let bmis = node.finish().await;
    assert_eq!(journaled(&bmis), ["E-DUP"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_struct_sent_as_a_positional_array_is_refused_at_any_depth() {
    let node = start(&fresh_dir("edge-array"), true).await;
    let cases: [(&str, &[u8]); 4] = [
        ("/v1/transfers", br#"["E-A1", 1, 2, "1.00", "EUR"]"#),
        (
            "/v1/transfers/batch",
            br#"[[{"bmi":"E-A2","debtor":1,"creditor":2,"amount":"1.00","currency":"EUR"}]]"#,
        ),
        ("/v1/transfers/batch", br#"{"transfers":[["E-A3", 1, 2, "1.00", "EUR"]]}"#),
        ("/v1/operator/accounts", br#"["E-A4", 7, "EUR"]"#),
    ];
    for (path, body) in cases {
        let (status, answer) = if path.starts_with("/v1/operator") {
            node.as_ops("POST", path, body).await
        } else {
            node.as_a("POST", path, body).await
        };
        assert_eq!((status, answer["code"].as_str()), (400, Some("not_an_object")), "{path}: {answer}");
    }
    let bmis = node.finish().await;
    assert!(journaled(&bmis).is_empty(), "{bmis:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_take_an_ipv4_mapped_loopback_caller() {
    // (The plugins' loopback-only callbacks use the same check, `rtgs_api::edge::is_loopback`.)
    // A dual-stack listener sees an IPv4 client as `::ffff:127.0.0.1`.
    let edge = Edge { bind: "[::]:0", ..Default::default() };
    let node = start_edge(&fresh_dir("edge-mapped"), edge).await;
    let v4 = SocketAddr::from(([127, 0, 0, 1], node.addr().port()));
    let mut stream = connect(v4).await;
    let local = stream.local_addr().expect("local address");
    assert!(local.is_ipv4(), "{local}");
    write(&mut stream, b"GET /metrics HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").await;
    let raw = read_to_close(&mut stream, BOUND).await.expect("answered");
    let (status, body) = parse_answer(&raw);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("rtgs_divergence_total"), "{body}");
    node.finish().await;
}
