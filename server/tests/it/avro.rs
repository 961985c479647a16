//! Avro streams (record type AVRO) against a real `sluice serve`: the official Rust SDK
//! 2.12.0 with its `avro` feature sends records it encodes itself (`AvroRecord`) and
//! pre-encoded datums (`AvroBytes`), every mapped type read back exactly from Delta; acked
//! Avro records survive SIGKILL and are replayed from the WAL exactly once (the writer
//! schema comes back from the stream-open frame); a persistent Avro stream resumes with
//! the schema its registry record keeps. The bad-input rows (schema not a record, not
//! fitting, truncated datum, union index out of range) run in `bad_input.rs` beside a
//! neighbour stream.

#![allow(deprecated)] // apache-avro 0.22's datum functions, see zeroparser's differential test

use std::collections::HashMap;
use std::time::Duration;

use apache_avro::types::Value as Avro;
use apache_avro::{Decimal, Schema, Uuid};
use bytes::Bytes;
use databricks_zerobus_ingest_sdk::{AvroBytes, AvroRecord, ZerobusStream};
use serde_json::json;
use sluice_proto::{
    ingest_record_request, persistent_stream_request::Payload, CreateIngestStreamRequest,
    CreatePersistentStreamRequest, IngestRecordRequest, PersistentStreamRequest, RecordType,
};

use crate::harness::{read_delta, wait_for_rows, Server, CLIENT_ID, CLIENT_SECRET};
use crate::persistent_raw::{assert_each_once, call, resume, wait_acked, Conn, Opened};
use crate::rows::rows_as_json;

const COLUMNS: &str = "id BIGINT NOT NULL, name STRING, score DOUBLE, day DATE, \
    ts TIMESTAMP, local TIMESTAMP_NTZ, color STRING, price STRING, uid STRING, raw BINARY, \
    tags ARRAY<STRING>, attrs MAP<STRING, BIGINT>, pt STRUCT<x: DOUBLE, y: DOUBLE>";

const SCHEMA: &str = r#"{"type":"record","name":"Reading","namespace":"iot","fields":[
  {"name":"id","type":"long"},
  {"name":"name","type":["null","string"]},
  {"name":"score","type":"float"},
  {"name":"day","type":{"type":"int","logicalType":"date"}},
  {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
  {"name":"local","type":["null",{"type":"long","logicalType":"local-timestamp-micros"}]},
  {"name":"color","type":{"type":"enum","name":"Color","symbols":["RED","GREEN"]}},
  {"name":"price","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}},
  {"name":"uid","type":{"type":"string","logicalType":"uuid"}},
  {"name":"raw","type":{"type":"fixed","name":"Raw2","size":2}},
  {"name":"tags","type":{"type":"array","items":"string"}},
  {"name":"attrs","type":["null",{"type":"map","values":"long"}]},
  {"name":"pt","type":["null",{"type":"record","name":"Pt","fields":[
      {"name":"x","type":"double"},{"name":"y","type":"double"}]}]}
]}"#;

/// Record `i` as apache-avro's value.
fn value(i: i64) -> Avro {
    let name = if i % 4 == 3 {
        Avro::Union(0, Box::new(Avro::Null))
    } else {
        Avro::Union(1, Box::new(Avro::String(format!("n{i}"))))
    };
    let pt = if i % 5 == 4 {
        Avro::Union(0, Box::new(Avro::Null))
    } else {
        Avro::Union(
            1,
            Box::new(Avro::Record(vec![
                ("x".into(), Avro::Double(i as f64)),
                ("y".into(), Avro::Double(-(i as f64) / 2.0)),
            ])),
        )
    };
    let cents = (i * 125 - 300) as i32;
    Avro::Record(vec![
        ("id".into(), Avro::Long(i)),
        ("name".into(), name),
        ("score".into(), Avro::Float(i as f32 + 0.5)),
        ("day".into(), Avro::Date(19_000 + i as i32)),
        ("ts".into(), Avro::TimestampMillis(1_700_000_000_000 + i)),
        (
            "local".into(),
            Avro::Union(1, Box::new(Avro::LocalTimestampMicros(1_000_000 * i))),
        ),
        (
            "color".into(),
            Avro::Enum((i % 2) as u32, ["RED", "GREEN"][(i % 2) as usize].into()),
        ),
        (
            "price".into(),
            Avro::Decimal(Decimal::from(cents.to_be_bytes())),
        ),
        ("uid".into(), Avro::Uuid(Uuid::from_u128(i as u128 + 1))),
        ("raw".into(), Avro::Fixed(2, vec![i as u8, 0xAB])),
        (
            "tags".into(),
            Avro::Array((0..i % 3).map(|k| Avro::String(format!("t{k}"))).collect()),
        ),
        (
            "attrs".into(),
            Avro::Union(
                1,
                Box::new(Avro::Map(HashMap::from([("k".to_string(), Avro::Long(i))]))),
            ),
        ),
        ("pt".into(), pt),
    ])
}

/// Record `i` as the Delta row it must become (rows.rs conventions).
fn expected(i: i64) -> serde_json::Value {
    let cents = i * 125 - 300;
    let price = format!(
        "{}{}.{:02}",
        if cents < 0 { "-" } else { "" },
        cents.abs() / 100,
        cents.abs() % 100
    );
    json!({
        "id": i,
        "name": if i % 4 == 3 { serde_json::Value::Null } else { json!(format!("n{i}")) },
        "score": i as f64 + 0.5,
        "day": 19_000 + i,
        "ts": (1_700_000_000_000 + i) * 1000,
        "local": 1_000_000 * i,
        "color": if i % 2 == 0 { "RED" } else { "GREEN" },
        "price": price,
        "uid": Uuid::from_u128(i as u128 + 1).hyphenated().to_string(),
        "raw": base64_of(&[i as u8, 0xAB]),
        "tags": (0..i % 3).map(|k| format!("t{k}")).collect::<Vec<_>>(),
        "attrs": {"k": i},
        "pt": if i % 5 == 4 { serde_json::Value::Null } else { json!({"x": i as f64, "y": -(i as f64) / 2.0}) },
    })
}

fn base64_of(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn datum(i: i64) -> Vec<u8> {
    let schema = Schema::parse_str(SCHEMA).expect("schema");
    apache_avro::to_avro_datum(&schema, value(i)).expect("encode")
}

/// Reads `location` and checks it holds exactly records `0..n`, each once.
async fn assert_rows(location: &str, n: i64) {
    let mut rows = rows_as_json(&read_delta(location).await);
    rows.sort_by_key(|r| r["id"].as_i64());
    assert_eq!(rows.len() as i64, n, "each record exactly once");
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row, &expected(i as i64), "row {i}");
    }
}

/// An official-SDK Avro stream of [`SCHEMA`] to `table`.
async fn avro_stream(server: &Server, table: &str) -> ZerobusStream {
    server
        .sdk()
        .stream_builder()
        .table(table)
        .oauth(CLIENT_ID, CLIENT_SECRET)
        .avro(SCHEMA)
        .build()
        .await
        .expect("avro stream")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_rust_sdk_streams_avro_records_and_datums() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), "200ms").await;
    let table = "main.avro.rust_sdk";
    let location = server.create_table_at(table, COLUMNS).await;
    let stream = avro_stream(&server, table).await;
    // Values the SDK encodes, one by one and as a batch; then pre-encoded datums.
    for i in 0..100 {
        stream
            .ingest_record_offset(AvroRecord(value(i)))
            .await
            .expect("ingest record");
    }
    stream
        .ingest_records_offset((100..600).map(|i| AvroRecord(value(i))))
        .await
        .expect("ingest batch");
    stream
        .ingest_records_offset((600..1000).map(|i| AvroBytes(datum(i))))
        .await
        .expect("ingest datums");
    stream.flush().await.expect("flush");
    let mut stream = stream;
    stream.close().await.expect("close");
    wait_for_rows(&location, 1000, Duration::from_secs(30)).await;
    assert_rows(&location, 1000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acked_avro_records_survive_sigkill_and_replay_exactly_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = Server::start(dir.path(), "1h").await;
    let table = "main.avro.replay";
    let location = server.create_table_at(table, COLUMNS).await;
    let stream = avro_stream(&server, table).await;
    stream
        .ingest_records_offset((0..2000).map(|i| AvroBytes(datum(i))))
        .await
        .expect("ingest");
    stream.flush().await.expect("every record acked");
    server.kill();
    drop(stream);

    server.restart().await;
    wait_for_rows(&location, 2000, Duration::from_secs(30)).await;
    server.kill();
    server.restart().await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_rows(&location, 2000).await;
    assert!(
        server.log().contains("replayed WAL records"),
        "replay happened"
    );
}

/// The persistent-stream record `{"id": offset, …}` of [`value`] at `offset`.
fn avro_request(offset: i64) -> PersistentStreamRequest {
    PersistentStreamRequest {
        payload: Some(Payload::IngestRecord(IngestRecordRequest {
            offset_id: Some(offset),
            record: Some(ingest_record_request::Record::AvroEncodedRecord(
                Bytes::from(datum(offset)),
            )),
        })),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persistent_avro_stream_resumes_with_its_writer_schema() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = Server::start(dir.path(), "200ms").await;
    let t = "main.avro.persistent";
    let location = server.create_table_at(t, COLUMNS).await;
    let admin = server.token().await;
    let create = PersistentStreamRequest {
        payload: Some(Payload::CreateStream(CreatePersistentStreamRequest {
            create_stream: Some(CreateIngestStreamRequest {
                table_name: Some(t.into()),
                descriptor_proto: None,
                record_type: Some(RecordType::Avro as i32),
                avro_schema_json: Some(SCHEMA.into()),
            }),
        })),
    };
    let (first, id) = match Conn::open(call(&server, t, &admin), create).await {
        Ok((conn, Opened::Created(id))) => (conn, id),
        other => panic!("create: {:?}", other.map(|(_, o)| o)),
    };
    assert!(first.send((0..100).map(avro_request)).await);
    wait_acked(&first, 99).await;
    assert_eq!(first.finish().await.map(|s| s.code()), None);

    // A resume carries no writer schema: the stream's own is compiled again.
    let (second, watermark) = match Conn::open(
        call(&server, t, &admin),
        resume(&id, RecordType::Avro, None),
    )
    .await
    {
        Ok((conn, Opened::Resumed(w))) => (conn, w),
        other => panic!("resume: {:?}", other.map(|(_, o)| o)),
    };
    assert_eq!(watermark, Some(99));
    assert!(second.send((90..200).map(avro_request)).await);
    wait_acked(&second, 199).await;
    assert_eq!(second.finish().await.map(|s| s.code()), None);
    server.terminate();
    assert_each_once(&location, 200);
    assert_rows(&location, 200).await;
}

/// A writer schema with two fields `main.avro.rescued` has no column for.
const RESCUED_SCHEMA: &str = r#"{"type":"record","name":"Wide","fields":[
  {"name":"id","type":"long"},
  {"name":"extra","type":["null","string"]},
  {"name":"blob","type":{"type":"record","name":"Blob","fields":[
      {"name":"b","type":"bytes"},{"name":"n","type":{"type":"array","items":"int"}}]}}
]}"#;

/// Record `i` of [`RESCUED_SCHEMA`] as a datum, and the `_rescued_data` text it must give.
fn rescued_datum(i: i64) -> (Vec<u8>, String) {
    let schema = Schema::parse_str(RESCUED_SCHEMA).expect("schema");
    let extra = if i % 2 == 0 {
        Avro::Union(0, Box::new(Avro::Null))
    } else {
        Avro::Union(1, Box::new(Avro::String(format!("e{i}"))))
    };
    let value = Avro::Record(vec![
        ("id".into(), Avro::Long(i)),
        ("extra".into(), extra),
        (
            "blob".into(),
            Avro::Record(vec![
                ("b".into(), Avro::Bytes(vec![i as u8, 1])),
                (
                    "n".into(),
                    Avro::Array(vec![Avro::Int(i as i32), Avro::Int(-1)]),
                ),
            ]),
        ),
    ]);
    let extra_text = if i % 2 == 0 {
        "null".to_string()
    } else {
        format!("\"e{i}\"")
    };
    let text = format!(
        r#"{{"extra":{extra_text},"blob":{{"b":"{}","n":[{i},-1]}}}}"#,
        base64_of(&[i as u8, 1])
    );
    (
        apache_avro::to_avro_datum(&schema, value).expect("encode"),
        text,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn avro_fields_the_table_lacks_land_in_rescued_data_live_and_on_replay() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = Server::start(dir.path(), "1h").await;
    let table = "main.avro.rescued";
    let location = server
        .create_table_with(table, "id BIGINT NOT NULL", &["--rescued-data"])
        .await;
    let stream_of = |server: &Server| {
        let sdk = server.sdk();
        async move {
            sdk.stream_builder()
                .table(table)
                .oauth(CLIENT_ID, CLIENT_SECRET)
                .avro(RESCUED_SCHEMA)
                .build()
                .await
                .expect("avro stream")
        }
    };
    // Phase 1: acked, then SIGKILL before any flush: the rows come back by replay.
    let stream = stream_of(&server).await;
    stream
        .ingest_records_offset((0..10).map(|i| AvroBytes(rescued_datum(i).0)))
        .await
        .expect("ingest");
    stream.flush().await.expect("acked");
    server.kill();
    drop(stream);
    server.restart().await;
    // Phase 2: live, then a graceful stop commits.
    let mut stream = stream_of(&server).await;
    stream
        .ingest_records_offset((10..20).map(|i| AvroBytes(rescued_datum(i).0)))
        .await
        .expect("ingest");
    stream.flush().await.expect("acked");
    stream.close().await.expect("close");
    server.terminate();
    let mut rows = rows_as_json(&read_delta(&location).await);
    rows.sort_by_key(|r| r["id"].as_i64());
    assert_eq!(rows.len(), 20, "each record once");
    for (i, row) in rows.iter().enumerate() {
        let want = rescued_datum(i as i64).1;
        assert_eq!(row["id"], i as i64);
        assert_eq!(row["_rescued_data"], json!(want), "row {i}");
    }
    // Without the option the same writer schema is refused, naming the field.
    let plain = "main.avro.not_rescued";
    server.restart().await;
    server.create_table(plain, "id BIGINT NOT NULL");
    let refused = server
        .sdk()
        .stream_builder()
        .table(plain)
        .oauth(CLIENT_ID, CLIENT_SECRET)
        .avro(RESCUED_SCHEMA)
        .recovery(false)
        .build()
        .await;
    let error = refused.err().expect("refused").to_string();
    assert!(
        error.contains("Avro field `extra`: union [null, string] has no column in the table"),
        "{error}"
    );
}
