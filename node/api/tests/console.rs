//! The operator console over real HTTP (embedded engine): the page and its files are served
//! with the security headers and hold no data; the cluster report needs operator credentials
//! (and, on `rtgs serve`, says there is no cluster); a browser's cross-site request is refused
//! before it is read; operators read any account.

mod common;

use common::{fresh_dir, start, transfer, SECRET_OPS};
use serde_json::Value;

async fn headers_of(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n");
    s.write_all(request.as_bytes()).await.expect("write");
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).await.expect("read");
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text.get(9..12).and_then(|t| t.parse().ok()).unwrap_or(0);
    (status, text.to_ascii_lowercase())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_is_served_with_its_headers_and_its_data_needs_operator_credentials() {
    let node = start(&fresh_dir("console"), true).await;
    for (path, kind) in [
        ("/console", "text/html"),
        ("/console/", "text/html"),
        ("/console/console.js", "text/javascript"),
        ("/console/console.css", "text/css"),
    ] {
        let (status, text) = headers_of(node.addr(), path).await;
        assert_eq!(status, 200, "{path}: {text}");
        for header in [
            &format!("content-type: {kind}"),
            "content-security-policy: default-src 'self'; script-src 'self';",
            "frame-ancestors 'none'",
            "x-frame-options: deny",
            "x-content-type-options: nosniff",
            "referrer-policy: no-referrer",
        ] {
            assert!(text.contains(header), "{path} lacks {header}:\n{text}");
        }
    }
    // The page loads its script from a file, never inline (the policy allows no inline script);
    // its stylesheet is inline (one request before the first paint), admitted by its hash.
    let page = rtgs_api::console::page();
    assert!(
        page.contains(r#"<script src="/console/console.js"></script>"#)
            && page.matches("<script").count() == 1
    );
    let css = rtgs_api::console::CONSOLE_CSS;
    assert!(page.contains(&format!("<style>{css}</style>")) && !page.contains("<link rel=\"stylesheet\""));
    let (_, text) = headers_of(node.addr(), "/console/").await;
    let hash = {
        use base64::Engine as _;
        use sha2::Digest as _;
        base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(css.as_bytes()))
    };
    assert!(text.contains(&format!("style-src 'self' 'sha256-{}'", hash.to_ascii_lowercase())), "{text}");
    assert!(text.contains("script-src 'self';"), "no inline script is admitted: {text}");

    // The report: 401 unsigned, 401 with a participant's key, 404 on the embedded engine.
    let (status, body) = node.send("GET", "/v1/operator/console/cluster", &[], b"").await;
    assert_eq!((status, body["code"].as_str()), (401, Some("missing_credentials")), "{body}");
    let (status, body) = node.as_a("GET", "/v1/operator/console/cluster", b"").await;
    assert_eq!((status, body["code"].as_str()), (401, Some("unknown_key")), "{body}");
    let (status, body) = node.as_ops("GET", "/v1/operator/console/cluster", b"").await;
    assert_eq!((status, body["code"].as_str()), (404, Some("cluster_status_unavailable")), "{body}");

    // A page of another site cannot make the browser send a write here.
    let cross = [("sec-fetch-site".to_string(), "cross-site".to_string())];
    let (status, body) = node.send("POST", "/v1/operator/accounts", &cross, b"{}").await;
    assert_eq!((status, body["code"].as_str()), (403, Some("cross_site_request")), "{body}");
    let same = [("sec-fetch-site".to_string(), "same-origin".to_string())];
    let (status, body) = node.send("POST", "/v1/operator/accounts", &same, b"{}").await;
    assert_eq!((status, body["code"].as_str()), (401, Some("missing_credentials")), "{body}");

    // Operators read any account and its statement (participants only their own).
    let (status, body) = node.as_a("POST", "/v1/transfers", &transfer("CON-T-1", 1, 2, "3.00")).await;
    assert_eq!(status, 202, "{body}");
    let (status, account) = node.signed_at("ops", SECRET_OPS, "GET", "/v1/operator/accounts/2", b"", 0).await;
    assert_eq!((status, account["account"].as_u64()), (200, Some(2)), "{account}");
    // The transfer's answer came with its seq; its final notice may come a moment later.
    let has = |s: &Value| s["lines"].as_array().is_some_and(|l| l.iter().any(|l| l["bmi"] == "CON-T-1"));
    let mut statement = Value::Null;
    for _ in 0..100 {
        let (status, s) = node
            .signed_at("ops", SECRET_OPS, "GET", "/v1/operator/accounts/2/statement?limit=500", b"", 0)
            .await;
        assert_eq!(status, 200, "{s}");
        statement = s;
        if has(&statement) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(has(&statement), "{statement}");
    let (status, body) = node.as_a("GET", "/v1/operator/accounts/2", b"").await;
    assert_eq!((status, body["code"].as_str()), (401, Some("unknown_key")), "{body}");
    let (status, _): (u16, Value) = node.as_ops("GET", "/v1/operator/accounts/999", b"").await;
    assert_eq!(status, 404);
    node.finish().await;
}
