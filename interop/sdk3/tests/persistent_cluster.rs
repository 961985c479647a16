//! The official Rust SDK 3.0.0 `PersistentStream` (feature `eos`) through the router of a
//! 3-pod cluster while the pod owning the stream is SIGKILLed (and restarted with its data
//! dir, as a StatefulSet does), then drained, then the pod holding the table's committer
//! role is SIGKILLed (and restarted): the SDK recovers by itself (its resumes are fenced
//! while the owner is down, released by the owner otherwise; hand-offs go to the newly
//! elected committer), and every record is exactly once in Delta (polars).
//!
//! Kills: 3 by default; a long run: `SLUICE_PSTREAM_CLUSTER_KILLS=50
//! scripts/interop-sdk3.sh persistent_cluster -- --nocapture`.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use databricks_zerobus_ingest_sdk::ZerobusSdk;
use sluice_interop_sdk3::cluster::Cluster;
use sluice_interop_sdk3::delta::{expected_notes, note, read_notes_when, NOTES_COLUMNS};
use sluice_interop_sdk3::sluice::{CLIENT_ID, CLIENT_SECRET};

const TABLE: &str = "main.interop.pcluster";
/// Records the producer writes per kill (and per drain) before the next fault.
const RECORDS_PER_ROUND: i64 = 300;

fn kills_wanted() -> usize {
    std::env::var("SLUICE_PSTREAM_CLUSTER_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
}

async fn open(sdk: &ZerobusSdk) -> databricks_zerobus_ingest_sdk::PersistentStream {
    sdk.persistent_stream_builder()
        .table(TABLE)
        .oauth(CLIENT_ID, CLIENT_SECRET)
        .json()
        .recovery(true)
        .recovery_retries(600)
        .recovery_backoff_ms(200)
        .recovery_timeout_ms(40_000)
        .build()
        .await
        .expect("create a persistent stream through the router")
}

/// Waits until the producer's acked offset reaches `offset` (or panics after `timeout`).
async fn wait_acked(acked: &AtomicI64, offset: i64, timeout: Duration, cluster: &Cluster) {
    let deadline = Instant::now() + timeout;
    while acked.load(Ordering::SeqCst) < offset {
        assert!(
            Instant::now() < deadline,
            "offset {offset} not acked (at {}); logs:\n{}",
            acked.load(Ordering::SeqCst),
            cluster.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The stream's owner pod (waits while it is released / moving).
async fn owner(cluster: &Cluster, id: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(owner) = cluster.owner(id).await.expect("read the registry") {
            return owner;
        }
        assert!(Instant::now() < deadline, "stream {id} has no owner");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The pod holding the table's committer role (waits while none is elected).
async fn committer_of(cluster: &Cluster) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(pod) = cluster.committer(TABLE).await.expect("read the role") {
            return pod;
        }
        assert!(Instant::now() < deadline, "no committer of {TABLE}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_sdk3_persistent_stream_in_a_cluster_when_its_owner_is_killed_and_drained_and_the_committer_killed_then_each_record_once(
) {
    let kills = kills_wanted();
    let mut cluster = Cluster::start(3).await.expect("start the cluster");
    let location = cluster
        .create_table(TABLE, NOTES_COLUMNS)
        .expect("create the table");
    let sdk = cluster.sdk().expect("sdk");
    let stream = Arc::new(open(&sdk).await);
    let id = stream.stream_id().expect("a durable stream id").to_string();
    // A round per owner kill, one for the drain, one for the committer kill, one to finish.
    let total = RECORDS_PER_ROUND * (kills as i64 + 3);

    // The producer: offsets 0..total, one record at a time, acks waited in windows of 50.
    let acked = Arc::new(AtomicI64::new(-1));
    let producer = {
        let (stream, acked) = (Arc::clone(&stream), Arc::clone(&acked));
        tokio::spawn(async move {
            for n in 0..total {
                let offset = stream.ingest_record_offset(note(n)).await?;
                assert_eq!(offset, n, "offsets follow the records");
                if n % 50 == 49 || n == total - 1 {
                    stream.wait_for_offset(n).await?;
                    acked.store(n, Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            stream.flush().await
        })
    };

    let started = Instant::now();
    for kill in 0..kills {
        let round_end = RECORDS_PER_ROUND * (kill as i64 + 1) - 1;
        wait_acked(&acked, round_end - 100, Duration::from_secs(120), &cluster).await;
        let victim = owner(&cluster, &id).await;
        let pod = cluster.pod_mut(&victim).expect("the owner is a pod");
        pod.kill();
        println!(
            "kill {}: SIGKILLed owner {victim} at ack {}",
            kill + 1,
            acked.load(Ordering::SeqCst)
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
        pod.restart().await.expect("restart the killed pod");
        wait_acked(&acked, round_end, Duration::from_secs(120), &cluster).await;
    }

    // The owner drained: it releases the stream; the SDK moves to another pod.
    let drained_at = RECORDS_PER_ROUND * (kills as i64 + 1) - 1;
    wait_acked(&acked, drained_at - 100, Duration::from_secs(120), &cluster).await;
    let drained = owner(&cluster, &id).await;
    cluster.drain(&drained).expect("drain the owner");
    let pod = cluster.pod_mut(&drained).expect("the owner is a pod");
    assert!(
        pod.wait_exit(Duration::from_secs(30)),
        "the drained pod exits"
    );
    println!("drained owner {drained}");
    pod.restart().await.expect("the drained pod back");

    // The table's committer SIGKILLed: another pod is elected, pending hand-offs go there.
    let committer_at = RECORDS_PER_ROUND * (kills as i64 + 2) - 1;
    wait_acked(
        &acked,
        committer_at - 100,
        Duration::from_secs(120),
        &cluster,
    )
    .await;
    let committer = committer_of(&cluster).await;
    let pod = cluster.pod_mut(&committer).expect("the committer is a pod");
    pod.kill();
    println!(
        "SIGKILLed committer {committer} at ack {}",
        acked.load(Ordering::SeqCst)
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    pod.restart().await.expect("restart the committer's pod");
    wait_acked(&acked, committer_at, Duration::from_secs(120), &cluster).await;

    let flushed = tokio::time::timeout(Duration::from_secs(300), producer)
        .await
        .expect("the producer finishes")
        .expect("producer task");
    if let Err(e) = flushed {
        panic!("producer failed: {e}; logs:\n{}", cluster.logs());
    }
    let mut stream = Arc::try_unwrap(stream).unwrap_or_else(|_| panic!("stream still shared"));
    stream.close().await.expect("close");
    println!(
        "{kills} owner kills + 1 drain + 1 committer kill, {total} records in {:.1}s",
        started.elapsed().as_secs_f64()
    );

    // The moves went through the owners: releases asked over the internal service.
    let releases = cluster.pod_log_lines("release of a persistent stream asked");
    let resumes = cluster.pod_log_lines("persistent stream resumed");
    println!("{resumes} resumes, {releases} releases asked");
    assert!(resumes > kills, "the SDK resumed after every fault");
    assert!(releases >= 1, "at least the drain's move was a release");

    let read = read_notes_when(&location, total as u64, Duration::from_secs(60))
        .await
        .expect("read the table");
    assert_eq!(read.rows, total as u64, "each record exactly once");
    assert_eq!(read.distinct_ids, total as u64);
    assert_eq!(read.rows_by_id, expected_notes(0..total));
}
