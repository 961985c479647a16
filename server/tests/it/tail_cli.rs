//! `sluice tail` against a real `sluice serve`: started before any row exists, it prints
//! exactly the rows pushed afterwards as JSON lines once they are visible in Delta;
//! `--from-start` prints the rows already there.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::harness::{Server, CLIENT_ID, CLIENT_SECRET};

fn tail(server: &Server, args: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("tail")
        .args(args)
        .env("SLUICE_SERVER", &server.url)
        .env("SLUICE_CLIENT_ID", CLIENT_ID)
        .env("SLUICE_CLIENT_SECRET", CLIENT_SECRET)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sluice tail")
}

/// Waits for `child` to exit on its own; returns its stdout.
fn finish(mut child: std::process::Child) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            let mut out = String::new();
            let mut err = String::new();
            child
                .stdout
                .take()
                .expect("stdout")
                .read_to_string(&mut out)
                .expect("read");
            child
                .stderr
                .take()
                .expect("stderr")
                .read_to_string(&mut err)
                .expect("read");
            assert!(status.success(), "tail failed: {err}");
            return out;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("sluice tail did not print the rows in time");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn ids(out: &str) -> Vec<i64> {
    let mut ids: Vec<i64> = out
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("a JSON line");
            assert_eq!(v["note"], format!("n{}", v["id"]), "{l}");
            v["id"].as_i64().expect("id")
        })
        .collect();
    ids.sort_unstable();
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_prints_new_rows_once_visible_and_from_start_prints_the_old_ones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), "200ms").await;
    let t = "main.tail.t";
    server.create_table(t, "id BIGINT NOT NULL, note STRING");
    let follower = tail(&server, &[t, "--max-rows", "50", "--interval", "100ms"]);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let stream = sluice_sdk::Client::builder(&server.url)
        .credentials(CLIENT_ID, CLIENT_SECRET)
        .build()
        .expect("client")
        .stream(t)
        .open()
        .await
        .expect("open");
    for id in 0..50 {
        let rec = serde_json::json!({"id": id, "note": format!("n{id}")}).to_string();
        stream.send(rec).await.expect("send");
    }
    stream.close().await.expect("close");
    let out = tokio::task::spawn_blocking(move || finish(follower))
        .await
        .expect("join");
    assert_eq!(ids(&out), (0..50).collect::<Vec<i64>>(), "{out}");
    let out = tokio::task::spawn_blocking({
        let child = tail(&server, &[t, "--from-start", "--max-rows", "50"]);
        move || finish(child)
    })
    .await
    .expect("join");
    assert_eq!(ids(&out), (0..50).collect::<Vec<i64>>(), "{out}");
}
