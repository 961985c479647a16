//! Opt-in `_rescued_data` column, end to end: a table created with
//! `--rescued-data` (and `--system-columns`, to pin the column order) takes
//! JSON records with unknown members and values that do not fit their
//! columns, and protobuf records encoded with a richer descriptor than the
//! stream's, all from the official Rust SDK; Python `deltalake` and `polars`
//! read back the exact rescued JSON text. The records of the first phase
//! reach Delta only through WAL replay (the pod is SIGKILLed before any
//! commit), those of the second phase on the live path; both must carry the
//! same text. A table without the option still rejects an unknown JSON member
//! with the error it always had, and a schema that has its own `_rescued_data`
//! column cannot get the option.

use databricks_zerobus_ingest_sdk::schema::{descriptor_from_uc_columns, UcColumn};
use databricks_zerobus_ingest_sdk::{message_descriptor, JsonString, ProtoBytes, ZerobusStream};
use prost::Message;
use prost_reflect::{DynamicMessage, Value as ProtoValue};
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, FieldDescriptorProto};
use serde_json::{json, Value};

use crate::harness::{read_delta, Server};
use crate::moto::python_read;
use crate::rows::rows_as_json;

const COLUMNS: &str = "id BIGINT NOT NULL, device STRING, temp DOUBLE, n INT, tags ARRAY<STRING>";

/// The JSON records of one phase (ids `base..base + 3`) and the rescued text
/// each must give.
fn json_records(base: i64) -> Vec<(String, Option<&'static str>)> {
    vec![
        (
            format!(
                r#"{{"id": {base}, "device": "d", "extra": {{"a": [1, 2.50], "b": null}}, "note": "x y"}}"#
            ),
            Some(r#"{"extra":{"a":[1,2.50],"b":null},"note":"x y"}"#),
        ),
        (
            format!(
                r#"{{"id": {}, "n": 3000000000, "device": 7, "tags": ["a", 1], "temp": "warm"}}"#,
                base + 1
            ),
            Some(r#"{"n":3000000000,"device":7,"tags":["a",1],"temp":"warm"}"#),
        ),
        (
            format!(r#"{{"id": {}, "device": "fits", "n": 5}}"#, base + 2),
            None,
        ),
    ]
}

/// Field numbers of the producer's richer descriptor that the table lacks.
fn extra_fields() -> Vec<FieldDescriptorProto> {
    let field = |name: &str, number: i32, ty: Type, label: Label| FieldDescriptorProto {
        name: Some(name.into()),
        number: Some(number),
        label: Some(label as i32),
        r#type: Some(ty as i32),
        ..Default::default()
    };
    vec![
        field("firmware", 20, Type::String, Label::Optional),
        field("reboots", 21, Type::Int64, Label::Optional),
        field("raw", 22, Type::Bytes, Label::Optional),
        field("labels", 23, Type::String, Label::Repeated),
    ]
}

/// The rescued text of [`proto_record`]: by field number, bytes as base64,
/// a repeated field as an array in wire order, a negative int64 as its
/// unsigned varint.
const PROTO_RESCUED: &str =
    r#"{"20":"ZnctMS4y","21":18446744073709551615,"22":"AAH/","23":["YQ==","YmM="]}"#;

/// A record of the richer message: the table's `id`, `device` and `temp`,
/// plus every extra field.
fn proto_record(richer: &prost_reflect::MessageDescriptor, id: i64) -> Vec<u8> {
    let mut message = DynamicMessage::new(richer.clone());
    let set = |message: &mut DynamicMessage, name: &str, value: ProtoValue| {
        message.set_field_by_name(name, value);
    };
    set(&mut message, "id", ProtoValue::I64(id));
    set(&mut message, "device", ProtoValue::String("p".into()));
    set(&mut message, "temp", ProtoValue::F64(1.5));
    set(
        &mut message,
        "firmware",
        ProtoValue::String("fw-1.2".into()),
    );
    set(&mut message, "reboots", ProtoValue::I64(-1));
    set(
        &mut message,
        "raw",
        ProtoValue::Bytes(vec![0, 1, 255].into()),
    );
    set(
        &mut message,
        "labels",
        ProtoValue::List(vec![
            ProtoValue::String("a".into()),
            ProtoValue::String("bc".into()),
        ]),
    );
    message.encode_to_vec()
}

/// Pushes one phase: the JSON records on a JSON stream, then two protobuf
/// records (ids `base + 10`, `base + 11`) on a stream opened with the
/// table's descriptor but encoded with the richer one; waits for every ack.
async fn push_phase(server: &Server, table: &str, table_descriptor: &DescriptorProto, base: i64) {
    let json = server.json_stream(table).await;
    for (record, _) in json_records(base) {
        json.ingest_record_offset(JsonString(record))
            .await
            .expect("ingest json");
    }
    json.flush().await.expect("json records acked");
    let mut richer = table_descriptor.clone();
    richer.field.extend(extra_fields());
    let richer = message_descriptor(&richer).expect("richer descriptor");
    let proto = server.proto_stream(table, table_descriptor.clone()).await;
    proto
        .ingest_record_offset(ProtoBytes(proto_record(&richer, base + 10)))
        .await
        .expect("ingest proto");
    proto
        .ingest_records_offset(vec![ProtoBytes(proto_record(&richer, base + 11))])
        .await
        .expect("ingest proto batch");
    proto.flush().await.expect("proto records acked");
}

/// `id → (_rescued_data, the row)` as expected for a phase starting at `base`.
fn expected_rows(base: i64) -> Vec<(i64, Value)> {
    let mut out: Vec<(i64, Value)> = json_records(base)
        .into_iter()
        .enumerate()
        .map(|(k, (_, rescued))| (base + k as i64, json!(rescued)))
        .collect();
    out.push((base + 10, json!(PROTO_RESCUED)));
    out.push((base + 11, json!(PROTO_RESCUED)));
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_rescued_data_when_records_do_not_fit_then_the_rest_lands_in_rescued_data_live_and_on_replay(
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = Server::start(dir.path(), "1h").await;
    let table = "main.rescue.readings";
    server.create_table_with_flags(table, COLUMNS, &["--rescued-data", "--system-columns"]);
    let info = server.table_info(table).await;
    let location = info["storage_location"]
        .as_str()
        .expect("location")
        .to_string();
    let columns: Vec<UcColumn> =
        serde_json::from_value(info["columns"].clone()).expect("UC columns deserialize");
    let names: Vec<&str> = columns.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        vec!["id", "device", "temp", "n", "tags"],
        "UC columns stay the producer's columns"
    );
    let table_descriptor = descriptor_from_uc_columns(&columns, "readings").expect("descriptor");

    // Phase 1: acked, then SIGKILL before any commit: Delta gets it by replay.
    push_phase(&server, table, &table_descriptor, 0).await;
    server.kill();
    server.restart().await;
    // Phase 2: the live path; SIGTERM commits it.
    push_phase(&server, table, &table_descriptor, 100).await;
    server.terminate();

    let read = python_read(&location, &json!({}));
    let fields: Vec<String> = read.batches[0]
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(
        fields,
        vec![
            "id",
            "device",
            "temp",
            "n",
            "tags",
            "_rescued_data",
            "_sluice_stream_id",
            "_sluice_offset",
            "_sluice_ingested_at"
        ]
    );
    let mut rows = rows_as_json(&read.batches);
    rows.sort_by_key(|r| r["id"].as_i64().expect("id"));
    let mut expected = expected_rows(0);
    expected.extend(expected_rows(100));
    let got: Vec<(i64, Value)> = rows
        .iter()
        .map(|r| (r["id"].as_i64().expect("id"), r["_rescued_data"].clone()))
        .collect();
    assert_eq!(got, expected, "deltalake's _rescued_data per id");
    let polars: Vec<(i64, Value)> =
        serde_json::from_value::<Vec<(i64, Value)>>(read.summary["polars_rescued_data"].clone())
            .expect("polars pairs");
    assert_eq!(polars, expected, "polars' _rescued_data per id");

    // The columns that fit are filled, the ones that did not are null.
    for base in [0, 100] {
        let row = |id: i64| {
            rows.iter()
                .find(|r| r["id"] == id)
                .unwrap_or_else(|| panic!("row {id}"))
        };
        assert_eq!(row(base)["device"], "d");
        let mismatched = row(base + 1);
        for column in ["n", "device", "tags", "temp"] {
            assert_eq!(mismatched[column], Value::Null, "{column} of {mismatched}");
        }
        assert_eq!(row(base + 2)["n"], 5);
        assert_eq!(row(base + 10)["device"], "p");
        assert_eq!(row(base + 11)["temp"], 1.5);
    }

    // The Rust deltalake crate reads the same.
    let mut again = rows_as_json(&read_delta(&location).await);
    again.sort_by_key(|r| r["id"].as_i64().expect("id"));
    assert_eq!(again, rows);
}

pub(crate) async fn push_json_until_rejected(stream: &ZerobusStream, records: &[&str]) -> String {
    for record in records {
        if let Err(e) = stream
            .ingest_record_offset(JsonString((*record).to_string()))
            .await
        {
            return e.to_string();
        }
    }
    match stream.flush().await {
        Err(e) => e.to_string(),
        Ok(()) => panic!("every record was accepted"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_no_rescued_data_when_a_json_member_is_unknown_then_the_record_is_rejected_as_before()
{
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = Server::start(dir.path(), "1h").await;

    // A schema with its own `_rescued_data` column cannot get the option...
    let refused = server.cli(&[
        "table",
        "create",
        "main.rescue.clash",
        "--columns",
        "id BIGINT NOT NULL, _rescued_data STRING",
        "--rescued-data",
    ]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr)
            .contains("column `_rescued_data` is reserved for the rescued-data column"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    // ...but without it the name is an ordinary column.
    server.create_table(
        "main.rescue.own",
        "id BIGINT NOT NULL, _rescued_data STRING",
    );

    let table = "main.rescue.strict";
    let location = server.create_table_at(table, COLUMNS).await;
    let stream = server.json_stream(table).await;
    let error = push_json_until_rejected(
        &stream,
        &[r#"{"id": 1, "device": "d"}"#, r#"{"id": 2, "extra": 1}"#],
    )
    .await;
    assert!(
        error.contains("record at offset 1: record: unknown field `extra`"),
        "{error}"
    );
    drop(stream);
    server.terminate();
    let read = python_read(&location, &json!({}));
    let rows = rows_as_json(&read.batches);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["id"], 1);
    assert!(rows[0].get("_rescued_data").is_none());
    assert_eq!(read.summary["polars_rows"], 1);
    assert_eq!(read.summary["polars_rescued_data"], Value::Null);
}
