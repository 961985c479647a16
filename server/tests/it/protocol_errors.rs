//! Precise statuses for protocol misuse, seen by a raw tonic client (the
//! official SDKs never send these), while the stream's valid prefix is acked.

use tonic::Code;

use crate::harness::Server;
use crate::raw::{create_json as create, json_record, Call};

/// Sends `requests` on one stream with the given token.
async fn exchange(
    server: &Server,
    table: &str,
    token: Option<String>,
    requests: Vec<sluice_proto::EphemeralStreamRequest>,
) -> (Vec<i64>, Option<tonic::Status>) {
    let call = Call {
        url: &server.url,
        table,
        token: token.as_deref(),
    };
    crate::raw::exchange(call, requests).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protocol_misuse_gets_precise_statuses_and_the_valid_prefix_is_acked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), "200ms").await;
    let table = "main.proto.errors";
    server.create_table(table, "id BIGINT NOT NULL, note STRING");
    let token = server.token().await;

    let (_, status) = exchange(&server, table, None, vec![create(table)]).await;
    assert_eq!(status.expect("status").code(), Code::Unauthenticated);

    let (_, status) = exchange(
        &server,
        table,
        Some("abc.def.ghi".into()),
        vec![create(table)],
    )
    .await;
    let status = status.expect("status");
    assert_eq!(status.code(), Code::Unauthenticated);
    assert!(
        status.message().contains("malformed"),
        "{}",
        status.message()
    );

    let (_, status) = exchange(
        &server,
        table,
        Some(token.clone()),
        vec![json_record(0, "{}")],
    )
    .await;
    assert_eq!(status.expect("status").code(), Code::FailedPrecondition);

    let missing = "main.proto.missing";
    let (_, status) = exchange(&server, missing, Some(token.clone()), vec![create(missing)]).await;
    let status = status.expect("status");
    assert_eq!(status.code(), Code::NotFound);
    assert!(status.message().contains(missing));

    // Valid records 0 and 1, then a gap: 0..=1 acked, then INVALID_ARGUMENT naming the offset.
    let requests = vec![
        create(table),
        json_record(0, r#"{"id": 1, "note": "a"}"#),
        json_record(1, r#"{"id": 2}"#),
        json_record(3, r#"{"id": 3}"#),
    ];
    let (acks, status) = exchange(&server, table, Some(token.clone()), requests).await;
    assert_eq!(acks.last(), Some(&1), "valid prefix acked: {acks:?}");
    let status = status.expect("status");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(
        status.message().contains("offset_id 3, expected 2"),
        "{}",
        status.message()
    );

    // A NOT NULL violation names the column and the offset.
    let requests = vec![create(table), json_record(0, r#"{"note": "no id"}"#)];
    let (acks, status) = exchange(&server, table, Some(token.clone()), requests).await;
    assert!(acks.is_empty());
    let status = status.expect("status");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(
        status.message().contains("offset 0") && status.message().contains("id"),
        "{}",
        status.message()
    );

    // A clean stream ends OK with every record acked.
    let requests = vec![
        create(table),
        json_record(0, r#"{"id": 10}"#),
        json_record(1, r#"{"id": 11}"#),
    ];
    let (acks, status) = exchange(&server, table, Some(token), requests).await;
    assert!(status.is_none(), "{status:?}");
    assert_eq!(acks.last(), Some(&1));
}
