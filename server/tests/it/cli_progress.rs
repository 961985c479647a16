//! The CLI's long operations end with a summary line on stderr (stdout keeps the JSON
//! report) and, without a terminal, show plain progress lines while they run:
//! `sluice table optimize` says how many small files it rewrote into how many (the same
//! numbers as its report), `sluice table vacuum` how many removed files it deleted. On a
//! terminal (a pty from util-linux `script`) the progress line is redrawn in place. The
//! `pod drain` summary is checked by every cluster test that drains a pod
//! (`cluster_harness::drain_pod`).

use crate::harness::{push_ids_and_close, Server, CLIENT_ID, CLIENT_SECRET};

/// The last line of `lines` starting with `prefix`, with its ` in N.N s` ending checked and
/// cut off.
fn summary(lines: &[String], prefix: &str) -> String {
    let line = lines
        .iter()
        .rev()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no summary starting {prefix:?} in {lines:?}"));
    let (text, took) = line.rsplit_once(" in ").expect("a time at the end");
    let secs = took.strip_suffix(" s").expect("seconds");
    assert!(secs.parse::<f64>().is_ok_and(|s| s >= 0.0), "{line}");
    text.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_small_files_when_optimize_and_vacuum_run_then_each_ends_with_a_summary_of_its_report(
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start_with_args(
        dir.path(),
        "20ms",
        &["--upkeep-interval", "1h", "--commit-interval", "20ms"],
    )
    .await;
    let table = "main.cli.progress";
    server.create_table(table, "id BIGINT NOT NULL");
    for round in 1..=4 {
        // One stream per commit: four small files.
        push_ids_and_close(server.json_stream(table).await, 50).await;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while server.metric("sluice_sink_rows_committed_total").await < f64::from(50 * round) {
            assert!(
                std::time::Instant::now() < deadline,
                "round {round} never committed"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    let (report, lines) = server.cli_json(&["table", "optimize", table]);
    let removed = report["compaction"]["files_removed"]
        .as_u64()
        .expect("files_removed");
    assert!(removed >= 2, "{report}");
    assert!(
        lines[0].starts_with(&format!(
            "… optimizing {table}: compacting small files on the pod ("
        )),
        "a plain progress line first (stderr is a pipe): {lines:?}"
    );
    let text = summary(&lines, "optimized ");
    let expected = format!(
        "optimized {table}: {removed} small files ({}) rewritten into {} (",
        mb(&report["compaction"]["bytes_removed"]),
        report["compaction"]["files_added"]
    );
    assert!(text.starts_with(&expected), "{text:?} vs {expected:?}");
    assert!(
        text.contains(&format!(
            "commit version {}",
            report["compaction"]["version"]
        )),
        "{text}"
    );

    let (report, lines) = server.cli_json(&["table", "vacuum", table, "--retention", "0s"]);
    assert_eq!(report["files_deleted"].as_u64(), Some(removed), "{report}");
    assert_eq!(
        summary(&lines, "vacuumed "),
        format!("vacuumed {table}: {removed} removed data files deleted")
    );

    // On a terminal: the line is redrawn in place (erase-line), then the summary.
    let command = format!("{} table optimize {table}", env!("CARGO_BIN_EXE_sluice"));
    let out = std::process::Command::new("script")
        .args(["-qefc", &command, "/dev/null"])
        .env("SLUICE_SERVER", &server.url)
        .env("SLUICE_CLIENT_ID", CLIENT_ID)
        .env("SLUICE_CLIENT_SECRET", CLIENT_SECRET)
        .output()
        .expect("util-linux `script` runs the CLI on a pty");
    let tty = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{tty}");
    assert!(
        tty.contains(&format!(
            "\r\x1b[2K| optimizing {table}: compacting small files on the pod ("
        )) || tty.contains(&format!(
            "\r\x1b[2K/ optimizing {table}: compacting small files on the pod ("
        )),
        "{tty:?}"
    );
    assert!(
        !tty.contains("… optimizing"),
        "no plain lines on a terminal: {tty:?}"
    );
    assert!(
        tty.contains(&format!(
            "\r\x1b[2Koptimized {table}: nothing to compact (fewer than 2 small files); "
        )),
        "{tty:?}"
    );
}

fn mb(bytes: &serde_json::Value) -> String {
    let b = bytes.as_f64().unwrap_or(0.0);
    if b < 1e6 {
        format!("{:.1} kB", b / 1e3)
    } else {
        format!("{:.1} MB", b / 1e6)
    }
}
