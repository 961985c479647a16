//! `sluice push` against a real `sluice serve`: a JSON-lines file, a Parquet file and an
//! Avro file (written by Python `fastavro`) read back exactly; a large JSON-lines file
//! (`SLUICE_TEST_PUSH_BYTES`, default 20 MB) read back by count and id checksum; the
//! progress display: an `indicatif` bar on a terminal (a pty from util-linux `script`), a
//! plain line every 5 s otherwise; a bad record exits 2 naming its record number; a `--persistent` push
//! SIGKILLed half-way and run again writes every record exactly once (Delta read by
//! Python `deltalake` + `polars`, and by the deltalake crate).

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};

use crate::harness::{wait_for_rows, Server, CLIENT_ID, CLIENT_SECRET};
use crate::moto::venv_bin;
use crate::persistent_raw::assert_each_once;
use crate::sdk_client::assert_exactly;

const COLUMNS: &str = "id BIGINT NOT NULL, note STRING";

fn push_command(server: &Server, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sluice"));
    c.arg("push")
        .args(args)
        .env("SLUICE_SERVER", &server.url)
        .env("SLUICE_CLIENT_ID", CLIENT_ID)
        .env("SLUICE_CLIENT_SECRET", CLIENT_SECRET);
    c
}

fn push(server: &Server, args: &[&str]) -> Output {
    push_command(server, args)
        .output()
        .expect("run sluice push")
}

/// Runs `sluice push`, asserts it succeeded and returns its standard output.
fn push_ok(server: &Server, args: &[&str]) -> String {
    let out = push(server, args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A pod (flush interval `flush`) in a fresh directory with the table `t` of [`COLUMNS`]:
/// the directory, the pod and the table's storage location.
async fn pod_with_table(t: &str, flush: &str) -> (tempfile::TempDir, Server, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), flush).await;
    let location = server.create_table_at(t, COLUMNS).await;
    (dir, server, location)
}

fn write_jsonl(path: &Path, ids: std::ops::Range<i64>) {
    let mut text = String::new();
    for id in ids {
        text.push_str(&format!("{{\"id\": {id}, \"note\": \"n{id}\"}}\n"));
    }
    std::fs::write(path, text).expect("write jsonl");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_of_a_jsonl_file_is_read_back_exactly() {
    let t = "main.push.jsonl";
    let (dir, server, location) = pod_with_table(t, "200ms").await;
    let file = dir.path().join("in.jsonl");
    write_jsonl(&file, 0..20_000);
    let stdout = push_ok(&server, &[t, file.to_str().expect("path")]);
    assert!(stdout.contains("pushed 20000 records"), "{stdout}");
    wait_for_rows(&location, 20_000, Duration::from_secs(30)).await;
    assert_exactly(&location, 0..20_000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_of_a_parquet_file_is_read_back_exactly() {
    let t = "main.push.parquet";
    let (dir, server, location) = pod_with_table(t, "200ms").await;
    let file = dir.path().join("in.parquet");
    let n = 10_000i64;
    let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(0..n));
    let notes: ArrayRef = Arc::new(StringArray::from_iter_values(
        (0..n).map(|i| format!("n{i}")),
    ));
    let batch = RecordBatch::try_from_iter([("id", ids), ("note", notes)]).expect("batch");
    let mut writer = parquet::arrow::ArrowWriter::try_new(
        std::fs::File::create(&file).expect("create"),
        batch.schema(),
        None,
    )
    .expect("writer");
    // Two row groups' worth of batches.
    writer.write(&batch.slice(0, 4_000)).expect("write");
    writer.flush().expect("flush");
    writer.write(&batch.slice(4_000, 6_000)).expect("write");
    writer.close().expect("close");
    let out = push(&server, &[t, file.to_str().expect("path")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_for_rows(&location, n as usize, Duration::from_secs(30)).await;
    assert_exactly(&location, 0..n).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_exits_2_naming_the_first_bad_record() {
    let t = "main.push.bad";
    let (dir, server, _) = pod_with_table(t, "200ms").await;
    // Refused by the server: record 3 has a string id.
    let file = dir.path().join("schema.jsonl");
    std::fs::write(
        &file,
        "{\"id\": 1}\n{\"id\": 2}\n{\"id\": \"three\"}\n{\"id\": 4}\n",
    )
    .expect("write");
    let out = push(&server, &[t, file.to_str().expect("path")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("record 3: "), "{stderr}");
    assert!(stderr.contains("`id`"), "{stderr}");
    // Refused by the reader: record 2 is not JSON.
    let file = dir.path().join("syntax.jsonl");
    std::fs::write(&file, "{\"id\": 1}\n{\"id\": \n").expect("write");
    let out = push(&server, &[t, file.to_str().expect("path")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("record 2: not JSON"), "{stderr}");
    // An extension that says nothing: exit 1 naming --format.
    let file = dir.path().join("data.txt");
    std::fs::write(&file, "{\"id\": 1}\n").expect("write");
    let out = push(&server, &[t, file.to_str().expect("path")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("--format"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persistent_push_killed_half_way_and_run_again_writes_nothing_twice() {
    let t = "main.push.resume";
    let (dir, mut server, location) = pod_with_table(t, "200ms").await;
    let n = 200_000i64;
    let file = dir.path().join("big.jsonl");
    write_jsonl(&file, 0..n);
    let path = file.to_str().expect("path");
    let state = dir.path().join("big.jsonl.sluice-push.json");
    let mut child = push_command(&server, &[t, path, "--persistent"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn push");
    // Kill it once some records are acked and saved, well before the end.
    let deadline = Instant::now() + Duration::from_secs(60);
    let watermark = loop {
        let saved = std::fs::read(&state)
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|v| v["watermark"].as_i64());
        if let Some(w) = saved.filter(|w| *w > 1_000) {
            break w;
        }
        assert!(Instant::now() < deadline, "no progress saved");
        assert!(
            child.try_wait().expect("wait").is_none(),
            "push ended before the kill"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    child.kill().expect("SIGKILL the push");
    child.wait().expect("reap");
    assert!(watermark < n - 1, "killed half-way ({watermark})");
    let out = push(&server, &[t, path, "--persistent"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("already durable (resumed)"), "{stdout}");
    server.terminate();
    assert_each_once(&location, n);
    assert_exactly(&location, 0..n).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_of_a_csv_file_from_standard_input_is_read_back_exactly() {
    let t = "main.push.csv";
    let (_dir, server, location) = pod_with_table(t, "200ms").await;
    let mut csv = String::from("id,note\n");
    for id in 0..5_000 {
        csv.push_str(&format!("{id},n{id}\n"));
    }
    let mut child = push_command(&server, &[t, "-", "--format", "csv"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn push");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(csv.as_bytes()).expect("write csv");
    }
    let out = child.wait_with_output().expect("push");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_for_rows(&location, 5_000, Duration::from_secs(30)).await;
    assert_exactly(&location, 0..5_000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_of_an_avro_file_written_by_fastavro_is_read_back_exactly() {
    let t = "main.push.avro";
    let (dir, server, location) = pod_with_table(t, "200ms").await;
    let file = dir.path().join("in.avro");
    let script = r#"
import sys, fastavro
schema = {"type": "record", "name": "reading", "fields": [
    {"name": "id", "type": "long"},
    {"name": "note", "type": ["null", "string"]}]}
rows = ({"id": i, "note": "n%d" % i} for i in range(8000))
with open(sys.argv[1], "wb") as f:
    fastavro.writer(f, fastavro.parse_schema(schema), rows, codec="deflate", sync_interval=4096)
"#;
    let status = Command::new(venv_bin("python", "SLUICE_PYTHON"))
        .args(["-c", script])
        .arg(&file)
        .status()
        .expect("run fastavro");
    assert!(status.success(), "fastavro wrote the file");
    let stdout = push_ok(&server, &[t, file.to_str().expect("path")]);
    assert!(stdout.contains("pushed 8000 records"), "{stdout}");
    wait_for_rows(&location, 8_000, Duration::from_secs(30)).await;
    assert_exactly(&location, 0..8_000).await;
}

/// `SLUICE_TEST_PUSH_BYTES` (default 20 MB; the lead's run: 1 GB with a release build).
fn push_test_bytes() -> u64 {
    std::env::var("SLUICE_TEST_PUSH_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000_000)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_of_a_large_jsonl_file_is_read_back_by_count_and_id_checksum() {
    use std::io::Write;
    let t = "main.push.large";
    let (dir, mut server, location) = pod_with_table(t, "1s").await;
    let file = dir.path().join("large.jsonl");
    let budget = push_test_bytes();
    let pad = "x".repeat(160);
    let mut out =
        std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&file).expect("create"));
    let (mut n, mut written) = (0i64, 0u64);
    while written < budget {
        let line = format!("{{\"id\": {n}, \"note\": \"n{n}-{pad}\"}}\n");
        out.write_all(line.as_bytes()).expect("write");
        written += line.len() as u64;
        n += 1;
    }
    out.flush().expect("flush");
    drop(out);
    let started = Instant::now();
    let stdout = push_ok(&server, &[t, file.to_str().expect("path")]);
    assert!(stdout.contains(&format!("pushed {n} records")), "{stdout}");
    eprintln!(
        "pushed {written} bytes, {n} records in {:?}: {stdout}",
        started.elapsed()
    );
    wait_for_rows(&location, n as usize, Duration::from_secs(120)).await;
    server.terminate();
    assert_each_once(&location, n);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_on_a_terminal_draws_a_progress_bar_with_rates_acks_and_eta() {
    let t = "main.push.tty";
    let (dir, server, location) = pod_with_table(t, "200ms").await;
    let file = dir.path().join("in.jsonl");
    write_jsonl(&file, 0..150_000);
    let command = format!(
        "{} push {t} {}",
        env!("CARGO_BIN_EXE_sluice"),
        file.to_str().expect("path")
    );
    let out = Command::new("script")
        .args(["-qefc", &command, "/dev/null"])
        .env("SLUICE_SERVER", &server.url)
        .env("SLUICE_CLIENT_ID", CLIENT_ID)
        .env("SLUICE_CLIENT_SECRET", CLIENT_SECRET)
        .output()
        .expect("util-linux `script` runs push on a pty");
    let tty = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{tty}");
    let bar = tty
        .split(['\r', '\n'])
        .find(|l| l.contains("records sent") && l.contains("ETA"))
        .unwrap_or_else(|| panic!("no progress bar drawn: {tty:?}"));
    assert!(bar.contains("[=") && bar.contains('%'), "{bar:?}");
    assert!(
        bar.contains("acked") && bar.contains("records/s") && bar.contains("MB/s"),
        "{bar:?}"
    );
    assert!(tty.contains("pushed 150000 records"), "{tty:?}");
    wait_for_rows(&location, 150_000, Duration::from_secs(30)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_without_a_terminal_prints_plain_progress_lines() {
    use std::io::Write;
    let t = "main.push.plain";
    let (_dir, server, _) = pod_with_table(t, "200ms").await;
    let mut child = push_command(&server, &[t, "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn push");
    let mut stdin = child.stdin.take().expect("stdin");
    // A slow producer: the first records, a pause past the 5 s period, then the rest.
    for id in 0..10 {
        writeln!(stdin, "{{\"id\": {id}, \"note\": \"n{id}\"}}").expect("write");
    }
    stdin.flush().expect("flush");
    std::thread::sleep(Duration::from_millis(5_500));
    for id in 10..20 {
        writeln!(stdin, "{{\"id\": {id}, \"note\": \"n{id}\"}}").expect("write");
    }
    drop(stdin);
    let out = child.wait_with_output().expect("push");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.contains("records sent"))
        .unwrap_or_else(|| panic!("no plain progress line: {stderr:?}"));
    assert!(
        line.contains("acked") && line.contains("records/s"),
        "{line}"
    );
    assert!(
        !stderr.contains('\x1b') && !stderr.contains('\r'),
        "{stderr:?}"
    );
}
