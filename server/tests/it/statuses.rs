//! The rows of README's "gRPC statuses" that need more than one bad request: a
//! `RetireStream` naming no stream (the other persistent stream refusals are in
//! `persistent.rs`), a token signed by a key the pod does not have, and a pod that
//! shuts down under an open stream. Each test observes the status on a raw tonic client and
//! prints it as a table row (run with `--nocapture` to see them).

use std::time::Duration;

use sluice_proto::zerobus_client::ZerobusClient;
use sluice_proto::{
    ephemeral_stream_request, persistent_stream_request, persistent_stream_response,
    CreatePersistentStreamRequest, PersistentStreamRequest, RetireStreamRequest,
};
use tonic::Code;

use crate::auth::{newest_key, signed_token};
use crate::harness::{Server, CLIENT_ID};
use crate::raw::{create_json, exchange, request, Call, OpenStream};

/// Prints `status` as a row of the README table and asserts its code and that its message
/// contains `needle`.
fn observed(class: &str, status: &tonic::Status, code: Code, needle: &str) {
    println!(
        "| {class} | {:?} — {} |",
        status.code(),
        status.message().replace('|', "/")
    );
    assert_eq!(status.code(), code, "{class}: {status:?}");
    assert!(
        status.message().contains(needle),
        "{class}: `{}` lacks `{needle}`",
        status.message()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persistent_streams_are_served_and_a_retire_naming_no_stream_is_invalid() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), "200ms").await;
    let t = "main.status.persistent";
    server.create_table(t, "id BIGINT NOT NULL");
    let admin = server.token().await;
    let mut client = ZerobusClient::connect(server.url.clone())
        .await
        .expect("connect");
    let call = Call {
        url: &server.url,
        table: t,
        token: Some(&admin),
    };
    let Some(ephemeral_stream_request::Payload::CreateStream(create_stream)) =
        create_json(t).payload
    else {
        panic!("create_json builds a create_stream request");
    };
    let create = PersistentStreamRequest {
        payload: Some(persistent_stream_request::Payload::CreateStream(
            CreatePersistentStreamRequest {
                create_stream: Some(create_stream),
            },
        )),
    };
    let answer = client
        .persistent_stream(request(&call, futures::stream::iter(vec![create])))
        .await
        .expect("PersistentStream is served")
        .into_inner()
        .message()
        .await
        .expect("create answered");
    assert!(
        matches!(
            answer.and_then(|m| m.payload),
            Some(persistent_stream_response::Payload::CreateStreamResponse(c)) if c.stream_id.is_some()
        ),
        "a persistent stream gets its durable id"
    );

    let status = client
        .retire_stream(request(
            &call,
            RetireStreamRequest {
                table_name: Some(t.into()),
                identifier: None,
            },
        ))
        .await
        .expect_err("a retire naming no stream is refused");
    observed(
        "RetireStream without stream_id",
        &status,
        Code::InvalidArgument,
        "stream_id is missing",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_signed_by_a_key_the_pod_does_not_have_is_unauthenticated() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), "200ms").await;
    let t = "main.status.keys";
    server.create_table(t, "id BIGINT NOT NULL");
    let now = chrono::Utc::now().timestamp();
    let claims = serde_json::json!({
        "sub": CLIENT_ID, "iat": now, "exp": now + 3600, "tables": [t], "admin": true
    });
    let call = |token| Call {
        url: &server.url,
        table: t,
        token: Some(token),
    };

    // Control: the same claims signed with the pod's own key open a stream.
    let (kid, secret) = newest_key(&server);
    let genuine = signed_token(&kid, &secret, &claims);
    let (_, status) = exchange(call(&genuine), vec![create_json(t)]).await;
    assert!(status.is_none(), "the genuine token is refused: {status:?}");

    // A key id no pod ever issued, with a secret of its own.
    let unknown = signed_token("0123456789abcdef0123456789abcdef", &[7u8; 32], &claims);
    let (_, status) = exchange(call(&unknown), vec![create_json(t)]).await;
    let status = status.expect("refused");
    observed(
        "credentials signed by an unknown key",
        &status,
        Code::Unauthenticated,
        "unknown key",
    );
    // A known key id with the wrong secret is a bad signature, not an unknown key.
    let wrong_secret = signed_token(&kid, &[7u8; 32], &claims);
    let (_, status) = exchange(call(&wrong_secret), vec![create_json(t)]).await;
    let status = status.expect("refused");
    observed(
        "credentials with a known key id and a wrong secret",
        &status,
        Code::Unauthenticated,
        "signature is invalid",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_shutting_down_ends_an_open_stream_with_unavailable_after_acking_its_records() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = Server::start(dir.path(), "200ms").await;
    let t = "main.status.shutdown";
    server.create_table(t, "id BIGINT NOT NULL");
    let admin = server.token().await;
    let mut stream = OpenStream::open(Call {
        url: &server.url,
        table: t,
        token: Some(&admin),
    })
    .await
    .expect("open");
    let mut last = 0;
    for id in 0..10 {
        last = stream.send(&format!(r#"{{"id": {id}}}"#)).await;
    }
    stream.wait_acked(last).await;
    let acked = stream.acked.clone();

    server.sigterm();
    let status = stream
        .ended_by_server(Duration::from_secs(30))
        .await
        .expect("the stream ends with a status");
    observed(
        "pod shutting down (open stream)",
        &status,
        Code::Unavailable,
        "shutting down",
    );
    assert_eq!(
        acked.load(std::sync::atomic::Ordering::SeqCst),
        last,
        "every record was acked before the stream ended"
    );
    assert!(
        server.wait_exit(Duration::from_secs(60)),
        "the pod did not stop cleanly:\n{}",
        server.log()
    );
}
