//! Committer tests on real Delta tables in temporary directories.

use std::sync::Arc;
use std::time::Duration;

use arrow_array::{Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use deltalake::kernel::transaction::{CommitBuilder, CommitConflictError, TransactionError};
use deltalake::kernel::{Action, Transaction};
use deltalake::protocol::{DeltaOperation, SaveMode};
use deltalake::{DeltaTable, DeltaTableError};

use super::attempt::{commit_once, lost_race};
use super::{log_epoch, Committer, CommitterConfig, Fencing, HandOff, HandOffError};
use crate::warehouse::{S3Settings, Warehouse};

const TABLE: &str = "main.c.t";

struct Fixture {
    _dir: tempfile::TempDir,
    warehouse: Warehouse,
    url: url::Url,
}

impl Fixture {
    async fn new() -> Fixture {
        let dir = tempfile::tempdir().expect("tempdir");
        let warehouse =
            Warehouse::parse(None, dir.path(), &S3Settings::default()).expect("warehouse");
        let url = warehouse.table_url("main", "c", "t").expect("url");
        warehouse.create_for_test(&url, "id BIGINT NOT NULL").await;
        Fixture {
            _dir: dir,
            warehouse,
            url,
        }
    }

    async fn open(&self) -> DeltaTable {
        self.warehouse.open(&self.url).await.expect("open table")
    }

    fn committer(&self, table: DeltaTable, config: CommitterConfig, fencing: Fencing) -> Committer {
        Committer::spawn(TABLE.to_string(), table, config, fencing)
    }

    /// A hand-off of one new Parquet file holding `ids`.
    async fn handoff(&self, wal: &str, from: u64, to: u64, ids: Vec<i64>) -> HandOff {
        let table = self.open().await;
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
        let batch =
            RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(ids))]).expect("batch");
        let adds = crate::sink::write_files(&table, [Ok(batch)])
            .await
            .expect("write");
        HandOff {
            table: TABLE.to_string(),
            pod_id: format!("pod-{wal}"),
            wal_id: wal.to_string(),
            from_lsn: from,
            to_lsn: to,
            adds,
            streams: Vec::new(),
            schema_id: String::new(),
        }
    }

    /// (table version, live files, txn version of `app_id`).
    async fn state(&self, app_id: &str) -> (u64, usize, Option<u64>) {
        let table = self.open().await;
        let version = table.version().expect("version");
        let files = table
            .snapshot()
            .expect("snapshot")
            .log_data()
            .iter()
            .count();
        let txn = super::covered::txn_of(&table, app_id).await.expect("txn");
        (version, files, txn)
    }
}

fn quick() -> CommitterConfig {
    CommitterConfig {
        interval: Duration::from_millis(300),
        ..CommitterConfig::default()
    }
}

/// The committer runs on the Delta runtime (`crate::delta_runtime`), not on the runtime of the
/// tasks that hand off to it: here the test's runtime (one thread) is blocked until the
/// answer arrives, and the hand-off is committed all the same. (Spawned on the caller's
/// runtime, the committer's task never ran and the wait timed out.)
#[tokio::test]
async fn a_hand_off_is_committed_while_the_callers_runtime_runs_nothing() {
    let f = Fixture::new().await;
    let committer = Arc::new(f.committer(f.open().await, quick(), Fencing::Unfenced));
    let handoff = f.handoff("wal-0", 0, 5, vec![7]).await;
    let (tx, rx) = std::sync::mpsc::channel();
    let waiting = committer.clone();
    std::thread::spawn(move || {
        let _ = tx.send(futures::executor::block_on(waiting.hand_off(handoff)));
    });
    // Blocks the runtime's only thread.
    let answer = rx.recv_timeout(Duration::from_secs(30));
    let ack = answer.expect("answered in time").expect("committed");
    assert!(!ack.covered);
    let (version, files, txn) = f.state("wal-0").await;
    assert_eq!((ack.version, files, txn), (version, 1, Some(5)));
}

#[tokio::test]
async fn hand_offs_of_many_wals_land_in_one_commit() {
    let f = Fixture::new().await;
    let committer = Arc::new(f.committer(f.open().await, quick(), Fencing::Unfenced));
    // A first hand-off after a quiet time is committed at once ...
    let first = f.handoff("wal-0", 0, 5, vec![0]).await;
    let ack = committer.hand_off(first).await.expect("first");
    assert!(!ack.covered);
    let (v0, _, _) = f.state("wal-0").await;
    assert_eq!(ack.version, v0);
    // ... the next ones within the interval wait and share one commit.
    let mut handoffs = Vec::new();
    for i in 1..=5u64 {
        let mut h = f
            .handoff(&format!("wal-{i}"), 0, 10 * i, vec![i as i64])
            .await;
        h.streams = vec![(format!("stream-{i}"), 100 + i as i64)];
        handoffs.push(h);
    }
    let answers = futures::future::join_all(handoffs.into_iter().map(|h| {
        let c = committer.clone();
        async move { c.hand_off(h).await }
    }))
    .await;
    let versions: Vec<u64> = answers
        .iter()
        .map(|a| a.as_ref().expect("ack").version)
        .collect();
    assert!(
        versions.iter().all(|v| *v == v0 + 1),
        "one commit: {versions:?}"
    );
    let (version, files, _) = f.state("wal-1").await;
    assert_eq!((version, files), (v0 + 1, 6));
    for i in 1..=5u64 {
        assert_eq!(f.state(&format!("wal-{i}")).await.2, Some(10 * i));
        assert_eq!(f.state(&format!("stream-{i}")).await.2, Some(100 + i));
    }
}

#[tokio::test]
async fn a_resent_hand_off_is_never_committed_twice() {
    let f = Fixture::new().await;
    let committer = Arc::new(f.committer(f.open().await, quick(), Fencing::Unfenced));
    let h = f.handoff("wal-a", 0, 42, vec![1, 2, 3]).await;
    // Sent twice at once (the second waits on the first's answer) ...
    let (a, b) = tokio::join!(committer.hand_off(h.clone()), committer.hand_off(h.clone()));
    let (a, b) = (a.expect("a"), b.expect("b"));
    assert_eq!(a.version, b.version);
    // ... and again after its answer was "lost".
    let again = committer.hand_off(h.clone()).await.expect("resent");
    assert!(again.covered);
    // A new committer (after a failover) finds it covered as well.
    let other = f.committer(f.open().await, quick(), Fencing::Unfenced);
    assert!(other.hand_off(h).await.expect("replayed").covered);
    let (version, files, txn) = f.state("wal-a").await;
    assert_eq!((version, files, txn), (a.version, 1, Some(42)));
}

#[tokio::test]
async fn gaps_are_refused() {
    let f = Fixture::new().await;
    let committer = f.committer(f.open().await, quick(), Fencing::Unfenced);
    let h = f.handoff("wal-a", 10, 20, vec![1]).await;
    assert!(matches!(
        committer.hand_off(h).await,
        Err(HandOffError::Gap { committed: 0, .. })
    ));
    assert_eq!(f.state("wal-a").await.1, 0);
}

#[tokio::test]
async fn pending_hand_offs_are_bounded() {
    let f = Fixture::new().await;
    let config = CommitterConfig {
        interval: Duration::from_secs(30),
        max_pending: 1,
        ..CommitterConfig::default()
    };
    let committer = Arc::new(f.committer(f.open().await, config, Fencing::Unfenced));
    committer
        .hand_off(f.handoff("wal-a", 0, 1, vec![1]).await)
        .await
        .expect("first commits at once");
    // The second waits for the interval, the third finds no room.
    let waiting = {
        let c = committer.clone();
        let h = f.handoff("wal-a", 1, 2, vec![2]).await;
        tokio::spawn(async move { c.hand_off(h).await })
    };
    let third = f.handoff("wal-b", 0, 1, vec![3]).await;
    for _ in 0..200 {
        if committer.pending().0 == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let refused = committer.hand_off(third).await;
    assert!(
        matches!(refused, Err(HandOffError::Busy { pending: 1, .. })),
        "{refused:?}"
    );
    waiting.abort();
}

#[tokio::test]
async fn a_newer_epoch_deposes_the_committer() {
    let f = Fixture::new().await;
    let one = f.committer(f.open().await, quick(), Fencing::Epoch(1));
    let ack = one
        .hand_off(f.handoff("wal-a", 0, 1, vec![1]).await)
        .await
        .expect("epoch 1 commits");
    assert_eq!(ack.epoch, Some(1));
    assert_eq!(log_epoch(&f.open().await).await.expect("epoch"), Some(1));
    // Epoch 2 claims; epoch 1 sees it when it reloads and is refused.
    let two = f.committer(f.open().await, quick(), Fencing::Epoch(2));
    let ack = two
        .hand_off(f.handoff("wal-b", 0, 1, vec![2]).await)
        .await
        .expect("epoch 2 commits");
    assert_eq!(ack.epoch, Some(2));
    let refused = one.hand_off(f.handoff("wal-a", 1, 2, vec![3]).await).await;
    assert!(
        matches!(
            refused,
            Err(HandOffError::Deposed {
                epoch: 1,
                log_epoch: 2,
                ..
            })
        ),
        "{refused:?}"
    );
    // Deposed for good, and nothing of it was committed.
    let again = one.hand_off(f.handoff("wal-c", 0, 1, vec![4]).await).await;
    assert!(matches!(again, Err(HandOffError::Deposed { .. })));
    assert_eq!(f.state("wal-a").await.2, Some(1));
    assert_eq!(f.state("wal-c").await.2, None);
    // A stale committer started after the claim never claims.
    let stale = f.committer(f.open().await, quick(), Fencing::Epoch(1));
    let refused = stale
        .hand_off(f.handoff("wal-d", 0, 1, vec![5]).await)
        .await;
    assert!(
        matches!(refused, Err(HandOffError::Deposed { .. })),
        "{refused:?}"
    );
    assert_eq!(log_epoch(&f.open().await).await.expect("epoch"), Some(2));
}

/// The race the committer relies on: a commit built on the log before the
/// successor's claim can only be tried at the version the claim took, so it
/// fails as a lost race, and the reloaded log shows the newer epoch.
#[tokio::test]
async fn a_commit_racing_the_claim_loses_and_the_reload_refuses_it() {
    let f = Fixture::new().await;
    let mut stale = f.open().await;
    stale.update_incremental(None).await.expect("load");
    let epoch_one = Fencing::Epoch(1);
    epoch_one
        .check(TABLE, log_epoch(&stale).await.expect("epoch"))
        .expect("not deposed before the claim");
    // The successor claims between epoch 1's check and its commit.
    let mut claimer = f.open().await;
    commit_once(
        &mut claimer,
        Vec::new(),
        vec![Transaction::new(super::COMMITTER_APP_ID, 2)],
        None,
    )
    .await
    .expect("claim");
    let h = f.handoff("wal-a", 0, 1, vec![1]).await;
    let txns = vec![
        Transaction::new("wal-a", 1),
        epoch_one.txn().expect("txn").expect("fenced"),
    ];
    let err = commit_once(&mut stale, h.adds, txns, None)
        .await
        .expect_err("the stale commit must not land");
    assert!(lost_race(&err), "{err}");
    stale.update_incremental(None).await.expect("reload");
    let refused = epoch_one.check(TABLE, log_epoch(&stale).await.expect("epoch"));
    assert!(matches!(
        refused,
        Err(HandOffError::Deposed { log_epoch: 2, .. })
    ));
    assert_eq!(f.state("wal-a").await.1, 0);
}

/// deltalake 1.1's own conflict checker, with retries on, flags a commit
/// whose `txn` app id a winning commit also carries.
#[tokio::test]
async fn deltalake_flags_a_winner_with_the_same_txn_app_id() {
    let f = Fixture::new().await;
    let mut stale = f.open().await;
    stale.update_incremental(None).await.expect("load");
    commit_once(
        &mut f.open().await,
        Vec::new(),
        vec![Transaction::new(super::COMMITTER_APP_ID, 2)],
        None,
    )
    .await
    .expect("claim");
    let op = DeltaOperation::Write {
        mode: SaveMode::Append,
        partition_by: None,
        predicate: None,
    };
    let txn = Action::Txn(Transaction::new(super::COMMITTER_APP_ID, 1));
    let result = CommitBuilder::default()
        .with_actions(vec![txn])
        .with_max_retries(5)
        .build(
            Some(stale.snapshot().expect("snapshot")),
            stale.log_store(),
            op,
        )
        .await;
    assert!(
        matches!(
            result,
            Err(DeltaTableError::Transaction {
                source: TransactionError::CommitConflict(
                    CommitConflictError::ConcurrentTransaction
                )
            })
        ),
        "{:?}",
        result.err()
    );
}

/// A committer whose handle read commits that log retention deleted later
/// (a checkpoint it has already read past covers them) loads afresh from the
/// checkpoint: an incremental update keeps replaying the log segment it had.
#[tokio::test]
async fn a_committer_behind_a_cleaned_up_log_loads_from_the_checkpoint() {
    let f = Fixture::new().await;
    let committer = f.committer(f.open().await, quick(), Fencing::Unfenced);
    let mut other = f.open().await;
    committer
        .hand_off(f.handoff("wal-a", 0, 1, vec![1]).await)
        .await
        .expect("version 1");
    other.update_incremental(None).await.expect("load");
    let h = f.handoff("wal-b", 0, 1, vec![10]).await;
    commit_once(&mut other, h.adds, vec![Transaction::new("wal-b", 1)], None)
        .await
        .expect("version 2");
    tokio::time::sleep(quick().interval).await;
    committer
        .hand_off(f.handoff("wal-a", 1, 2, vec![2]).await)
        .await
        .expect("version 3");
    // A checkpoint at version 2; the JSON commits before it are deleted.
    deltalake::protocol::checkpoints::create_checkpoint(&other, None)
        .await
        .expect("checkpoint");
    let log = f.url.to_file_path().expect("local").join("_delta_log");
    for v in 0..2u64 {
        std::fs::remove_file(log.join(format!("{v:020}.json"))).expect("delete commit");
    }
    tokio::time::sleep(quick().interval).await;
    let ack = committer
        .hand_off(f.handoff("wal-a", 2, 3, vec![3]).await)
        .await
        .expect("commits after loading from the checkpoint");
    assert_eq!(ack.version, 4);
    assert_eq!(f.state("wal-a").await.2, Some(3));
}

/// The HEAD check: a hand-off naming a file that is not in the store is
/// refused alone (typed), the others of the same batch commit.
#[tokio::test]
async fn a_missing_file_refuses_only_its_hand_off() {
    let f = Fixture::new().await;
    let committer = Arc::new(f.committer(f.open().await, quick(), Fencing::Unfenced));
    let good = f.handoff("wal-a", 0, 5, vec![1, 2]).await;
    let mut bad = f.handoff("wal-b", 0, 5, vec![3]).await;
    let gone = bad.adds[0].path.clone();
    let location = f.url.to_file_path().expect("local table");
    std::fs::remove_file(location.join(&gone)).expect("remove the file");
    let (good_answer, bad_answer) =
        tokio::join!(committer.hand_off(good), committer.hand_off(bad.clone()));
    assert!(!good_answer.expect("the good hand-off commits").covered);
    match bad_answer {
        Err(HandOffError::MissingFile { path, .. }) => assert_eq!(path, gone),
        other => panic!("expected MissingFile, got {other:?}"),
    }
    let (_, files, wal_b) = f.state("wal-b").await;
    assert_eq!(files, 1, "only the good hand-off's file is in the table");
    assert_eq!(wal_b, None, "nothing of wal-b committed");
    // Sent again, it is refused again, never committed.
    bad.streams = Vec::new();
    assert!(matches!(
        committer.hand_off(bad).await,
        Err(HandOffError::MissingFile { .. })
    ));
}

#[tokio::test]
async fn an_object_store_failing_mid_commit_loses_nothing_and_commits_nothing_twice() {
    use super::fault_store::{Fault, FaultStore};
    for fault in [Fault::Before, Fault::After] {
        let f = Fixture::new().await;
        let store = FaultStore::new(Arc::new(object_store::local::LocalFileSystem::new()));
        let table = deltalake::DeltaTableBuilder::from_url(f.url.clone())
            .expect("builder")
            .with_storage_backend(store.clone(), f.url.clone())
            .load()
            .await
            .expect("load through the fault store");
        let (v0, _, _) = f.state("wal-f").await;
        let committer = f.committer(table, quick(), Fencing::Unfenced);
        let h = f.handoff("wal-f", 0, 7, vec![1, 2, 3]).await;
        // The put of the commit file fails once: before writing it, or after.
        store.arm(fault);
        let first = committer.hand_off(h.clone()).await;
        assert!(
            store.struck(),
            "{fault:?}: the commit went through the fault store"
        );
        // Whatever the first answer was (the committer reloads and tries once more before
        // answering; a pod resends on an error), the same hand-off sent again is answered
        // and the table holds its one file once, at one version.
        let again = committer.hand_off(h.clone()).await.expect("resent");
        assert!(again.covered, "{fault:?}: the resent hand-off is covered");
        let (version, files, txn) = f.state("wal-f").await;
        assert_eq!(
            (version, files, txn),
            (v0 + 1, 1, Some(7)),
            "{fault:?}: one commit, one file, first answer {first:?}"
        );
        if let Ok(ack) = first {
            assert_eq!(ack.version, v0 + 1, "{fault:?}");
            // After a commit that landed but was reported failed, the retry finds it covered.
            assert_eq!(ack.covered, fault == Fault::After, "{fault:?}");
        }
    }
}
