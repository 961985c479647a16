//! The audit trail on a real cluster pod (etcd, `sluice serve --join --audit-table`): each
//! control-plane change made through the CLI and the HTTP API — table create, principal
//! create, grant, revoke, key rotation, optimize, vacuum, principal delete, table drop, a pod
//! drain through etcd, and a `keys rotate-kek` while the pod is stopped — is one structured
//! log line and one row of the audit Delta table, read back here with who, what and target.

use std::collections::HashSet;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;

use crate::cluster_harness::Etcd;
use crate::harness::{read_delta, Server, CLIENT_ID, CLUSTER_KEK};
use crate::rows::rows_as_json;

const AUDIT: &str = "main.sluice.audit";

async fn start_pod(root: &Path, join: &str, extra: &[&str]) -> Server {
    let warehouse = root.join("warehouse");
    let mut args = vec![
        "--join",
        join,
        "--pod-id",
        "pod-a",
        "--warehouse",
        warehouse.to_str().expect("utf-8"),
        "--audit-table",
        AUDIT,
        "--drain-grace",
        "1s",
    ];
    args.extend_from_slice(extra);
    Server::start_with_args(&root.join("pod-a"), "200ms", &args).await
}

fn ok(out: std::process::Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// (who, action, target, pod) of every audit row.
async fn audit_rows(location: &str) -> Vec<(String, String, String, String)> {
    let rows = rows_as_json(&read_delta(location).await);
    let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
    rows.iter()
        .map(|r| {
            (
                text(&r["who"]),
                text(&r["action"]),
                text(&r["target"]),
                text(&r["pod"]),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_control_plane_change_is_a_row_of_the_audit_table() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    let etcd = Etcd::start(&root.join("etcd")).await;
    let join = etcd.join.clone();
    let mut pod = start_pod(root, &join, &[]).await;

    let table = "main.t.events";
    pod.create_table(table, "id BIGINT NOT NULL");
    ok(pod.cli(&["principal", "create", "bob"]), "principal create");
    ok(
        pod.cli(&["grant", "MODIFY", "ON", "TABLE", table, "TO", "bob"]),
        "grant",
    );
    ok(
        pod.cli(&["revoke", "MODIFY", "ON", "TABLE", table, "FROM", "bob"]),
        "revoke",
    );
    let rotated = ok(pod.cli(&["keys", "rotate"]), "keys rotate");
    let kid = rotated
        .split_whitespace()
        .nth(3)
        .expect("the new key id")
        .trim_end_matches(';')
        .to_string();
    ok(pod.cli(&["table", "optimize", table]), "optimize");
    ok(pod.cli(&["table", "vacuum", table]), "vacuum");
    ok(pod.cli(&["principal", "delete", "bob"]), "principal delete");
    ok(pod.cli(&["table", "drop", table]), "table drop");
    let location = pod.table_info(AUDIT).await["storage_location"]
        .as_str()
        .expect("the audit table was created on first use")
        .to_string();

    // A drain through etcd: the CLI names the operator, the pod records it and commits it
    // with its last flush.
    let drain = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["pod", "drain", "pod-a", "--join", &join, "--timeout", "60s"])
        .env("USER", "drainer")
        .output()
        .expect("run pod drain");
    ok(drain, "pod drain");
    assert!(pod.wait_exit(Duration::from_secs(30)), "the pod left");

    // rotate-kek while the pod is stopped parks its event in etcd; the next start appends it.
    let new_kek = root.join("new.kek");
    std::fs::write(&new_kek, STANDARD.encode([7u8; 32])).expect("new kek");
    let rotate = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["keys", "rotate-kek", "--join", &join, "--new-key-file"])
        .arg(&new_kek)
        .env("SLUICE_SECRETS_KEY", CLUSTER_KEK)
        .env("USER", "keykeeper")
        .output()
        .expect("run rotate-kek");
    let rotate_log = format!(
        "{}{}",
        ok(rotate.clone(), "rotate-kek"),
        String::from_utf8_lossy(&rotate.stderr)
    );
    assert!(rotate_log.contains("keys.rotate_kek"), "{rotate_log}");
    let pod = start_pod(
        root,
        &join,
        &["--secrets-key-file", new_kek.to_str().expect("utf-8")],
    )
    .await;

    let expected = [
        (CLIENT_ID, "table.create", table),
        (CLIENT_ID, "principal.create", "bob"),
        (CLIENT_ID, "grant", table),
        (CLIENT_ID, "revoke", table),
        (CLIENT_ID, "keys.rotate", kid.as_str()),
        (CLIENT_ID, "table.optimize", table),
        (CLIENT_ID, "table.vacuum", table),
        (CLIENT_ID, "principal.delete", "bob"),
        (CLIENT_ID, "table.drop", table),
    ];
    let deadline = Instant::now() + Duration::from_secs(30);
    let rows = loop {
        let rows = audit_rows(&location).await;
        if rows.len() >= expected.len() + 2 || Instant::now() > deadline {
            break rows;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let seen: HashSet<(&str, &str, &str, &str)> = rows
        .iter()
        .map(|(w, a, t, p)| (w.as_str(), a.as_str(), t.as_str(), p.as_str()))
        .collect();
    for (who, action, target) in expected {
        assert!(
            seen.contains(&(who, action, target, "pod-a")),
            "no audit row ({who}, {action}, {target}, pod-a) in {rows:#?}"
        );
    }
    assert!(
        rows.iter().any(|(w, a, t, p)| w.starts_with("drainer@")
            && a == "pod.drain"
            && t == "pod-a"
            && p == "pod-a"),
        "no drain row in {rows:#?}"
    );
    assert!(
        rows.iter().any(|(w, a, _, p)| w.starts_with("keykeeper@")
            && a == "keys.rotate_kek"
            && p == "cli"),
        "no rotate-kek row in {rows:#?}"
    );
    assert_eq!(
        rows.len(),
        expected.len() + 2,
        "one row per change: {rows:#?}"
    );
    // The same changes as structured log lines.
    let log = pod.log();
    for action in ["table.create", "grant", "principal.delete", "pod.drain"] {
        assert!(
            log.contains(&format!("action=\"{action}\"")),
            "no log line for {action}"
        );
    }
}
