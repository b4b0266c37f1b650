//! Disk-fault drills with the real `rtgs` binary, as an operator meets them: a bit flipped in the
//! middle of the journal (after a clean stop, and after `kill -9` before any checkpoint), a bit
//! flipped in a checkpoint, a torn tail, bytes missing from durable data, and a mirror repairing a
//! flipped frame. Each asserts what happened to every file of the data directory (byte for byte)
//! and to the ledger; `rtgs verify` is run on each damaged directory and must change nothing.

use rtgs_core::codec;
use rtgs_core::entry::{CenterId, Entry};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn rtgs() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rtgs"))
}

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rtgs-drill-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn ok<T, E: std::fmt::Display>(r: Result<T, E>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn json_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}\nstderr: {}", text(&out.stdout), text(&out.stderr)))
}

/// `rtgs demo ... --json`; returns the output and, if it printed one, the report.
fn demo(args: &[&str]) -> (Output, Option<Value>) {
    let out = ok(rtgs().arg("demo").args(args).arg("--json").output());
    let report = serde_json::from_slice(&out.stdout).ok();
    (out, report)
}

fn verify(dir: &Path, extra: &[&str]) -> (Output, Value) {
    let out = ok(rtgs().args(["verify", "--json", "--data-dir"]).arg(dir).args(extra).output());
    let v = json_of(&out);
    (out, v)
}

/// Every file under `dir`, byte for byte.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in ok(std::fs::read_dir(&d)) {
            let path = ok(e).path();
            if path.is_dir() {
                todo.push(path);
            } else {
                out.insert(path.clone(), ok(std::fs::read(&path)));
            }
        }
    }
    out
}

fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = ok(std::fs::read_dir(dir))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "journal"))
        .collect();
    v.sort();
    v
}

fn last_segment(dir: &Path) -> PathBuf {
    segments(&dir.join("journal")).pop().unwrap_or_else(|| panic!("no journal segment in {}", dir.display()))
}

fn flip(path: &Path, offset: u64) {
    let mut bytes = ok(std::fs::read(path));
    bytes[offset as usize] ^= 0x04;
    ok(std::fs::write(path, bytes));
}

fn len(path: &Path) -> u64 {
    ok(std::fs::metadata(path)).len()
}

/// The byte offset a refusal names (`... at byte N ...`).
fn named_offset(message: &str) -> u64 {
    let at = message.find("at byte ").unwrap_or_else(|| panic!("no offset named: {message}"));
    message[at + 8..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(u64::MAX)
}

/// A clean run of `transfers` transfers in `dir`; its report.
fn clean_run(dir: &Path, transfers: &str, extra: &[&str]) -> Value {
    let d = dir.to_string_lossy().to_string();
    let mut args = vec!["--data-dir", &d, "--transfers", transfers, "--accounts", "200"];
    args.extend_from_slice(extra);
    let (out, report) = demo(&args);
    assert!(out.status.success(), "demo failed: {}", text(&out.stderr));
    let r = report.unwrap_or_else(|| panic!("no report"));
    assert_eq!((r["consistent"].clone(), r["conserved"].clone()), (Value::Bool(true), Value::Bool(true)));
    r
}

/// A start on `dir` is refused with a message containing every one of `needles`, and changes
/// no byte of `dir` (nor of `also`, a mirror).
fn refused_and_untouched(dir: &Path, extra: &[&str], needles: &[&str], also: Option<&Path>) -> String {
    let before = (snapshot(dir), also.map(snapshot));
    let d = dir.to_string_lossy().to_string();
    let mut args = vec!["--data-dir", &d, "--transfers", "10", "--accounts", "200"];
    args.extend_from_slice(extra);
    let (out, _) = demo(&args);
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "the start was not refused: {stderr}");
    for n in needles {
        assert!(stderr.contains(n), "the refusal does not say {n:?}: {stderr}");
    }
    assert!(before.0 == snapshot(dir), "the refused start changed files in {}", dir.display());
    assert!(before.1 == also.map(snapshot), "the refused start changed the mirror");
    stderr
}

/// `rtgs verify` on a damaged directory: it fails, names the damage, and changes nothing.
fn verify_refuses_and_changes_nothing(dir: &Path, extra: &[&str], needle: &str) -> Value {
    let before = snapshot(dir);
    let (out, v) = verify(dir, extra);
    assert!(!out.status.success(), "verify passed a damaged directory: {v}");
    assert!(v.to_string().contains(needle), "verify does not say {needle:?}: {v}");
    assert!(before == snapshot(dir), "verify changed files in {}", dir.display());
    v
}

#[test]
fn a_bit_flipped_mid_journal_after_a_clean_stop_is_refused_and_nothing_is_cut() {
    let dir = tempdir("flip-clean");
    let r = clean_run(&dir, "20000", &[]);
    let seg = last_segment(&dir);
    let at = len(&seg) / 2;
    flip(&seg, at);
    let name = seg.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let v = verify_refuses_and_changes_nothing(&dir, &[], &name);
    let verdict = v["journal_error"].as_str().unwrap_or_default().to_string();
    let stderr = refused_and_untouched(
        &dir,
        &[],
        &[
            "journal corrupt",
            &name,
            "at byte",
            "unreadable",
            "Nothing was cut",
            "--journal-mirror",
            "rtgs verify",
        ],
        None,
    );
    let offset = named_offset(&stderr);
    assert!(
        offset <= at && at - offset < 8 << 20,
        "names the damaged frame's start ({offset}) for byte {at}"
    );
    assert_eq!(named_offset(&verdict), offset, "verify names the same frame");
    assert!(r["journal_seq_last"].as_u64().unwrap_or(0) > 20_000);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_bit_flipped_after_kill_9_before_any_checkpoint_is_refused_and_nothing_is_cut() {
    let dir = tempdir("flip-kill9");
    let d = dir.to_string_lossy().to_string();
    let mut child = ok(rtgs()
        .args(["demo", "--data-dir", &d, "--transfers", "50000000", "--accounts", "500"])
        .args(["--checkpoint-interval", "1000000000000"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn());
    let deadline = Instant::now() + Duration::from_secs(180);
    let journal_bytes = |dir: &Path| {
        std::fs::read_dir(dir.join("journal"))
            .map(|it| it.filter_map(|e| e.ok()?.metadata().ok()).map(|m| m.len()).sum::<u64>())
            .unwrap_or(0)
    };
    // (The files include the writer's zeros ahead, up to 4 MiB: see journal.rs.)
    while journal_bytes(&dir) < 12 << 20 {
        assert!(Instant::now() < deadline, "the demo made no progress");
        assert!(ok(child.try_wait()).is_none(), "the demo ended before it could be killed");
        std::thread::sleep(Duration::from_millis(20));
    }
    ok(child.kill()); // SIGKILL
    let _ = child.wait();
    let checkpoints = snapshot(&dir).keys().filter(|p| p.to_string_lossy().contains("checkpoint")).count();
    assert_eq!(checkpoints, 0, "no checkpoint was written before the kill");
    // The audit of the crashed directory passes, says where the durable end is, changes nothing.
    let before = snapshot(&dir);
    let (out, v) = verify(&dir, &[]);
    assert!(out.status.success(), "verify after the crash: {v}");
    assert!(before == snapshot(&dir), "verify changed the crashed directory");
    let durable = v["journal_durable_bytes"].as_u64().unwrap_or(0);
    assert!(durable > 4 << 20, "{v}");
    // A bit flipped at 90 % of the durable journal: entries every center may have applied and
    // announced final. Before the durable end: corruption, never a tail to cut.
    let seg = last_segment(&dir);
    let at = durable * 9 / 10;
    flip(&seg, at);
    let name = seg.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    verify_refuses_and_changes_nothing(&dir, &[], &name);
    let stderr = refused_and_untouched(&dir, &[], &["journal corrupt", &name, "Nothing was cut"], None);
    assert!(named_offset(&stderr) <= at);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_bit_flipped_in_a_checkpoint_is_refused_never_trusted() {
    let dir = tempdir("flip-checkpoint");
    clean_run(&dir, "5000", &[]);
    let ckpt = dir.join("center-DC2.checkpoint");
    flip(&ckpt, len(&ckpt) / 2);
    let v = verify_refuses_and_changes_nothing(&dir, &[], "center-DC2.checkpoint");
    assert!(v["centers"][1]["error"].as_str().is_some_and(|e| e.contains("corrupt")), "{v}");
    assert_eq!(v["centers"][0]["matches_journal"], true, "the others still match: {v}");
    refused_and_untouched(
        &dir,
        &[],
        &["center-DC2.checkpoint", "corrupt", "Nothing was changed", "Options"],
        None,
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A crash in the middle of writing the next group: part of a frame at the end, past the
/// durable end. The start cuts exactly those bytes, the ledger is the one before, and the
/// cluster goes on.
#[test]
fn a_torn_tail_is_cut_and_only_that() {
    let dir = tempdir("torn");
    let first = clean_run(&dir, "5000", &[]);
    let seq_last = first["journal_seq_last"].as_u64().unwrap_or(0);
    let state_hash = first["centers"][0]["state_hash"].clone();
    let seg = last_segment(&dir);
    let clean_len = len(&seg);
    // The next group's first frame, its last 7 bytes never written.
    let ticks: Vec<Entry> = (1..=3).map(|i| Entry::tick(seq_last + i, 9, 1, CenterId(1))).collect();
    let mut frame = Vec::new();
    codec::encode_frame(&ticks, &mut frame);
    let torn = &frame[..frame.len() - 7];
    let mut bytes = ok(std::fs::read(&seg));
    bytes.extend_from_slice(torn);
    ok(std::fs::write(&seg, &bytes));

    let before = snapshot(&dir);
    let (out, v) = verify(&dir, &[]);
    assert!(out.status.success(), "a torn tail is normal after a crash: {v}");
    assert_eq!(v["journal_torn_tail_bytes"], torn.len() as u64);
    assert_eq!(
        (v["journal_seq_last"].as_u64(), v["replay_state_hash"].clone()),
        (Some(seq_last), state_hash.clone())
    );
    assert!(before == snapshot(&dir), "verify cut nothing");

    let d = dir.to_string_lossy().to_string();
    let (out, r) = demo(&["--data-dir", &d, "--transfers", "1000", "--accounts", "200"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let r = r.unwrap_or_default();
    assert_eq!(r["journal"]["truncated_bytes"], torn.len() as u64, "exactly the torn bytes were cut");
    assert_eq!(r["resumed_from_seq"].as_u64(), Some(seq_last), "no entry before the tear was lost");
    for c in r["centers"].as_array().cloned().unwrap_or_default() {
        assert_eq!(c["seq_resumed_from"].as_u64(), Some(seq_last), "{c}");
    }
    assert_eq!((r["consistent"].clone(), r["conserved"].clone()), (Value::Bool(true), Value::Bool(true)));
    assert!(
        ok(std::fs::read(&seg)).starts_with(&bytes[..clean_len as usize]),
        "the bytes before the tear stayed"
    );
    let (out, v) = verify(&dir, &[]);
    assert!(out.status.success(), "{v}");
    assert_eq!(v["replay_state_hash"], r["centers"][0]["state_hash"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Bytes missing from the end of durable data (its last mark and part of the frame before it)
/// look like a torn tail, but the centers' checkpoints say those entries were applied: refused,
/// nothing cut.
#[test]
fn bytes_missing_from_durable_data_are_refused_not_cut() {
    let dir = tempdir("short");
    clean_run(&dir, "5000", &[]);
    let seg = last_segment(&dir);
    let cut = len(&seg) - (codec::MARK_FRAME_BYTES as u64 + 40);
    ok(ok(std::fs::OpenOptions::new().write(true).open(&seg)).set_len(cut));
    refused_and_untouched(&dir, &[], &["journal lost durable entries", "nothing was cut"], None);
    assert_eq!(len(&seg), cut);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_mirror_repairs_a_flipped_frame_and_both_copies_flipped_are_refused() {
    let dir = tempdir("mirror");
    let mirror = tempdir("mirror-copy");
    let m = mirror.to_string_lossy().to_string();
    clean_run(&dir, "20000", &["--journal-mirror", &m]);
    let (seg, mseg) = (last_segment(&dir), segments(&mirror).pop().unwrap_or_default());
    assert_eq!(ok(std::fs::read(&seg)), ok(std::fs::read(&mseg)), "the two copies are identical");
    let at = len(&seg) / 2;
    flip(&seg, at);

    // Read-only: verify replays from the whole copy and reports one frame to repair.
    let before = (snapshot(&dir), snapshot(&mirror));
    let (out, v) = verify(&dir, &["--journal-mirror", &m]);
    assert!(out.status.success(), "{v}");
    assert_eq!(v["journal_repairable_frames"], 1);
    assert!(before == (snapshot(&dir), snapshot(&mirror)), "verify changed nothing");
    // Without the mirror the same directory is refused.
    verify_refuses_and_changes_nothing(&dir, &[], "journal corrupt");

    let d = dir.to_string_lossy().to_string();
    let (out, r) =
        demo(&["--data-dir", &d, "--journal-mirror", &m, "--transfers", "1000", "--accounts", "200"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let r = r.unwrap_or_default();
    assert_eq!(r["journal"]["repaired_frames"], 1, "{}", r["journal"]);
    let repair = r["journal"]["repairs"][0].as_str().unwrap_or_default().to_string();
    assert!(repair.contains(&seg.display().to_string()) && repair.contains("checksum"), "{repair}");
    assert!(named_offset(&repair) <= at);
    assert_eq!(r["journal"]["truncated_bytes"], 0);
    assert_eq!((r["consistent"].clone(), r["conserved"].clone()), (Value::Bool(true), Value::Bool(true)));
    assert_eq!(ok(std::fs::read(&seg)), ok(std::fs::read(&mseg)), "identical again");
    let (out, v) = verify(&dir, &["--journal-mirror", &m]);
    assert!(out.status.success() && v["journal_repairable_frames"] == 0, "{v}");

    // The same frame damaged in both copies: refused, nothing changed in either.
    let at = len(&seg) / 3;
    flip(&seg, at);
    flip(&mseg, at + 1);
    refused_and_untouched(
        &dir,
        &["--journal-mirror", &m],
        &["journal corrupt", "Both copies"],
        Some(&mirror),
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&mirror);
}
