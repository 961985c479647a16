//! A power cut under a local warehouse: the warehouse folder of a real `sluice serve` is a
//! FUSE passthrough (`tests/fuse/faulty_fs.py`, see `mounts.rs`) that remembers what was not
//! fsync'd — file data, and names added to a folder — and drops it when the test cuts the
//! power. The WAL stays on the ordinary disk (its own power cuts are the WAL crate's
//! failpoint tests).
//!
//! Contract under test: once a record is acked and its rows are committed, a power cut loses
//! none of it, although the WAL has purged the segments that held it. That needs every
//! Parquet file, commit file and table folder synced before the WAL lets go
//! (`server/src/warehouse/local.rs`); object_store's `LocalFileSystem` syncs none of them,
//! and with it this test loses the table.

use std::path::Path;
use std::time::{Duration, Instant};

use databricks_zerobus_ingest_sdk::JsonString;

use crate::harness::{wait_for_rows, Server};
use crate::moto::python_read;
use crate::mounts::{mounted_or_fail, skip_mount_test, FaultyFuse};

const TABLE: &str = "main.wh.power";
/// Small segments, so that the committed records' segments are purged.
const SEGMENT_BYTES: u64 = 1 << 20;
/// ~170 bytes of JSON each: ~2 MiB, two full segments.
const RECORDS: i64 = 12_000;
const NEEDS: &str = "a FUSE file system (tests/fuse/faulty_fs.py; needs root, /dev/fuse, \
                     Debian's libfuse2 and fusepy in .venv, which scripts/test.sh installs)";

fn mount(backing: &Path, warehouse: &Path) -> FaultyFuse {
    mounted_or_fail(FaultyFuse::mount(backing, warehouse), NEEDS, warehouse)
}

/// Waits until the WAL's first segment is gone (purged after the commits covering it).
fn wait_for_purge(wal_dir: &Path) {
    let first = wal_dir.join(format!("{:020}.wal", 0));
    let deadline = Instant::now() + Duration::from_secs(60);
    while first.exists() {
        assert!(
            Instant::now() < deadline,
            "the WAL's first segment was not purged in 60 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Writes `name` on the mount; synced (file and folder) or not.
fn canary(warehouse: &Path, name: &str, synced: bool) {
    let path = warehouse.join(name);
    std::fs::write(&path, b"canary").expect("write canary");
    if synced {
        for p in [path.as_path(), warehouse] {
            std::fs::File::open(p)
                .and_then(|f| f.sync_all())
                .expect("sync canary");
        }
    }
}

/// A pod whose warehouse is a fresh faulty mount, with the test table created.
struct OnMount {
    dir: tempfile::TempDir,
    warehouse: std::path::PathBuf,
    backing: std::path::PathBuf,
    /// `None` only between an unmount and the next mount.
    fuse: Option<FaultyFuse>,
    server: Server,
    location: String,
}

impl OnMount {
    async fn start() -> OnMount {
        let dir = tempfile::tempdir().expect("tempdir");
        let warehouse = dir.path().join("warehouse");
        let backing = dir.path().join("warehouse-backing");
        let fuse = mount(&backing, &warehouse);
        let segment = SEGMENT_BYTES.to_string();
        let warehouse_arg = warehouse.display().to_string();
        let server = Server::start_with_args(
            dir.path(),
            "200ms",
            &[
                "--wal-segment-bytes",
                &segment,
                "--warehouse",
                &warehouse_arg,
            ],
        )
        .await;
        let location = server
            .create_table_at(TABLE, "id BIGINT NOT NULL, note STRING")
            .await;
        OnMount {
            dir,
            warehouse,
            backing,
            fuse: Some(fuse),
            server,
            location,
        }
    }

    /// Sends every record; returns once all are acked (durable in the WAL).
    async fn ingest_all(&self) {
        let mut stream = self.server.json_stream(TABLE).await;
        for id in 0..RECORDS {
            let record = serde_json::json!({"id": id, "note": format!("{id:0>140}")}).to_string();
            stream
                .ingest_record_offset(JsonString(record))
                .await
                .expect("ingest");
        }
        stream.flush().await.expect("every record acked");
        let _ = stream.close().await;
    }

    fn wal(&self) -> std::path::PathBuf {
        self.dir.path().join("wal")
    }

    fn fuse(&self) -> &FaultyFuse {
        self.fuse.as_ref().expect("mounted")
    }

    /// SIGKILLs the pod and cuts the power, then mounts the warehouse anew (a reboot);
    /// returns the daemon's report of what was lost.
    fn kill_and_cut_the_power(&mut self) -> String {
        self.server.kill();
        let report = self.fuse().power_cut();
        self.remount(report)
    }

    /// The same, the journal having committed every name just before the cut, while a sync
    /// is stalled in the file system. A thread whose request the FUSE daemon has taken
    /// cannot be killed until the daemon answers, so the pod is sent SIGKILL first (every
    /// other thread ends at once), the cut fails the stalled sync (the process then ends
    /// without running another instruction of its own), and only then is it reaped.
    fn kill_and_cut_the_power_with_names_journaled(&mut self) -> String {
        let pid = self.server.pid().expect("the pod runs");
        // SAFETY: kill(2) on our own child's pid; no memory is touched.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        let report = self.fuse().power_cut_with_names_journaled();
        self.server.kill();
        self.remount(report)
    }

    /// Mounts the warehouse anew after a power cut (a reboot); returns `report`.
    fn remount(&mut self, report: String) -> String {
        eprintln!("{report}");
        self.fuse = None;
        self.fuse = Some(mount(&self.backing, &self.warehouse));
        report
    }

    /// The names in the table's `_delta_log` folder, sorted.
    fn log_names(&self) -> Vec<String> {
        let table = self
            .location
            .strip_prefix("file://")
            .unwrap_or(&self.location);
        let mut names: Vec<String> = std::fs::read_dir(Path::new(table).join("_delta_log"))
            .expect("list _delta_log")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// Restarts the pod; every record reads back once.
    async fn restart_and_read_every_row(&mut self, report: &str) {
        self.server.restart().await;
        wait_for_rows(&self.location, RECORDS as usize, Duration::from_secs(60)).await;
        let read = python_read(&self.location, &serde_json::json!({}));
        let s = &read.summary;
        assert_eq!(s["rows"], RECORDS, "{s} after {report}");
        assert_eq!(s["polars_distinct_ids"], RECORDS, "{s}");
        assert_eq!(s["polars_id_sum"], RECORDS * (RECORDS - 1) / 2, "{s}");
        let log = self.server.log();
        assert!(
            !log.contains("panicked"),
            "the pod restarted cleanly after the power cut:\n{log}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_local_warehouse_when_the_power_is_cut_after_commits_then_no_acked_row_is_lost() {
    if skip_mount_test("warehouse power cut") {
        return;
    }
    let mut pod = OnMount::start().await;
    // Every record acked, then committed; the WAL lets go of the segments the commits cover.
    pod.ingest_all().await;
    wait_for_rows(&pod.location, RECORDS as usize, Duration::from_secs(60)).await;
    wait_for_purge(&pod.wal());

    // The fault model at work in this run: an unsynced file is lost, a synced one is not.
    // (The synced one first: its folder's sync would make the other's name durable too.)
    canary(&pod.warehouse, "synced-canary", true);
    canary(&pod.warehouse, "unsynced-canary", false);

    let report = pod.kill_and_cut_the_power();
    assert!(
        !pod.warehouse.join("unsynced-canary").exists(),
        "the power cut takes what was not synced: {report}"
    );
    assert_eq!(
        std::fs::read(pod.warehouse.join("synced-canary"))
            .ok()
            .as_deref(),
        Some(&b"canary"[..]),
        "the power cut keeps what was synced: {report}"
    );
    pod.restart_and_read_every_row(&report).await;
}

/// A commit file whose bytes' fsync fails. On Linux the pages may then be marked clean
/// unwritten, so such bytes may not survive a power cut; faulty_fs.py models that (a failed
/// sync poisons the file until a new file replaces it). Contract: the commit file never
/// gets its name while its bytes are not durable — the store syncs them under a staging
/// name first, writes them anew on a failed sync and gives up without naming them — so the
/// commit fails, the WAL keeps its records, and once the disk takes syncs again no acked
/// row is lost to a power cut.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_commit_files_whose_fsync_fails_then_the_wal_is_kept_until_one_syncs_and_no_acked_row_is_lost(
) {
    if skip_mount_test("warehouse fsync failure") {
        return;
    }
    // Every sync of a commit file's bytes (each try's new file) fails.
    let pod = acked_while_syncs_fail(|fuse| fuse.arm_for(".json")).await;
    // The committer keeps retrying, so a listing may catch a try's staging file (`…#N`)
    // while that try is still writing and syncing it (a CI run did, after three that did
    // not): the names are read apart, and each staging file seen must be gone soon after.
    let (staging, named): (Vec<String>, Vec<String>) =
        pod.log_names().into_iter().partition(|n| n.contains('#'));
    assert_eq!(
        named,
        vec!["00000000000000000000.json"],
        "no commit file named for bytes that are not durable"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while let Some(left) = staging.iter().find(|n| pod.log_names().contains(n)) {
        assert!(
            Instant::now() < deadline,
            "staging file {left} left behind 10 s after a try wrote it"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    syncs_recover_and_no_acked_row_is_lost(pod, 0.0).await;
}

/// A commit file whose bytes sync but whose folder's fsync fails: the name is there for every
/// lister of the folder but may be lost to a power cut. Contract: the pod never counts such
/// a commit as landed — the store places the file again and, while no try holds, keeps it
/// unreadable to Sluice (`sluice_warehouse_unsynced_files` 1) — so the WAL keeps its
/// records until the folder syncs, and no acked row is lost to a power cut.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_delta_log_folder_whose_fsync_fails_then_the_wal_is_kept_until_it_syncs_and_no_acked_row_is_lost(
) {
    if skip_mount_test("warehouse folder fsync failure") {
        return;
    }
    let pod = acked_while_syncs_fail(|fuse| fuse.arm_dirs_for("_delta_log")).await;
    syncs_recover_and_no_acked_row_is_lost(pod, 1.0).await;
}

/// A pod whose syncs `arm` makes fail before every record is sent and acked; returns once a
/// commit was tried (a sync refused) and long enough after for many flush retries (every
/// 500 ms).
async fn acked_while_syncs_fail(arm: fn(&FaultyFuse)) -> OnMount {
    let pod = OnMount::start().await;
    arm(pod.fuse());
    pod.ingest_all().await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while pod.fuse().refused_syncs() == 0 {
        assert!(Instant::now() < deadline, "no commit was tried in 60 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    pod
}

/// With syncs failing since before the records were sent: the WAL still holds its first
/// segment and `kept` commit files are kept as unsynced; then the disk takes syncs again,
/// the rows land, the WAL lets go, the power is cut and every row reads back once.
async fn syncs_recover_and_no_acked_row_is_lost(mut pod: OnMount, kept: f64) {
    assert!(
        pod.wal().join(format!("{:020}.wal", 0)).exists(),
        "the WAL let go of records whose commit file is not durable"
    );
    assert_eq!(
        pod.server.metric("sluice_warehouse_unsynced_files").await,
        kept,
        "commit files kept as unsynced"
    );

    // The disk takes syncs again: the next flush (or reload) writes the commit file anew,
    // the hand-off lands or is found covered and the WAL lets go.
    pod.fuse().disarm();
    wait_for_rows(&pod.location, RECORDS as usize, Duration::from_secs(60)).await;
    wait_for_purge(&pod.wal());
    assert_eq!(
        pod.server.metric("sluice_warehouse_unsynced_files").await,
        0.0
    );

    let report = pod.kill_and_cut_the_power();
    pod.restart_and_read_every_row(&report).await;
}

/// The power fails while a commit file is being written, after the file system's journal
/// committed the names written so far but before the file's data reached the disk (ext4
/// with delayed allocation: the file comes back empty). Contract: a commit's name never
/// stands for bytes that are not durable, so the restarted pod finds the table at its last
/// durable version (not an empty commit file it cannot load), replays the WAL and every
/// acked row is there once. With object_store's own put (named first, synced after) the
/// commit file came back empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_commit_file_whose_sync_is_under_way_when_the_power_fails_after_a_journal_commit_then_no_acked_row_is_lost(
) {
    if skip_mount_test("warehouse power cut during a commit") {
        return;
    }
    let mut pod = OnMount::start().await;
    // Every commit file's sync waits: the first commit of the rows hangs in it.
    pod.fuse().stall_for(".json");
    pod.ingest_all().await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while pod.fuse().stalled_syncs() == 0 {
        assert!(Instant::now() < deadline, "no commit was tried in 60 s");
        std::thread::sleep(Duration::from_millis(50));
    }

    let report = pod.kill_and_cut_the_power_with_names_journaled();
    let commits: Vec<String> = pod
        .log_names()
        .into_iter()
        .filter(|n| !n.contains('#'))
        .collect();
    assert_eq!(
        commits,
        vec!["00000000000000000000.json"],
        "a commit file named before its bytes were durable survived the cut: {report}"
    );
    pod.restart_and_read_every_row(&report).await;
}
