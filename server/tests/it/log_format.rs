//! `--log-format json`: a real `sluice serve` writes every log line as one JSON object
//! (for log shippers) with the timestamp, the level, the target and the fields (the message among them); the
//! default stays text.

use crate::harness::Server;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_log_format_json_every_log_line_is_a_json_object_with_level_and_message() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start_with_args(dir.path(), "200ms", &["--log-format", "json"]).await;
    server.create_table("main.ops.logs", "id BIGINT NOT NULL");
    let log = server.log_without_panic();
    let lines: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(lines.len() >= 2, "{log}");
    let mut serving = None;
    let mut wal_opened = None;
    for line in &lines {
        let v: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}\n{log}"));
        assert!(v["timestamp"].is_string(), "{line}");
        assert!(
            ["TRACE", "DEBUG", "INFO", "WARN", "ERROR"]
                .contains(&v["level"].as_str().unwrap_or("")),
            "{line}"
        );
        // An event without a message (some of deltalake's) still has its fields.
        assert!(v["fields"].is_object(), "{line}");
        if v["fields"]["message"] == "write-ahead log opened" {
            wal_opened = Some(v.clone());
        }
        if v["fields"]["message"] == "sluice is serving gRPC and HTTP" {
            serving = Some(v);
        }
    }
    // The start-up line says how the WAL writes: O_DIRECT (the default) where the data
    // directory's file system takes it, as the WAL crate's own probe finds.
    let wal_opened = wal_opened.unwrap_or_else(|| panic!("no WAL line:\n{log}"));
    let takes_direct = sluice_wal::env::DirectFileSystem::probe(dir.path()).expect("probe");
    let expected = if takes_direct {
        "O_DIRECT"
    } else {
        "buffered: the file system refuses O_DIRECT"
    };
    assert_eq!(wal_opened["fields"]["writes"], expected, "{wal_opened}");
    let serving = serving.unwrap_or_else(|| panic!("no start-up line:\n{log}"));
    assert_eq!(
        serving["fields"]["addr"],
        format!("127.0.0.1:{}", server.port),
        "the event's fields are JSON fields: {serving}"
    );
    assert_eq!(serving["target"], "sluice_server::server");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_log_lines_are_text() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), "200ms").await;
    let log = server.log_without_panic();
    let line = log
        .lines()
        .find(|l| l.contains("sluice is serving gRPC and HTTP"))
        .unwrap_or_else(|| panic!("no start-up line:\n{log}"));
    assert!(
        serde_json::from_str::<serde_json::Value>(line).is_err(),
        "{line}"
    );
    assert!(line.contains(" INFO "), "{line}");
}
