//! Every crate of the workspace opens with a `//! # Layout` paragraph (house style): this test
//! fails when one names a module that does not exist or misses one that does, so the code map a
//! reader starts from stays true.
//!
//! A module is *named* by a bullet of the Layout that starts with it (`* [`x`] — ...`, or a
//! command followed by its module: `` * `http-load` ([`http_load`]) ``); a module is *mentioned*
//! when it appears anywhere in the Layout in backticks. Every module the crate root declares
//! (`mod x;` / `pub mod x;`, tests aside) must be mentioned, and every bullet must start with a
//! module that exists (crates without modules are exempt from the second rule).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The workspace members, from the root `Cargo.toml`.
fn members(root: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(root.join("Cargo.toml")).unwrap_or_else(|e| panic!("{e}"));
    let start = text.find("members").unwrap_or_else(|| panic!("no members in Cargo.toml"));
    let list = &text[start..];
    let list = &list[list.find('[').unwrap_or(0) + 1..list.find(']').unwrap_or(0)];
    list.split(',').map(|m| m.trim().trim_matches('"').to_string()).filter(|m| !m.is_empty()).collect()
}

fn is_module_name(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// Backticked tokens of a line, in order (`[`x`]` and `` `x` `` alike).
fn ticked(line: &str) -> Vec<&str> {
    line.split('`').skip(1).step_by(2).collect()
}

/// `(declared modules, named by bullets, mentioned)` of a crate root.
fn layout(root_file: &Path) -> (BTreeSet<String>, Vec<String>, BTreeSet<String>) {
    let text = std::fs::read_to_string(root_file).unwrap_or_else(|e| panic!("{}: {e}", root_file.display()));
    let mut declared = BTreeSet::new();
    let mut test_next = false;
    for line in text.lines() {
        let l = line.trim();
        if l.starts_with("#[cfg(test)]") {
            test_next = true;
            continue;
        }
        let decl = l.strip_prefix("pub mod ").or_else(|| l.strip_prefix("mod "));
        if let Some(name) = decl.and_then(|d| d.strip_suffix(';')) {
            if !test_next {
                declared.insert(name.to_string());
            }
        }
        if !l.starts_with("#[") {
            test_next = false;
        }
    }
    let docs: Vec<&str> = text.lines().take_while(|l| l.starts_with("//!")).map(|l| &l[3..]).collect();
    let start = docs.iter().position(|l| l.trim() == "# Layout");
    let section: Vec<&str> = match start {
        Some(s) => docs[s + 1..].iter().take_while(|l| !l.trim_start().starts_with("# ")).copied().collect(),
        None => Vec::new(),
    };
    let mut named = Vec::new();
    let mut mentioned = BTreeSet::new();
    for line in &section {
        for t in ticked(line) {
            mentioned.insert(t.to_string());
        }
        if let Some(bullet) = line.trim_start().strip_prefix("* ") {
            if let Some(first) = ticked(bullet).into_iter().find(|t| is_module_name(t)) {
                named.push(first.to_string());
            }
        }
    }
    (declared, named, mentioned)
}

#[test]
fn every_crate_layout_names_its_modules_and_only_them() {
    let root = workspace();
    let mut problems = Vec::new();
    let mut checked = 0;
    for member in members(&root) {
        let src = root.join(&member).join("src");
        let root_file = ["lib.rs", "main.rs"].iter().map(|f| src.join(f)).find(|p| p.exists());
        let Some(root_file) = root_file else {
            problems.push(format!("{member}: no src/lib.rs or src/main.rs"));
            continue;
        };
        let text = std::fs::read_to_string(&root_file).unwrap_or_default();
        if !text.lines().take_while(|l| l.starts_with("//!")).any(|l| l.trim() == "//! # Layout") {
            problems.push(format!("{}: no `//! # Layout` paragraph", root_file.display()));
            continue;
        }
        let (declared, named, mentioned) = layout(&root_file);
        for m in &declared {
            if !mentioned.contains(m) {
                problems.push(format!("{}: module `{m}` is missing from its Layout", root_file.display()));
            }
        }
        if !declared.is_empty() {
            for n in &named {
                if !declared.contains(n) {
                    problems.push(format!(
                        "{}: its Layout names `{n}`, which is not a module",
                        root_file.display()
                    ));
                }
            }
        }
        checked += 1;
    }
    assert!(checked >= 9, "only {checked} crates were checked");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The checker itself: a Layout that names a module that does not exist, or misses one.
#[test]
fn the_layout_check_can_fail() {
    let dir = std::env::temp_dir().join(format!("rtgs-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let file = dir.join("lib.rs");
    let text = "//! # x\n//!\n//! # Layout\n//! * [`alpha`] — here.\n//! * [`gamma`] — gone.\n\npub mod alpha;\nmod beta;\n#[cfg(test)]\nmod tests;\n";
    std::fs::write(&file, text).unwrap_or_else(|e| panic!("{e}"));
    let (declared, named, mentioned) = layout(&file);
    assert_eq!(declared.into_iter().collect::<Vec<_>>(), vec!["alpha", "beta"], "tests are not counted");
    assert_eq!(named, vec!["alpha", "gamma"]);
    assert!(!mentioned.contains("beta"), "beta is declared but missing: the real test reports it");
    let _ = std::fs::remove_dir_all(&dir);
}
