//! Persistent streams on one pod, over raw gRPC: every refusal of `PersistentStream` and
//! `RetireStream` (README's gRPC status table names these tests), the exactly-once resume
//! (offsets continue, resent records acked and dropped), and SIGKILLs mid-stream: after
//! each restart the stream resumes at its watermark — never below an acked offset — and
//! every record is exactly once in Delta (read with Python `deltalake` and `polars`).
//!
//! Kills: 3 by default; a long run: `SLUICE_PSTREAM_KILLS=50 cargo test -p sluice-server
//! --test it persistent_stream_survives -- --nocapture`.

use std::sync::atomic::Ordering;
use std::time::Duration;

use prost_types::field_descriptor_proto::Type;
use rand::Rng;
use sluice_proto::RecordType;
use tonic::Code;

use crate::auth::{newest_key, signed_token};
use crate::harness::{Server, CLIENT_ID};
use crate::persistent_raw::{
    assert_each_once, call, create, create_stream, record, refused, resume, resume_stream, retire,
    wait_acked, Conn, Opened,
};
use crate::raw::descriptor;

const COLUMNS: &str = "id BIGINT NOT NULL, note STRING";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_persistent_stream_continues_its_offsets_and_drops_resent_records() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = Server::start(dir.path(), "200ms").await;
    let t = "main.pstream.resume";
    let location = server.create_table_at(t, COLUMNS).await;
    let admin = server.token().await;

    let (first, id) = create_stream(call(&server, t, &admin), t).await;
    uuid_shaped(&id);
    assert!(first.send((0..100).map(record)).await);
    wait_acked(&first, 99).await;
    assert_eq!(first.finish().await.map(|s| s.code()), None);

    let (second, watermark) = resume_stream(call(&server, t, &admin), &id).await;
    assert_eq!(watermark, Some(99), "the last acked offset");
    // 90..=99 again (a producer resending what it did not see acked): acked, dropped.
    assert!(second.send((90..200).map(record)).await);
    wait_acked(&second, 199).await;
    assert_eq!(second.finish().await.map(|s| s.code()), None);

    // A gap is refused like on an ephemeral stream.
    let (third, watermark) = resume_stream(call(&server, t, &admin), &id).await;
    assert_eq!(watermark, Some(199));
    assert!(third.send([record(205)]).await);
    refused(
        "persistent stream: offset gap",
        third.finish().await.map_or(Ok(()), Err),
        Code::InvalidArgument,
        "expected 200",
    );
    server.terminate();
    assert_each_once(&location, 200);
    let registry =
        std::fs::read_to_string(dir.path().join("persistent-streams.json")).expect("registry");
    assert!(registry.contains(&id), "{registry}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(dir.path().join("persistent-streams.json"))
        .expect("stat")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

fn uuid_shaped(id: &str) {
    assert!(uuid::Uuid::parse_str(id).is_ok(), "not a UUID: {id}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persistent_stream_refusals_have_their_statuses() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = Server::start(dir.path(), "200ms").await;
    let t = "main.pstream.refusals";
    let other = "main.pstream.other";
    server.create_table(t, COLUMNS);
    server.create_table(other, COLUMNS);
    let admin = server.token().await;
    let proto = descriptor(&[("id", 1, Type::Int64), ("note", 2, Type::String)]);
    let (conn, proto_id) = match Conn::open(
        call(&server, t, &admin),
        create(t, RecordType::Proto, Some(proto.clone())),
    )
    .await
    {
        Ok((conn, Opened::Created(id))) => (conn, id),
        other => panic!("create: {:?}", other.map(|(_, o)| o)),
    };
    assert_eq!(conn.finish().await.map(|s| s.code()), None);

    refused(
        "persistent stream: unknown stream id",
        Conn::open(
            call(&server, t, &admin),
            resume("no-such-stream", RecordType::Json, None),
        )
        .await,
        Code::NotFound,
        "no-such-stream",
    );
    refused(
        "persistent stream: resume with another record type",
        Conn::open(
            call(&server, t, &admin),
            resume(&proto_id, RecordType::Json, None),
        )
        .await,
        Code::InvalidArgument,
        "record type",
    );
    let narrower = descriptor(&[("id", 1, Type::Int64)]);
    refused(
        "persistent stream: resume with a descriptor of another plan",
        Conn::open(
            call(&server, t, &admin),
            resume(&proto_id, RecordType::Proto, Some(narrower)),
        )
        .await,
        Code::InvalidArgument,
        "plan",
    );
    // The same descriptor resumes.
    let resumed = Conn::open(
        call(&server, t, &admin),
        resume(&proto_id, RecordType::Proto, Some(proto.clone())),
    )
    .await
    .map(|(c, o)| (o, c));
    let (opened, conn) = resumed.expect("the same descriptor resumes");
    assert_eq!(opened, Opened::Resumed(None), "nothing written yet");
    assert_eq!(conn.finish().await.map(|s| s.code()), None);

    // A token scoped to another table: no MODIFY on the stream's table.
    let (kid, secret) = newest_key(&server);
    let now = chrono::Utc::now().timestamp();
    let claims = serde_json::json!({
        "sub": CLIENT_ID, "iat": now, "exp": now + 3600, "tables": [other], "admin": true
    });
    let scoped = signed_token(&kid, &secret, &claims);
    refused(
        "persistent stream: resume without MODIFY on the table",
        Conn::open(
            call(&server, t, &scoped),
            resume(&proto_id, RecordType::Proto, None),
        )
        .await,
        Code::PermissionDenied,
        t,
    );
    refused(
        "RetireStream without MODIFY on the table",
        retire(call(&server, t, &scoped), Some(t), &proto_id).await,
        Code::PermissionDenied,
        t,
    );
    refused(
        "RetireStream: unknown stream id",
        retire(call(&server, t, &admin), Some(t), "no-such-stream").await,
        Code::NotFound,
        "no-such-stream",
    );
    refused(
        "RetireStream: table_name of another table",
        retire(call(&server, t, &admin), Some(other), &proto_id).await,
        Code::InvalidArgument,
        other,
    );

    // Retire ends the open connection: CloseStreamSignal, then FAILED_PRECONDITION.
    let (open, json_id) = create_stream(call(&server, t, &admin), t).await;
    assert!(open.send((0..10).map(record)).await);
    wait_acked(&open, 9).await;
    retire(call(&server, t, &admin), Some(t), &json_id)
        .await
        .expect("retire");
    retire(call(&server, t, &admin), None, &json_id)
        .await
        .expect("retire is idempotent");
    let signalled = open.close_signalled.clone();
    refused(
        "persistent stream: retired while open",
        open.finish().await.map_or(Ok(()), Err),
        Code::FailedPrecondition,
        "retired",
    );
    assert!(signalled.load(Ordering::SeqCst), "CloseStreamSignal first");
    refused(
        "persistent stream: resume of a retired stream",
        Conn::open(
            call(&server, t, &admin),
            resume(&json_id, RecordType::Json, None),
        )
        .await,
        Code::FailedPrecondition,
        &json_id,
    );

    // A resume on a new connection ends the older one (ABORTED) and takes over.
    let (older, busy_id) = create_stream(call(&server, t, &admin), t).await;
    assert!(older.send((0..5).map(record)).await);
    wait_acked(&older, 4).await;
    let (newer, watermark) = resume_stream(call(&server, t, &admin), &busy_id).await;
    assert_eq!(watermark, Some(4));
    refused(
        "persistent stream: resumed on another connection",
        older.finish().await.map_or(Ok(()), Err),
        Code::Aborted,
        "resumed on another connection",
    );
    assert_eq!(newer.finish().await.map(|s| s.code()), None);

    // A stream held by another pod (single node: the registry names another owner).
    server.terminate();
    let path = dir.path().join("persistent-streams.json");
    let text = std::fs::read_to_string(&path).expect("registry");
    std::fs::write(&path, text.replace("\"single-node\"", "\"pod-b\"")).expect("rewrite");
    server.restart().await;
    let admin = server.token().await;
    refused(
        "persistent stream: resume of a stream held by another pod",
        Conn::open(
            call(&server, t, &admin),
            resume(&proto_id, RecordType::Proto, None),
        )
        .await,
        Code::Unavailable,
        "pod-b",
    );
    server.log_without_panic();
}

fn kills_wanted() -> usize {
    std::env::var("SLUICE_PSTREAM_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persistent_stream_survives_sigkills_with_every_record_once_in_delta() {
    let kills = kills_wanted();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = Server::start(dir.path(), "300ms").await;
    let t = "main.pstream.kills";
    let location = server.create_table_at(t, COLUMNS).await;
    let mut admin = server.token().await;
    let (mut conn, id) = create_stream(call(&server, t, &admin), t).await;
    let mut next = 0i64;
    let mut acked_before_kill = -1i64;
    let mut rng = rand::rng();
    for kill in 0..=kills {
        // Produce until the kill (or, the last time, a fixed amount).
        let chunk = if kill == kills { 500 } else { 1_000_000 };
        let sender = conn.sender().expect("sender");
        let producer = tokio::spawn(async move {
            for offset in next..next + chunk {
                if sender.send(record(offset)).await.is_err() {
                    return;
                }
                if offset % 64 == 0 {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            }
        });
        if kill == kills {
            producer.await.expect("producer");
            wait_acked(&conn, next + chunk - 1).await;
            next += chunk;
            assert_eq!(conn.finish().await.map(|s| s.code()), None);
            break;
        }
        tokio::time::sleep(Duration::from_millis(rng.random_range(300..900))).await;
        acked_before_kill = acked_before_kill.max(conn.acked.load(Ordering::SeqCst));
        server.kill();
        producer.abort();
        drop(conn);
        server.restart().await;
        admin = server.token().await;
        let (resumed, watermark) = resume_stream(call(&server, t, &admin), &id).await;
        let watermark = watermark.unwrap_or(-1);
        assert!(
            watermark >= acked_before_kill,
            "kill {kill}: watermark {watermark} below acked offset {acked_before_kill}"
        );
        println!("kill {kill}: acked {acked_before_kill}, watermark {watermark}");
        // Resend a few records at or below the watermark: acked and dropped.
        next = (watermark - 3).max(0);
        conn = resumed;
        if next <= watermark {
            assert!(conn.send((next..=watermark).map(record)).await);
            next = watermark + 1;
        }
    }
    server.terminate();
    assert!(next > 500, "records were written: {next}");
    assert_each_once(&location, next);
    server.log_without_panic();
}
