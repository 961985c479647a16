//! Every class of bad input gets its own precise gRPC status, while a
//! well-behaved stream on the same table keeps getting acks after each bad
//! stream and all its rows land in Delta (invariant 4 of ARCHITECTURE.md).
//!
//! The test prints the table of classes and observed statuses (run with
//! `--nocapture` to see it); README's "gRPC statuses" is this table.

use std::time::Duration;

use arrow_array::{Array, Int64Array};
use prost_types::field_descriptor_proto::Type;
use sluice_proto::RecordType;
use tonic::Code;

use crate::auth::expired_token;
use crate::harness::{read_delta, Server};
use crate::raw::{
    avro_record, create, create_avro, create_json, descriptor, exchange, exchange_raw, json_batch,
    json_record, proto_record, token, Call, OpenStream,
};

const GOOD_BASE: i64 = 1_000_000;

/// An Avro writer schema that fits `main.bad.t`.
const NOTE_AVRO: &str = r#"{"type":"record","name":"Note","fields":[
    {"name":"id","type":"long"},{"name":"note","type":["null","string"]}]}"#;

struct Outcome {
    class: &'static str,
    want: Code,
    got: Option<Code>,
    message: String,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bad_input_class_gets_its_status_and_a_good_stream_carries_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start_with_args(
        dir.path(),
        "200ms",
        &[
            "--max-record-bytes",
            "4096",
            "--max-request-bytes",
            "65536",
            "--max-streams-per-principal",
            "3",
        ],
    )
    .await;
    let t = "main.bad.t";
    let other = "main.bad.other";
    server.create_table(t, "id BIGINT NOT NULL, note STRING");
    server.create_table(other, "id BIGINT NOT NULL");
    let url = server.url.as_str();
    let admin = server.token().await;
    let call = |table| Call {
        url,
        table,
        token: Some(admin.as_str()),
    };

    let mut good = OpenStream::open(call(t)).await.expect("good stream");
    let mut good_sent = 0;
    let good_desc = descriptor(&[("id", 1, Type::Int64), ("note", 2, Type::String)]);
    let big = format!(r#"{{"id": 1, "note": "{}"}}"#, "x".repeat(5000));
    let chunk = format!(r#"{{"id": 1, "note": "{}"}}"#, "y".repeat(3500));

    // (class, expected status, table header, requests, token)
    let cases: Vec<(&str, Code, &str, Vec<_>, Option<String>)> = vec![
        (
            "first message not create_stream",
            Code::FailedPrecondition,
            t,
            vec![json_record(0, r#"{"id": 1}"#)],
            None,
        ),
        (
            "create_stream twice",
            Code::FailedPrecondition,
            t,
            vec![create_json(t), create_json(t)],
            None,
        ),
        (
            "unknown table",
            Code::NotFound,
            "main.bad.nope",
            vec![create_json("main.bad.nope")],
            None,
        ),
        (
            "table_name differs from the table header",
            Code::InvalidArgument,
            t,
            vec![create_json(other)],
            None,
        ),
        (
            "descriptor missing (PROTO stream)",
            Code::InvalidArgument,
            t,
            vec![create(t, RecordType::Proto, None)],
            None,
        ),
        (
            "descriptor malformed",
            Code::InvalidArgument,
            t,
            vec![create(t, RecordType::Proto, Some(vec![0xff, 0xff, 0x01]))],
            None,
        ),
        (
            "descriptor incompatible with the table",
            Code::InvalidArgument,
            t,
            vec![create(
                t,
                RecordType::Proto,
                Some(descriptor(&[("id", 1, Type::String)])),
            )],
            None,
        ),
        (
            "record type unspecified",
            Code::InvalidArgument,
            t,
            vec![create(t, RecordType::Unspecified, None)],
            None,
        ),
        (
            "Avro schema missing (AVRO stream)",
            Code::InvalidArgument,
            t,
            vec![create_avro(t, None)],
            None,
        ),
        (
            "Avro schema that is not a record",
            Code::InvalidArgument,
            t,
            vec![create_avro(t, Some(r#""long""#))],
            None,
        ),
        (
            "Avro schema that does not fit the table",
            Code::InvalidArgument,
            t,
            vec![create_avro(
                t,
                Some(
                    r#"{"type":"record","name":"Note","fields":[
                        {"name":"id","type":"long"},{"name":"note","type":"int"}]}"#,
                ),
            )],
            None,
        ),
        (
            // id 1, then the `note` union's index 1 (string) with no string after it.
            "Avro datum truncated (after a valid one)",
            Code::InvalidArgument,
            t,
            vec![
                create_avro(t, Some(NOTE_AVRO)),
                avro_record(0, vec![2, 0]),
                avro_record(1, vec![2, 2]),
            ],
            None,
        ),
        (
            // id 1, then union index 2 of a two-branch union.
            "Avro datum with a union index out of range",
            Code::InvalidArgument,
            t,
            vec![create_avro(t, Some(NOTE_AVRO)), avro_record(0, vec![2, 4])],
            None,
        ),
        (
            "malformed protobuf record",
            Code::InvalidArgument,
            t,
            vec![
                create(t, RecordType::Proto, Some(good_desc.clone())),
                proto_record(0, vec![0x08]),
            ],
            None,
        ),
        (
            "JSON not an object",
            Code::InvalidArgument,
            t,
            vec![create_json(t), json_record(0, "[1, 2]")],
            None,
        ),
        (
            "JSON syntax error",
            Code::InvalidArgument,
            t,
            vec![create_json(t), json_record(0, "{\"id\": ")],
            None,
        ),
        (
            "JSON wrong type",
            Code::InvalidArgument,
            t,
            vec![create_json(t), json_record(0, r#"{"id": "seven"}"#)],
            None,
        ),
        (
            "JSON unknown field (policy: reject)",
            Code::InvalidArgument,
            t,
            vec![
                create_json(t),
                json_record(0, r#"{"id": 1, "colour": "red"}"#),
            ],
            None,
        ),
        (
            "NOT NULL violated",
            Code::InvalidArgument,
            t,
            vec![create_json(t), json_record(0, r#"{"note": "no id"}"#)],
            None,
        ),
        (
            "offset gap",
            Code::InvalidArgument,
            t,
            vec![
                create_json(t),
                json_record(0, r#"{"id": 1}"#),
                json_record(2, r#"{"id": 2}"#),
            ],
            None,
        ),
        (
            "offset duplicate",
            Code::InvalidArgument,
            t,
            vec![
                create_json(t),
                json_record(0, r#"{"id": 1}"#),
                json_record(0, r#"{"id": 1}"#),
            ],
            None,
        ),
        (
            "offset negative",
            Code::InvalidArgument,
            t,
            vec![create_json(t), json_record(-1, r#"{"id": 1}"#)],
            None,
        ),
        (
            "record over --max-record-bytes",
            Code::ResourceExhausted,
            t,
            vec![create_json(t), json_record(0, &big)],
            None,
        ),
        (
            "request over --max-request-bytes",
            Code::ResourceExhausted,
            t,
            vec![create_json(t), json_batch(0, vec![chunk.clone(); 20])],
            None,
        ),
        (
            "empty batch",
            Code::InvalidArgument,
            t,
            vec![create_json(t), json_batch(0, Vec::new())],
            None,
        ),
        (
            "credentials missing",
            Code::Unauthenticated,
            t,
            vec![create_json(t)],
            Some(String::new()),
        ),
        (
            "credentials malformed",
            Code::Unauthenticated,
            t,
            vec![create_json(t)],
            Some("not-a-jwt".into()),
        ),
        (
            "credentials wrong (bad signature)",
            Code::Unauthenticated,
            t,
            vec![create_json(t)],
            Some(forge(&admin)),
        ),
        (
            "credentials expired",
            Code::Unauthenticated,
            t,
            vec![create_json(t)],
            Some(expired_token(&server, "it-admin", t)),
        ),
        (
            "token for another table",
            Code::PermissionDenied,
            t,
            vec![create_json(t)],
            Some(
                token(
                    url,
                    crate::harness::CLIENT_ID,
                    crate::harness::CLIENT_SECRET,
                    &[other],
                )
                .await,
            ),
        ),
    ];

    let mut outcomes = Vec::new();
    for (class, want, table, requests, tok) in cases {
        let tok = match tok {
            None => Some(admin.clone()),
            Some(t) if t.is_empty() => None,
            Some(t) => Some(t),
        };
        let (_, status) = exchange(
            Call {
                url,
                table,
                token: tok.as_deref(),
            },
            requests,
        )
        .await;
        outcomes.push(Outcome {
            class,
            want,
            got: status.as_ref().map(|s| s.code()),
            message: status.map(|s| s.message().to_string()).unwrap_or_default(),
        });
        // The well-behaved stream keeps getting acks after every bad one.
        let o = good
            .send(&format!(r#"{{"id": {}}}"#, GOOD_BASE + good_sent))
            .await;
        good_sent += 1;
        good.wait_acked(o).await;
    }

    // An over-size request right behind valid ones (likely in the same run):
    // the valid prefix is acked, then the limit's status.
    let (acks, status) = exchange(
        call(t),
        vec![
            create_json(t),
            json_record(0, r#"{"id": 1}"#),
            json_record(1, r#"{"id": 2}"#),
            json_batch(2, vec![chunk.clone(); 20]),
        ],
    )
    .await;
    assert_eq!(acks.last(), Some(&1), "valid prefix acked: {acks:?}");
    assert_eq!(
        status.map(|s| s.code()),
        Some(Code::ResourceExhausted),
        "over-size request after a valid prefix"
    );

    // Bytes that are no EphemeralStreamRequest at all (a length-delimited
    // field whose length is a varint that never ends).
    let garbage = vec![
        0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    ];
    let status = exchange_raw(call(t), vec![garbage]).await;
    outcomes.push(Outcome {
        class: "request bytes that are no EphemeralStreamRequest",
        want: Code::InvalidArgument,
        got: status.as_ref().map(|s| s.code()),
        message: status.map(|s| s.message().to_string()).unwrap_or_default(),
    });
    let o = good
        .send(&format!(r#"{{"id": {}}}"#, GOOD_BASE + good_sent))
        .await;
    good_sent += 1;
    good.wait_acked(o).await;

    // Too many streams: the admin holds the good stream plus two more; the
    // fourth is refused (limit 3 per principal).
    let held1 = OpenStream::open(call(t)).await.expect("second stream");
    let held2 = OpenStream::open(call(t)).await.expect("third stream");
    let (_, status) = exchange(call(t), vec![create_json(t)]).await;
    outcomes.push(Outcome {
        class: "too many streams (per principal)",
        want: Code::ResourceExhausted,
        got: status.as_ref().map(|s| s.code()),
        message: status.map(|s| s.message().to_string()).unwrap_or_default(),
    });
    assert!(held1.close().await.is_none());
    assert!(held2.close().await.is_none());
    let o = good
        .send(&format!(r#"{{"id": {}}}"#, GOOD_BASE + good_sent))
        .await;
    good_sent += 1;
    good.wait_acked(o).await;
    assert!(good.close().await.is_none(), "good stream ends OK");

    println!("| bad input | status |\n|---|---|");
    for o in &outcomes {
        let got = o
            .got
            .map(|c| format!("{c:?}"))
            .unwrap_or_else(|| "OK".into());
        println!("| {} | {got} — {} |", o.class, o.message.replace('|', "/"));
    }
    for o in &outcomes {
        assert_eq!(o.got, Some(o.want), "{}: {}", o.class, o.message);
        assert!(
            !o.message.contains(&admin),
            "{}: message leaks the token",
            o.class
        );
        assert!(!o.message.contains(crate::harness::CLIENT_SECRET));
    }
    let named = |class: &str, needle: &str| {
        let o = outcomes.iter().find(|o| o.class == class).expect("class");
        assert!(
            o.message.contains(needle),
            "{class}: `{}` lacks `{needle}`",
            o.message
        );
    };
    named("descriptor incompatible with the table", "id");
    named(
        "Avro schema missing (AVRO stream)",
        "avro_schema_json is required for AVRO streams",
    );
    named(
        "Avro schema that is not a record",
        "Avro schema must be a record",
    );
    named(
        "Avro schema that does not fit the table",
        "Avro field `note`: int cannot fill column type STRING",
    );
    named(
        "Avro datum truncated (after a valid one)",
        "record at offset 1: field `note` at byte 2: record is truncated",
    );
    named(
        "Avro datum with a union index out of range",
        "union branch index 2 is out of range (the union has 2 branches)",
    );
    named("NOT NULL violated", "id");
    named("offset gap", "expected 1");
    named("record over --max-record-bytes", "--max-record-bytes");
    named("request over --max-request-bytes", "--max-request-bytes");
    named(
        "too many streams (per principal)",
        "--max-streams-per-principal",
    );
    named("credentials expired", "expired");
    named("token for another table", "scoped to");

    // Every record of the good stream landed.
    let info = server.table_info(t).await;
    let location = info["storage_location"]
        .as_str()
        .expect("location")
        .to_string();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let mut ids = Vec::new();
        for b in read_delta(&location).await {
            let col = b.column_by_name("id").expect("id column");
            let col = col.as_any().downcast_ref::<Int64Array>().expect("int64");
            ids.extend(
                (0..col.len())
                    .map(|i| col.value(i))
                    .filter(|v| *v >= GOOD_BASE),
            );
        }
        ids.sort_unstable();
        if ids.len() as i64 == good_sent {
            assert_eq!(ids, (GOOD_BASE..GOOD_BASE + good_sent).collect::<Vec<_>>());
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "good rows: {} of {good_sent}",
            ids.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The token with its signature replaced (same length, wrong bytes).
fn forge(token: &str) -> String {
    let (signed, sig) = token.rsplit_once('.').expect("jwt");
    let flipped: String = sig
        .chars()
        .map(|c| if c == 'A' { 'B' } else { 'A' })
        .collect();
    format!("{signed}.{flipped}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_stream_is_closed_naming_the_timeout_and_its_records_stay_acked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server =
        Server::start_with_args(dir.path(), "200ms", &["--idle-stream-timeout", "1s"]).await;
    let t = "main.bad.idle";
    server.create_table(t, "id BIGINT NOT NULL");
    let admin = server.token().await;
    let mut stream = OpenStream::open(Call {
        url: &server.url,
        table: t,
        token: Some(&admin),
    })
    .await
    .expect("open");
    let o = stream.send(r#"{"id": 1}"#).await;
    stream.wait_acked(o).await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let status = stream.close().await.expect("closed by the server");
    assert_eq!(status.code(), Code::Unavailable);
    assert!(
        status.message().contains("--idle-stream-timeout"),
        "{}",
        status.message()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_over_the_http2_limit_are_refused_and_the_connection_carries_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), "200ms").await;
    let t = "main.bad.headers";
    server.create_table(t, "id BIGINT NOT NULL");
    let admin = server.token().await;
    let mut client = sluice_proto::zerobus_client::ZerobusClient::connect(server.url.clone())
        .await
        .expect("connect");
    let mut req = tonic::Request::new(futures::stream::iter(vec![create_json(t)]));
    req.metadata_mut().insert(
        "authorization",
        format!("Bearer {admin}").parse().expect("meta"),
    );
    req.metadata_mut()
        .insert("x-databricks-zerobus-table-name", t.parse().expect("meta"));
    req.metadata_mut()
        .insert("x-padding", "p".repeat(20 << 10).parse().expect("meta"));
    let status = match client.ephemeral_stream(req).await {
        Err(status) => status,
        Ok(r) => {
            let mut inbound = r.into_inner();
            loop {
                match inbound.message().await {
                    Ok(Some(_)) => continue,
                    Ok(None) => panic!("a 20 KiB header list was accepted"),
                    Err(status) => break status,
                }
            }
        }
    };
    println!(
        "| header list over --h2-max-header-bytes | {:?} — {} |",
        status.code(),
        status.message()
    );
    // hyper refuses the header block before any gRPC code runs: HTTP 431.
    assert!(status.message().contains("431"), "{status:?}");
    // A well-formed stream right after, on a new connection, is served.
    let (acks, end) = exchange(
        Call {
            url: &server.url,
            table: t,
            token: Some(&admin),
        },
        vec![create_json(t), json_record(0, r#"{"id": 1}"#)],
    )
    .await;
    assert!(end.is_none(), "{end:?}");
    assert_eq!(acks.last(), Some(&0));
}
