//! `sluice cluster up --pods 2` as a user runs it: one real process that starts etcd, two
//! pods and a router on free loopback ports; producers on the official Rust SDK push
//! through the router; every acked record lands in the Delta table; SIGTERM stops the whole
//! cluster, pods drained first, and leaves no process behind.
//!
//! The command runs in a process group of its own, so "no process behind" is checked as
//! "no process of that group is left" (its etcd, pods and router inherit the group), and a
//! failing test still kills everything it started.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use arrow_array::{Array, Int64Array};
use databricks_zerobus_ingest_sdk::JsonString;

use crate::cluster_harness::wait_for_pods;
use crate::harness::{
    admin_json_stream, cli_at, free_port, read_delta, sdk_at, wait_for_rows, wait_http_ok,
    CLIENT_ID, CLIENT_SECRET,
};
use crate::raw::token;

const PODS: usize = 2;
const STREAMS: i64 = 4;
const PER_STREAM: i64 = 250;

/// A port whose next port is free too (etcd's peer port, pod i's port is first + i).
fn free_port_pair() -> u16 {
    for _ in 0..100 {
        let first = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = first.local_addr().expect("addr").port();
        if port < u16::MAX && std::net::TcpListener::bind(("127.0.0.1", port + 1)).is_ok() {
            return port;
        }
    }
    panic!("no two consecutive free ports on loopback");
}

/// Pid, state and process group of every process, from `/proc/*/stat`.
fn processes() -> Vec<(i32, char, i32, i32)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid pgrp …`; comm may hold spaces and parentheses.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let mut fields = rest.split_whitespace();
        let state = fields.next().and_then(|s| s.chars().next()).unwrap_or('?');
        let ppid = fields.next().and_then(|s| s.parse().ok()).unwrap_or(0);
        let pgrp = fields.next().and_then(|s| s.parse().ok()).unwrap_or(0);
        found.push((pid, state, ppid, pgrp));
    }
    found
}

/// The arguments of `pid`, empty once it is gone.
fn argv(pid: i32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|c| *c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The running `sluice cluster up`; kills its whole process group on drop.
struct ClusterUp {
    child: Child,
    dir: std::path::PathBuf,
}

impl ClusterUp {
    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Every process of the command's group but the command itself.
    fn group_members(&self) -> Vec<(i32, char, Vec<String>)> {
        processes()
            .into_iter()
            .filter(|(pid, _, _, pgrp)| *pgrp == self.pid() && *pid != self.pid())
            .map(|(pid, state, _, _)| (pid, state, argv(pid)))
            .collect()
    }

    /// The command's own output and every log it writes.
    fn logs(&self) -> String {
        let mut all = format!(
            "== cluster up ==\n{}",
            std::fs::read_to_string(self.dir.join("up.log")).unwrap_or_default()
        );
        if let Ok(entries) = std::fs::read_dir(self.dir.join("cluster/logs")) {
            for entry in entries.flatten() {
                let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(40).collect();
                all.push_str(&format!(
                    "\n== {} (last lines) ==\n",
                    entry.file_name().to_string_lossy()
                ));
                for line in tail.into_iter().rev() {
                    all.push_str(line);
                    all.push('\n');
                }
            }
        }
        all
    }
}

impl Drop for ClusterUp {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the process group this test created; no memory is touched.
        unsafe { libc::kill(-self.pid(), libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

/// The table's storage location, asked through `url` (the router).
async fn storage_location(url: &str, table: &str) -> String {
    let admin = token(url, CLIENT_ID, CLIENT_SECRET, &[]).await;
    let info: serde_json::Value = reqwest::Client::new()
        .get(format!("{url}/api/2.1/unity-catalog/tables/{table}"))
        .bearer_auth(admin)
        .send()
        .await
        .expect("get table")
        .json()
        .await
        .expect("table json");
    info["storage_location"]
        .as_str()
        .expect("storage_location")
        .to_string()
}

/// Every `id` in the Delta table at `location`, sorted.
async fn ids_in(location: &str) -> Vec<i64> {
    let mut ids = Vec::new();
    for batch in read_delta(location).await {
        let col = batch.column_by_name("id").expect("id column");
        let col = col
            .as_any()
            .downcast_ref::<Int64Array>()
            .expect("int64 ids");
        ids.extend((0..col.len()).map(|i| col.value(i)));
    }
    ids.sort_unstable();
    ids
}

/// Starts `sluice cluster up` in `root/cluster` in a process group of its own.
fn start(root: &Path, etcd_port: u16, first_pod_port: u16, router_port: u16) -> ClusterUp {
    use std::os::unix::process::CommandExt;
    let log = std::fs::File::create(root.join("up.log")).expect("up log");
    let child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["cluster", "up", "--pods", &PODS.to_string(), "--dir"])
        .arg(root.join("cluster"))
        .args(["--etcd-port", &etcd_port.to_string()])
        .args(["--first-pod-port", &first_pod_port.to_string()])
        .args(["--router-listen", &format!("127.0.0.1:{router_port}")])
        .args([
            "--bootstrap-principal",
            &format!("{CLIENT_ID}:{CLIENT_SECRET}"),
        ])
        .env("RUST_LOG", "info")
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .stdin(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("spawn sluice cluster up");
    ClusterUp {
        child,
        dir: root.to_path_buf(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_up_with_two_pods_serves_sdk_producers_through_its_router_and_sigterm_leaves_no_process(
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let etcd_port = free_port_pair();
    let first_pod_port = free_port_pair();
    let router_port = free_port();
    let mut up = start(dir.path(), etcd_port, first_pod_port, router_port);
    let router = format!("http://127.0.0.1:{router_port}");
    let join = format!("etcd://127.0.0.1:{etcd_port}");

    let up_log = dir.path().join("up.log");
    wait_http_ok(
        &format!("{router}/readyz"),
        "sluice cluster up (its router)",
        &mut up.child,
        &up_log,
        Duration::from_secs(60),
    )
    .await;
    wait_for_pods(&join, Duration::from_secs(60), "2 pods ready", |pods| {
        pods.len() == PODS && pods.iter().all(|p| p["state"] == "ready")
    })
    .await;
    let members = up.group_members();
    let count = |is: fn(&[String]) -> bool| members.iter().filter(|(_, _, argv)| is(argv)).count();
    let started = (
        count(|argv| argv.first().is_some_and(|a| a.ends_with("etcd"))),
        count(|argv| argv.get(1).is_some_and(|a| a == "serve")),
        count(|argv| argv.get(1).is_some_and(|a| a == "router")),
    );
    assert_eq!(
        (started, members.len()),
        ((1, PODS, 1), PODS + 2),
        "(etcd, pods, routers) under cluster up: {members:#?}"
    );

    // A table, created through the router, then producers on the official SDK.
    let table = "main.up.records";
    let out = cli_at(
        &router,
        &[
            "table",
            "create",
            table,
            "--columns",
            "id BIGINT NOT NULL, note STRING",
        ],
    );
    assert!(
        out.status.success(),
        "table create through the router: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        up.logs()
    );
    let location = storage_location(&router, table).await;
    let sdk = sdk_at(&router);
    for s in 0..STREAMS {
        let mut stream = admin_json_stream(&sdk, table).await;
        for id in s * PER_STREAM..(s + 1) * PER_STREAM {
            let record = serde_json::json!({"id": id, "note": format!("s{s}")}).to_string();
            stream
                .ingest_record_offset(JsonString(record))
                .await
                .expect("ingest");
        }
        stream.flush().await.expect("every record acked");
        stream.close().await.expect("close");
    }
    let total = (STREAMS * PER_STREAM) as usize;
    wait_for_rows(&location, total, Duration::from_secs(60)).await;
    assert_eq!(
        ids_in(&location).await,
        (0..STREAMS * PER_STREAM).collect::<Vec<_>>(),
        "every acked record, once"
    );

    // SIGTERM: pods drained, router and etcd stopped, the command exits 0.
    let stopped = Instant::now();
    // SAFETY: kill(2) on our own child's pid; no memory is touched.
    unsafe { libc::kill(up.pid(), libc::SIGTERM) };
    let status = loop {
        if let Some(status) = up.child.try_wait().expect("try_wait") {
            break status;
        }
        assert!(
            stopped.elapsed() < Duration::from_secs(90),
            "cluster up did not exit on SIGTERM:\n{}",
            up.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        status.success(),
        "cluster up exited with {status}:\n{}",
        up.logs()
    );
    let mut left = up.group_members();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !left.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        left = up.group_members();
    }
    assert!(
        left.is_empty(),
        "processes left after cluster up exited: {left:#?}"
    );
    for i in 0..PODS {
        let log = std::fs::read_to_string(dir.path().join(format!("cluster/logs/pod-{i}.log")))
            .unwrap_or_default();
        assert!(
            log.contains("memtables committed"),
            "pod-{i} did not stop gracefully:\n{}",
            up.logs()
        );
    }
    println!(
        "cluster up: {total} records through the router, stopped in {:.1?}",
        stopped.elapsed()
    );
    // Still every record after the stop.
    assert_eq!(ids_in(&location).await.len(), total);
}
