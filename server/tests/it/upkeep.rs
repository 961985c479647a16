//! Table upkeep on S3 (moto) while a producer keeps writing:
//!
//! - background compaction (and `sluice table optimize` called by hand
//!   during ingest) rewrites small files into fewer larger ones; every row
//!   keeps its value and none is lost or doubled, although compaction
//!   commits race the 20 ms appends for log versions;
//! - checkpoints appear every `delta.checkpointInterval` commits, and Python
//!   `deltalake` and `polars` read the table from the checkpoint alone (the
//!   JSON commits it covers are deleted before reading);
//! - `sluice table vacuum --retention 0s` deletes the compacted-away files,
//!   leaving exactly the files of the current snapshot.

use std::time::Duration;

use crate::harness::Server;
use crate::id_v;
use crate::log_retention::LogListing;
use crate::moto::{python_read, Moto};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_ingest_on_s3_when_compaction_and_checkpoints_run_beside_it_then_rows_stay_files_shrink_and_python_reads_the_checkpoint(
) {
    upkeep_beside_ingest("upkeep", &[]).await;
}

/// The same, every row group copied by compaction (`--compact-copy-min-rows 1`) instead of
/// re-encoded: Python `deltalake` and `polars` read the copied files and their merged stats.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_ingest_on_s3_when_compaction_copies_row_groups_then_rows_stay_and_python_reads_them()
{
    upkeep_beside_ingest("upkeep_copy", &["--compact-copy-min-rows", "1"]).await;
}

/// Ingest with background and by-hand compaction beside it, then checkpoint-only reads
/// and vacuum (the module's doc); `extra` serve flags; asserts bins were copied iff asked.
async fn upkeep_beside_ingest(name: &str, extra: &[&str]) {
    let moto = Moto::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut args = moto.serve_args(name);
    args.extend(
        // Many small appends: the committer may commit as often as the pod flushes.
        [
            "--upkeep-interval",
            "300ms",
            "--compact-min-files",
            "8",
            "--commit-interval",
            "20ms",
        ]
        .iter()
        .chain(extra)
        .map(|s| s.to_string()),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut server = Server::start_with_args(dir.path(), "20ms", &args).await;
    let table = &format!("main.s3.{name}");
    let location = server
        .create_table_with(
            table,
            id_v::COLUMNS,
            &["--property", "delta.checkpointInterval=5"],
        )
        .await;
    let prefix = location
        .strip_prefix("s3://sluice-it/")
        .expect("on the test bucket")
        .to_string();

    let n: i64 = 6_000;
    let stream = server.json_stream(table).await;
    let ingest = id_v::push(stream, n, 20, Duration::from_millis(5));
    let by_hand = async {
        let mut optimized = 0;
        for _ in 0..3 {
            tokio::time::sleep(Duration::from_millis(400)).await;
            let (report, _) = server.cli_json(&["table", "optimize", table]);
            optimized += report["compaction"]["files_removed"]
                .as_u64()
                .expect("files_removed");
        }
        optimized
    };
    let ((), optimized_by_hand) = tokio::join!(ingest, by_hand);
    // Let the last appends land, then compact what is left.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let out = server.cli(&["table", "optimize", table]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let appends = server.metric("sluice_sink_commits_total").await;
    let compacted = server.metric("sluice_upkeep_files_compacted_total").await;
    let copied = server.metric("sluice_upkeep_bins_copied_total").await;
    let (vacuum, _) = server.cli_json(&["table", "vacuum", table, "--retention", "0s"]);
    server.terminate();

    // Read from the checkpoint alone: delete the JSON commits it covers.
    let log = moto.list(&format!("{prefix}_delta_log/")).await;
    let listing = LogListing::new(&log);
    let checkpoint = listing
        .checkpoint
        .unwrap_or_else(|| panic!("no checkpoint in {log:?}"));
    assert!(listing.last_checkpoint_file, "{log:?}");
    for key in &log {
        let version = key
            .rsplit('/')
            .next()
            .and_then(|f| f.strip_suffix(".json"))
            .and_then(|v| v.parse::<u64>().ok());
        if version.is_some_and(|v| v <= checkpoint) {
            moto.delete(key).await;
        }
    }

    let read = python_read(&location, &moto.storage_options());
    let s = &read.summary;
    eprintln!(
        "upkeep: {appends} appends, {compacted} files compacted ({optimized_by_hand} by hand during ingest), \
         checkpoint at {checkpoint}, vacuum {vacuum}, python: {s}"
    );
    id_v::assert_read_once(&read, n);
    // Filtered reads prune files by their stats (merged ones too): none may lose a row.
    assert!(s["ids_at_or_above_middle"].as_u64() > Some(0), "{s}");
    assert_eq!(s["filtered_rows"], s["ids_at_or_above_middle"], "{s}");
    assert_eq!(
        s["polars_filtered_rows"], s["ids_at_or_above_middle"],
        "{s}"
    );
    let files = s["files"].as_u64().expect("files") as f64;
    assert!(compacted > 0.0, "nothing was compacted");
    // 20 ms appends hold far fewer rows than the default rule's 64 Ki: copied only when asked.
    assert_eq!(copied > 0.0, !extra.is_empty(), "{copied} bins copied");
    assert!(
        files * 4.0 <= appends,
        "{files} files after compaction for {appends} appends"
    );
    let parquet: Vec<_> = moto
        .list(&prefix)
        .await
        .into_iter()
        .filter(|k| k.ends_with(".parquet") && !k.contains("_delta_log/"))
        .collect();
    assert!(vacuum["files_deleted"].as_u64().expect("files_deleted") > 0);
    assert_eq!(
        parquet.len() as f64,
        files,
        "vacuum left exactly the current files: {parquet:?}"
    );
}
