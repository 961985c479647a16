//! Persistent streams across the pods of a 3-pod cluster (real etcd, `sluice serve --join`
//! pods sharing one local-folder warehouse), over raw gRPC straight to each pod:
//!
//! - a resume on another pod while the owner is alive: the owner releases (its connection
//!   ends ABORTED, its rows are committed), offsets continue, resent records are dropped;
//! - a resume while the owner is SIGKILLed with acked records only in its WAL: UNAVAILABLE
//!   naming it (fenced); after its restart the resume succeeds with a watermark never below
//!   an acked offset;
//! - a retire from a pod that does not own the stream ends the owner's connection
//!   (FAILED_PRECONDITION), is idempotent, and the stream never resumes anywhere;
//! - a drained owner releases its streams: a resume elsewhere proceeds without fencing;
//! - `sluice pod forget` is refused while the pod is registered, then clears its ownership;
//! - `Release` refuses callers without a peer token (no token, a user token) and is not
//!   relayed by the router;
//! - every record exactly once in Delta (polars).
//!
//! Pods flush every 60 s, so acked records stay in the owner's WAL until a release, a drain
//! or a restart commits them: the moves, not the timer, must make them durable in Delta.

use std::time::{Duration, Instant};

use sluice_proto::cluster::persistent_streams_client::PersistentStreamsClient;
use sluice_proto::cluster::ReleaseRequest;
use sluice_proto::RecordType;
use tonic::Code;

use crate::cluster_harness::{drain_pod, start_cluster, wait_for_pods, Router};
use crate::harness::Server;
use crate::persistent_raw::{
    assert_each_once, call, create_stream, record, refused, resume, resume_stream, retire,
    wait_acked, Conn, Opened,
};

const COLUMNS: &str = "id BIGINT NOT NULL, note STRING";

/// Resumes `id` on `pod`, retrying UNAVAILABLE (fenced, or moved meanwhile) for up to 60 s.
async fn resume_when_unfenced(
    pod: &Server,
    table: &str,
    token: &str,
    id: &str,
) -> (Conn, Option<i64>) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match Conn::open(call(pod, table, token), resume(id, RecordType::Json, None)).await {
            Ok((conn, Opened::Resumed(w))) => return (conn, w),
            Ok((_, other)) => panic!("resume answered {other:?}"),
            Err(s) if s.code() == Code::Unavailable && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await
            }
            Err(s) => panic!("resume on {} refused: {s:?}", pod.url),
        }
    }
}

/// `Release` of `id` on `pod` with `token` as the bearer (None: no authorization).
async fn release_as(url: &str, token: Option<&str>, id: &str) -> Result<(), tonic::Status> {
    let mut client = PersistentStreamsClient::connect(url.to_string())
        .await
        .expect("connect");
    let mut request = tonic::Request::new(ReleaseRequest {
        stream_id: id.to_string(),
    });
    if let Some(t) = token {
        request.metadata_mut().insert(
            "authorization",
            format!("Bearer {t}").parse().expect("header"),
        );
    }
    client.release(request).await.map(|_| ())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persistent_streams_move_between_pods_exactly_once_and_are_fenced_while_the_owner_is_down()
{
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    // Flush every 60 s: only moves, drains and restarts commit.
    let (etcd, [mut pod_a, mut pod_b, mut pod_c]) =
        start_cluster(root, ["pod-a", "pod-b", "pod-c"], "60s", "2s").await;
    let join = etcd.join.clone();
    let t = "main.pxpod.moves";
    let location = pod_a.create_table_at(t, COLUMNS).await;
    let admin = pod_a.token().await;

    // Created on pod-a; 0..100 acked (in pod-a's WAL only).
    let (on_a, id) = create_stream(call(&pod_a, t, &admin), t).await;
    assert!(on_a.send((0..100).map(record)).await);
    wait_acked(&on_a, 99).await;

    // Resumed on pod-b while pod-a is alive and still holds it: pod-a releases.
    let (on_b, watermark) = resume_stream(call(&pod_b, t, &admin), &id).await;
    assert_eq!(watermark, Some(99), "the owner's last acked offset");
    refused(
        "persistent stream: released by its owner for a resume on another pod",
        on_a.finish().await.map_or(Ok(()), Err),
        Code::Aborted,
        "resumed on another connection",
    );
    // 90..=99 resent: acked and dropped; 100..200 new, acked into pod-b's WAL only.
    assert!(on_b.send((90..200).map(record)).await);
    wait_acked(&on_b, 199).await;

    // pod-b SIGKILLed holding acked, uncommitted records: resumes elsewhere are fenced.
    pod_b.kill();
    for pod in [&pod_c, &pod_a] {
        refused(
            "persistent stream: resume while the owner is down (fenced)",
            Conn::open(call(pod, t, &admin), resume(&id, RecordType::Json, None)).await,
            Code::Unavailable,
            "pod-b",
        );
    }
    drop(on_b);
    // Still fenced once the dead pod's lease expired (not registered at all).
    wait_for_pods(&join, Duration::from_secs(15), "pod-b gone", |p| {
        p.iter().all(|p| p["id"] != "pod-b")
    })
    .await;
    refused(
        "persistent stream: resume while the owner is not registered (fenced)",
        Conn::open(call(&pod_c, t, &admin), resume(&id, RecordType::Json, None)).await,
        Code::Unavailable,
        "pod-b",
    );

    // pod-b back with its volume: it commits its replayed WAL, then releases.
    pod_b.restart().await;
    let (on_c, watermark) = resume_when_unfenced(&pod_c, t, &admin, &id).await;
    assert_eq!(watermark, Some(199), "never below an acked offset");
    assert!(on_c.send((200..300).map(record)).await);
    wait_acked(&on_c, 299).await;

    // Retired from pod-a, which does not own it: pod-c's connection ends.
    retire(call(&pod_a, t, &admin), Some(t), &id)
        .await
        .expect("retire from a non-owner pod");
    refused(
        "persistent stream: retired from another pod",
        on_c.finish().await.map_or(Ok(()), Err),
        Code::FailedPrecondition,
        "retired",
    );
    retire(call(&pod_b, t, &admin), Some(t), &id)
        .await
        .expect("retire again (idempotent)");
    for pod in [&pod_a, &pod_b, &pod_c] {
        refused(
            "persistent stream: resume of a retired stream on any pod",
            Conn::open(call(pod, t, &admin), resume(&id, RecordType::Json, None)).await,
            Code::FailedPrecondition,
            "retired",
        );
    }

    // Release is for pods only, never relayed by the router.
    refused(
        "Release without a token",
        release_as(&pod_a.url, None, &id).await,
        Code::Unauthenticated,
        "token",
    );
    refused(
        "Release with a user token",
        release_as(&pod_a.url, Some(&admin), &id).await,
        Code::PermissionDenied,
        "peer token",
    );
    let router = Router::start(&root.join("router"), &join).await;
    let via_router = release_as(&router.url, Some(&admin), &id).await;
    assert_eq!(
        via_router.map_err(|s| s.code()),
        Err(Code::Unimplemented),
        "the router does not relay internal services"
    );

    // A drained owner releases its streams: the resume elsewhere is not fenced.
    let d = "main.pxpod.drain";
    let drained_location = pod_a.create_table_at(d, COLUMNS).await;
    let (held, drained_id) = create_stream(call(&pod_a, d, &admin), d).await;
    assert!(held.send((0..50).map(record)).await);
    wait_acked(&held, 49).await;
    drain_pod(&join, &mut pod_a, "pod-a");
    let _ = held.finish().await;
    let resumed_at = Instant::now();
    let (after, watermark) = resume_stream(call(&pod_b, d, &admin), &drained_id).await;
    assert!(
        resumed_at.elapsed() < Duration::from_secs(5),
        "the resume after a drain is not fenced"
    );
    assert_eq!(watermark, Some(49));
    assert!(after.send((50..80).map(record)).await);
    wait_acked(&after, 79).await;
    assert_eq!(after.finish().await.map(|s| s.code()), None);

    // pod-b and pod-c stop gracefully (commit); each record once in Delta.
    // A pod lost for good: `sluice pod forget` is refused while it is registered, then clears
    // its ownership; the stream resumes elsewhere from Delta, the dead pod's records lost.
    let f = "main.pxpod.forget";
    pod_c.create_table_at(f, COLUMNS).await;
    let (lost, lost_id) = create_stream(call(&pod_c, f, &admin), f).await;
    assert!(lost.send((0..20).map(record)).await);
    wait_acked(&lost, 19).await;
    pod_c.kill();
    drop(lost);
    let forget = |expect_ok: bool| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["pod", "forget", "pod-c", "--join", &join])
            .output()
            .expect("run sluice pod forget");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.success(), expect_ok, "pod forget: {text}");
        text
    };
    assert!(forget(false).contains("is registered"));
    wait_for_pods(&join, Duration::from_secs(15), "pod-c gone", |p| {
        p.iter().all(|p| p["id"] != "pod-c")
    })
    .await;
    assert!(forget(true).contains("1 persistent stream"));
    let (moved, watermark) = resume_stream(call(&pod_b, f, &admin), &lost_id).await;
    assert_eq!(watermark, None, "only the forgotten pod's WAL held 0..20");
    assert_eq!(moved.finish().await.map(|s| s.code()), None);

    pod_b.terminate();
    assert_each_once(&location, 300);
    assert_each_once(&drained_location, 80);
    drop(router);
    drop(etcd);
}
