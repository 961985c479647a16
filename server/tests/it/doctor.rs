//! `sluice doctor` on a temporary data directory and on S3 (moto's `moto_server`): it
//! prints one row per check with a pass/WARN/FAIL result, cleans up its probe files and
//! objects, and its exit code says whether a check failed. A warehouse it cannot reach
//! (no answer, no such bucket) is one failed row with the store's message, within a
//! bounded time. A catalog file readable by others is a failed `data dir modes` row.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::harness::free_port;
use crate::moto::{s3_args, Moto, BUCKET};

const CHECKS: [&str; 10] = [
    "WAL free space",
    "WAL O_DIRECT writes",
    "WAL fdatasync p99 (2300 B writes)",
    "WAL fdatasync IOPS",
    "WAL sequential write",
    "warehouse reachable",
    "warehouse PUT 16 MiB objects",
    "warehouse GET 16 MiB objects",
    "warehouse put-if-absent p99",
    "data dir modes",
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

/// `sluice doctor` with `args`: its table, whether it exited 0, how long it took.
fn doctor(data_dir: &std::path::Path, args: &[String]) -> (String, bool, Duration) {
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["doctor", "--quick", "--data-dir"])
        .arg(data_dir)
        .args(args)
        .output()
        .expect("run sluice doctor");
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    (table, out.status.success(), started.elapsed())
}

/// The row of `check` (the table's line that starts with it).
fn row<'a>(table: &'a str, check: &str) -> &'a str {
    table
        .lines()
        .find(|l| l.starts_with(check))
        .unwrap_or_else(|| panic!("no row for {check}:\n{table}"))
}

#[test]
fn doctor_fails_fast_with_a_readable_row_when_the_s3_endpoint_does_not_answer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let endpoint = format!("http://127.0.0.1:{}", free_port());
    // Nothing listens there: the same flags as for moto, no server.
    let args = s3_args("s3://bucket/x", &endpoint);
    let (table, ok, took) = doctor(dir.path(), &args);
    assert!(!ok, "{table}");
    let reach = row(&table, "warehouse reachable");
    assert!(reach.ends_with("FAIL"), "{table}");
    assert!(reach.contains("error sending request"), "{reach}");
    assert!(
        !table.contains("warehouse PUT"),
        "probes ran anyway:\n{table}"
    );
    assert!(took < Duration::from_secs(60), "took {took:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn doctor_probes_a_moto_bucket_sees_put_if_absent_refused_and_leaves_nothing_behind() {
    let moto = Moto::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (table, ok, _) = doctor(
        dir.path(),
        &moto.warehouse_args(&format!("s3://{BUCKET}/doctor")),
    );
    for check in &CHECKS[4..8] {
        let line = row(&table, check);
        assert!(!line.contains("error:"), "a probe could not run: {line}");
        let result = line.split_whitespace().last().unwrap_or_default();
        assert!(["pass", "WARN", "FAIL"].contains(&result), "{line}");
    }
    // Only a refused second PUT reports latencies; an accepted one reads
    // "a second PUT of the same object succeeded".
    let conditional = row(&table, "warehouse put-if-absent p99");
    assert!(conditional.contains(" ms (p50 "), "{conditional}");
    assert!(
        row(&table, "warehouse reachable").ends_with("pass"),
        "{table}"
    );
    assert_eq!(ok, !table.lines().any(|l| l.ends_with("FAIL")), "{table}");
    let left = moto.list("").await;
    assert!(
        left.is_empty(),
        "probe objects left in the bucket: {left:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn doctor_fails_with_a_readable_row_when_the_bucket_does_not_exist() {
    let moto = Moto::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (table, ok, took) = doctor(dir.path(), &moto.warehouse_args("s3://no-such-bucket/x"));
    assert!(!ok, "{table}");
    let reach = row(&table, "warehouse reachable");
    assert!(reach.ends_with("FAIL"), "{table}");
    assert!(
        reach.contains("404 Not Found NoSuchBucket: The specified bucket does not exist"),
        "{reach}"
    );
    assert!(took < Duration::from_secs(60), "took {took:?}");
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

#[test]
fn doctor_fails_a_catalog_readable_by_others() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let chmod = |path: &std::path::Path, mode| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod")
    };
    chmod(dir.path(), 0o700);
    let catalog = dir.path().join("catalog.json");
    std::fs::write(&catalog, b"{}").expect("write");
    chmod(&catalog, 0o644);
    let (table, ok, _) = doctor(dir.path(), &[]);
    let modes = row(&table, "data dir modes");
    assert!(modes.ends_with("FAIL"), "{modes}");
    assert!(modes.contains("catalog.json is 0644"), "{modes}");
    assert!(!ok, "{table}");
}
