//! `sluice doctor` on a temporary data directory: it prints one row per check with a
//! pass/WARN/FAIL result, cleans up its probe files, and its exit code says whether a
//! check failed.

use std::process::Command;

const CHECKS: [&str; 7] = [
    "WAL free space",
    "WAL fdatasync p99 (2300 B writes)",
    "WAL fdatasync IOPS",
    "WAL sequential write",
    "warehouse PUT 16 MiB objects",
    "warehouse GET 16 MiB objects",
    "warehouse put-if-absent p99",
];

#[test]
fn doctor_prints_every_check_and_exits_non_zero_exactly_when_one_fails() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["doctor", "--quick", "--data-dir"])
        .arg(dir.path())
        .output()
        .expect("run sluice doctor");
    let table = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(table.starts_with("check"), "{table}\n{stderr}");
    for check in CHECKS {
        let row = table
            .lines()
            .find(|l| l.starts_with(check))
            .unwrap_or_else(|| panic!("no row for {check}:\n{table}"));
        let result = row.split_whitespace().last().unwrap_or_default();
        assert!(
            ["pass", "WARN", "FAIL"].contains(&result),
            "row without a result: {row}"
        );
        assert!(!row.contains("error:"), "a probe could not run: {row}");
    }
    let failed = table.lines().any(|l| l.ends_with("FAIL"));
    assert_eq!(out.status.success(), !failed, "{table}\n{stderr}");
    assert!(table.contains("passed,") && table.contains("failed"));

    let leftovers: Vec<_> = walk(dir.path())
        .into_iter()
        .filter(|p| p.to_string_lossy().contains("doctor"))
        .collect();
    assert!(leftovers.is_empty(), "probe files left: {leftovers:?}");
}

#[test]
fn doctor_fails_when_the_warehouse_cannot_be_used() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args([
            "doctor",
            "--quick",
            "--warehouse",
            "s3://bucket/x",
            "--data-dir",
        ])
        .arg(dir.path())
        .output()
        .expect("run sluice doctor");
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{table}");
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("warehouse") && l.ends_with("FAIL")),
        "{table}"
    );
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        }
        out.push(path);
    }
    out
}
