//! Precise statuses for protocol misuse, seen by a raw tonic client (the
//! official SDKs never send these), while the stream's valid prefix is acked.

use sluice_proto::zerobus_client::ZerobusClient;
use sluice_proto::{
    ephemeral_stream_request::Payload, ephemeral_stream_response, ingest_record_request,
    CreateIngestStreamRequest, EphemeralStreamRequest, IngestRecordRequest, RecordType,
};
use tonic::Code;

use crate::harness::Server;

fn create(table: &str) -> EphemeralStreamRequest {
    EphemeralStreamRequest {
        payload: Some(Payload::CreateStream(CreateIngestStreamRequest {
            table_name: Some(table.into()),
            descriptor_proto: None,
            record_type: Some(RecordType::Json as i32),
            avro_schema_json: None,
        })),
    }
}

fn json_record(offset: i64, text: &str) -> EphemeralStreamRequest {
    EphemeralStreamRequest {
        payload: Some(Payload::IngestRecord(IngestRecordRequest {
            offset_id: Some(offset),
            record: Some(ingest_record_request::Record::JsonRecord(text.into())),
        })),
    }
}

/// Sends `requests` on one stream; returns the acked offsets and the final status.
async fn exchange(
    server: &Server,
    table: &str,
    token: Option<String>,
    requests: Vec<EphemeralStreamRequest>,
) -> (Vec<i64>, Option<tonic::Status>) {
    let mut client = ZerobusClient::connect(server.url.clone())
        .await
        .expect("connect");
    let mut req = tonic::Request::new(futures::stream::iter(requests));
    if let Some(t) = token {
        req.metadata_mut().insert(
            "authorization",
            format!("Bearer {t}").parse().expect("meta"),
        );
    }
    req.metadata_mut().insert(
        "x-databricks-zerobus-table-name",
        table.parse().expect("meta"),
    );
    let mut acks = Vec::new();
    let mut inbound = match client.ephemeral_stream(req).await {
        Ok(r) => r.into_inner(),
        Err(status) => return (acks, Some(status)),
    };
    loop {
        match inbound.message().await {
            Ok(Some(m)) => {
                if let Some(ephemeral_stream_response::Payload::IngestRecordResponse(a)) = m.payload
                {
                    acks.push(a.durability_ack_up_to_offset.expect("ack offset"));
                }
            }
            Ok(None) => return (acks, None),
            Err(status) => return (acks, Some(status)),
        }
    }
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
