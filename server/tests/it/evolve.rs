//! `sluice table alter`, end to end against a real `sluice serve`: a JSON and
//! a protobuf stream of the official Rust SDK stay open across an additive
//! change (a new top-level column and a new field in an existing STRUCT),
//! rows committed before it, rows waiting in the memtable during it and rows
//! the old streams send after it all land, new streams use the new columns,
//! and Python `deltalake` and `polars` read every row (NULL where a row had no
//! value). The refusals answer what the README's status table says, and a
//! SIGKILL between the Delta commit and the catalog update recovers to the
//! Delta table's schema.

use std::time::Duration;

use databricks_zerobus_ingest_sdk::schema::{descriptor_from_uc_columns, UcColumn};
use databricks_zerobus_ingest_sdk::{message_descriptor, JsonString, ProtoBytes, ZerobusStream};
use prost::Message;
use prost_reflect::{DynamicMessage, MessageDescriptor, Value as ProtoValue};
use serde_json::{json, Value};

use crate::harness::{wait_for_rows, Server};
use crate::moto::python_read_with;

const TABLE: &str = "main.evolve.telemetry";
const COLUMNS: &str = "id BIGINT NOT NULL, device STRING, temp FLOAT, site STRUCT<name: STRING>";
const ADD: &str = "humidity DOUBLE, site STRUCT<name: STRING, elevation: DOUBLE>";

fn uc_columns(info: &Value) -> Vec<UcColumn> {
    serde_json::from_value(info["columns"].clone()).expect("UC columns")
}

async fn json_rows(stream: &ZerobusStream, ids: std::ops::Range<i64>, new_columns: bool) {
    for id in ids {
        let mut record = json!({"id": id, "device": "j", "temp": 1.5, "site": {"name": "s"}});
        if new_columns {
            record["humidity"] = json!(id as f64 / 2.0);
            record["site"]["elevation"] = json!(100.0);
        }
        stream
            .ingest_record_offset(JsonString(record.to_string()))
            .await
            .expect("ingest json");
    }
    stream.flush().await.expect("json records acked");
}

fn proto_record(message: &MessageDescriptor, id: i64, new_columns: bool) -> Vec<u8> {
    let mut record = DynamicMessage::new(message.clone());
    record.set_field_by_name("id", ProtoValue::I64(id));
    record.set_field_by_name("device", ProtoValue::String("p".into()));
    record.set_field_by_name("temp", ProtoValue::F32(2.5));
    let site_kind = message
        .get_field_by_name("site")
        .expect("site field")
        .kind();
    let site_message = site_kind.as_message().expect("site is a message");
    let mut site = DynamicMessage::new(site_message.clone());
    site.set_field_by_name("name", ProtoValue::String("ps".into()));
    if new_columns {
        site.set_field_by_name("elevation", ProtoValue::F64(7.0));
        record.set_field_by_name("humidity", ProtoValue::F64(id as f64));
    }
    record.set_field_by_name("site", ProtoValue::Message(site));
    record.encode_to_vec()
}

async fn proto_rows(
    stream: &ZerobusStream,
    message: &MessageDescriptor,
    ids: std::ops::Range<i64>,
    new_columns: bool,
) {
    for id in ids {
        stream
            .ingest_record_offset(ProtoBytes(proto_record(message, id, new_columns)))
            .await
            .expect("ingest proto");
    }
    stream.flush().await.expect("proto records acked");
}

fn cli_ok(server: &Server, args: &[&str]) -> String {
    let out = server.cli(args);
    assert!(
        out.status.success(),
        "sluice {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The polars rows of the table at `location`, by id.
fn polars_rows(location: &str) -> (Vec<Value>, Value) {
    let read = python_read_with(location, &json!({}), &[("SLUICE_POLARS_ROWS", "1")]);
    let rows = read.summary["polars_row_dicts"]
        .as_array()
        .expect("polars rows")
        .clone();
    let deltalake_rows: usize = read.batches.iter().map(|b| b.num_rows()).sum();
    assert_eq!(
        deltalake_rows,
        rows.len(),
        "deltalake and polars read as many rows"
    );
    (rows, read.summary)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_open_json_and_proto_streams_when_columns_are_added_then_they_keep_running_and_every_row_reads_back(
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = Server::start(dir.path(), "300ms").await;
    server.create_table(TABLE, COLUMNS);
    let info = server.table_info(TABLE).await;
    let location = info["storage_location"]
        .as_str()
        .expect("location")
        .to_string();
    assert_eq!(info["schema_version"], json!(0));
    let old_descriptor =
        descriptor_from_uc_columns(&uc_columns(&info), "telemetry").expect("descriptor");
    let old_message = message_descriptor(&old_descriptor).expect("message");

    let json_old = server.json_stream(TABLE).await;
    let proto_old = server.proto_stream(TABLE, old_descriptor.clone()).await;
    // Committed under the old schema.
    json_rows(&json_old, 0..3, false).await;
    proto_rows(&proto_old, &old_message, 10..13, false).await;
    wait_for_rows(&location, 6, Duration::from_secs(30)).await;
    // Acked just before the change (in the memtable or being committed during it).
    json_rows(&json_old, 3..5, false).await;
    proto_rows(&proto_old, &old_message, 13..15, false).await;

    let out = cli_ok(&server, &["table", "alter", TABLE, "--add-columns", ADD]);
    assert!(out.contains("altered main.evolve.telemetry"), "{out}");
    assert!(out.contains("humidity DOUBLE"), "{out}");

    // The streams opened before the change keep running.
    json_rows(&json_old, 5..7, false).await;
    proto_rows(&proto_old, &old_message, 15..17, false).await;

    let info = server.table_info(TABLE).await;
    let version = info["schema_version"].as_i64().expect("schema version");
    assert!(version > 0, "{info}");
    let names: Vec<String> = uc_columns(&info).into_iter().map(|c| c.name).collect();
    assert_eq!(names, ["id", "device", "temp", "site", "humidity"]);
    let new_descriptor =
        descriptor_from_uc_columns(&uc_columns(&info), "telemetry").expect("descriptor");
    let new_message = message_descriptor(&new_descriptor).expect("message");
    let json_new = server.json_stream(TABLE).await;
    json_rows(&json_new, 100..103, true).await;
    let proto_new = server.proto_stream(TABLE, new_descriptor).await;
    proto_rows(&proto_new, &new_message, 200..203, true).await;
    // An old stream still has its old shape: records go on landing.
    json_rows(&json_old, 7..8, false).await;
    for mut stream in [json_old, proto_old, json_new, proto_new] {
        stream.close().await.expect("close");
    }
    server.terminate();

    let (rows, summary) = polars_rows(&location);
    let ops = summary["operations"].to_string();
    assert!(ops.contains("ADD COLUMN"), "{summary}");
    let ids: Vec<i64> = rows.iter().map(|r| r["id"].as_i64().expect("id")).collect();
    let mut want: Vec<i64> = (0..8)
        .chain(10..17)
        .chain(100..103)
        .chain(200..203)
        .collect();
    want.sort();
    assert_eq!(ids, want, "every row once");
    for row in &rows {
        let id = row["id"].as_i64().expect("id");
        if id < 100 {
            assert_eq!(row["humidity"], Value::Null, "{row}");
            assert_eq!(row["site"]["elevation"], Value::Null, "{row}");
            let name = if id < 10 { "s" } else { "ps" };
            assert_eq!(row["site"]["name"], json!(name), "{row}");
        } else if id < 200 {
            assert_eq!(row["humidity"], json!(id as f64 / 2.0), "{row}");
            assert_eq!(
                row["site"],
                json!({"name": "s", "elevation": 100.0}),
                "{row}"
            );
        } else {
            assert_eq!(row["humidity"], json!(id as f64), "{row}");
            assert_eq!(
                row["site"],
                json!({"name": "ps", "elevation": 7.0}),
                "{row}"
            );
        }
    }
}

/// `PATCH` on the tables API: status, error code and message of each refusal.
async fn patch(server: &Server, body: Value) -> (u16, Value) {
    let r = reqwest::Client::new()
        .patch(format!(
            "{}/api/2.1/unity-catalog/tables/{TABLE}",
            server.url
        ))
        .bearer_auth(server.token().await)
        .json(&body)
        .send()
        .await
        .expect("patch");
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_table_when_an_alter_cannot_be_done_then_it_is_refused_with_its_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), "300ms").await;
    server.create_table(TABLE, "id BIGINT NOT NULL, temp FLOAT, t DOUBLE");
    let cases = [
        (
            json!({}),
            400,
            "INVALID_PARAMETER_VALUE",
            "nothing to change",
        ),
        (
            json!({"add_columns": "h DOUBLE NOT NULL"}),
            400,
            "INVALID_PARAMETER_VALUE",
            "must be nullable",
        ),
        (
            json!({"add_columns": "TEMP DOUBLE"}),
            400,
            "INVALID_PARAMETER_VALUE",
            "already has a column `temp`",
        ),
        (
            json!({"widen": ["t DOUBLE TO FLOAT"]}),
            400,
            "INVALID_PARAMETER_VALUE",
            "not a type widening",
        ),
        (
            json!({"widen": ["temp FLOAT TO DOUBLE"]}),
            501,
            "NOT_IMPLEMENTED",
            "typeWidening",
        ),
        (
            json!({"drop_columns": ["temp"]}),
            501,
            "NOT_IMPLEMENTED",
            "column mapping",
        ),
        (
            json!({"rename_column": "temp TO t"}),
            400,
            "INVALID_PARAMETER_VALUE",
            "already has a column `t`",
        ),
        (
            json!({"rename_column": "temp TO celsius"}),
            501,
            "NOT_IMPLEMENTED",
            "column mapping",
        ),
        (
            json!({"set_properties": {"sluice.systemColumns": "true"}}),
            400,
            "INVALID_PARAMETER_VALUE",
            "set when the table is created",
        ),
        (
            json!({"add_columns": "h DOUBLE", "expected_schema_version": 7}),
            409,
            "FAILED_PRECONDITION",
            "schema version is 0, not 7",
        ),
    ];
    for (body, status, code, message) in cases {
        let (got, answer) = patch(&server, body.clone()).await;
        assert_eq!(got, status, "{body}: {answer}");
        assert_eq!(answer["error_code"], json!(code), "{body}: {answer}");
        let text = answer["message"].as_str().unwrap_or_default();
        assert!(text.contains(message), "{body}: {answer}");
    }
    let info = server.table_info(TABLE).await;
    assert_eq!(
        info["schema_version"],
        json!(0),
        "no refusal changed the table"
    );

    // One alter at the version it read passes; a second one at that version is stale.
    let (status, answer) = patch(
        &server,
        json!({"add_columns": "h DOUBLE", "expected_schema_version": 0}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let (status, answer) = patch(
        &server,
        json!({"add_columns": "g DOUBLE", "expected_schema_version": 0}),
    )
    .await;
    assert_eq!(status, 409, "{answer}");
    // Properties: one metadata commit, visible in the Delta log's configuration.
    let out = cli_ok(
        &server,
        &[
            "table",
            "alter",
            TABLE,
            "--set-property",
            "delta.logRetentionDuration=interval 2 days",
        ],
    );
    assert!(out.contains("schema version"), "{out}");
    let out = server.cli(&["table", "alter", TABLE, "--add-columns", "x INT NOT NULL"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("must be nullable"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let location = info["storage_location"].as_str().expect("location");
    let table = deltalake::open_table(url::Url::parse(location).expect("url"))
        .await
        .expect("open");
    let snapshot = table.snapshot().expect("snapshot");
    assert_eq!(
        snapshot
            .metadata()
            .configuration()
            .get("delta.logRetentionDuration")
            .map(String::as_str),
        Some("interval 2 days")
    );
    let names: Vec<String> = snapshot
        .schema()
        .fields()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(names, ["id", "temp", "t", "h"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_pod_killed_between_the_delta_commit_and_the_catalog_update_then_it_restarts_with_the_delta_schema(
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = Server::start_with_env(
        dir.path(),
        "300ms",
        &[],
        &[("SLUICE_TEST_ALTER_PAUSE_AFTER_COMMIT", "60s")],
    )
    .await;
    server.create_table(TABLE, COLUMNS);
    let location = server.table_info(TABLE).await["storage_location"]
        .as_str()
        .expect("location")
        .to_string();
    let stream = server.json_stream(TABLE).await;
    json_rows(&stream, 0..3, false).await;
    let url = server.url.clone();
    let alter = tokio::task::spawn_blocking(move || {
        crate::harness::cli_at(&url, &["table", "alter", TABLE, "--add-columns", ADD])
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !server.log().contains("pausing between the Delta commit") {
        assert!(std::time::Instant::now() < deadline, "{}", server.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    server.kill();
    let _ = alter.await;
    drop(stream);
    server.env.clear();
    server.restart().await;
    assert!(
        server.log().contains("completed in the catalog"),
        "{}",
        server.log()
    );
    let info = server.table_info(TABLE).await;
    let names: Vec<String> = uc_columns(&info).into_iter().map(|c| c.name).collect();
    assert_eq!(
        names,
        ["id", "device", "temp", "site", "humidity"],
        "{info}"
    );
    assert!(info["schema_version"].as_i64().expect("version") > 0);
    let mut stream = server.json_stream(TABLE).await;
    json_rows(&stream, 100..102, true).await;
    stream.close().await.expect("close");
    server.terminate();
    let (rows, _) = polars_rows(&location);
    let ids: Vec<i64> = rows.iter().map(|r| r["id"].as_i64().expect("id")).collect();
    assert_eq!(ids, [0, 1, 2, 100, 101]);
    assert_eq!(rows[0]["humidity"], Value::Null);
    assert_eq!(rows[3]["humidity"], json!(50.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_auto_evolve_when_json_records_carry_unknown_keys_then_they_add_nullable_columns() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = Server::start(dir.path(), "300ms").await;
    let plain = "main.evolve.auto";
    let rescued = "main.evolve.autorescued";
    let plain_at = server
        .create_table_with(plain, "id BIGINT NOT NULL, temp DOUBLE", &[])
        .await;
    let rescued_at = server
        .create_table_with(
            plain.replace("auto", "autorescued").as_str(),
            "id BIGINT NOT NULL",
            &["--rescued-data"],
        )
        .await;

    // Off by default: the table is the contract.
    let stream = server.json_stream(plain).await;
    let error = crate::rescued_data::push_json_until_rejected(
        &stream,
        &[
            r#"{"id": 1, "temp": 1.5}"#,
            r#"{"id": 2, "humidity": 40.5}"#,
        ],
    )
    .await;
    assert!(error.contains("unknown field `humidity`"), "{error}");
    drop(stream);

    for table in [plain, rescued] {
        cli_ok(
            &server,
            &[
                "table",
                "alter",
                table,
                "--set-property",
                "sluice.autoEvolve=add-columns",
            ],
        );
        assert_eq!(server.table_info(table).await["schema_version"], json!(0));
    }
    let stream = server.json_stream(plain).await;
    for record in [
        json!({"id": 10, "temp": 1.0}),
        json!({"id": 11, "humidity": 40.5, "site": "a"}),
        json!({"id": 12, "humidity": 41.5, "ok": true, "tags": [1, 2]}),
    ] {
        stream
            .ingest_record_offset(JsonString(record.to_string()))
            .await
            .expect("ingest");
    }
    stream.flush().await.expect("every record acked");
    let info = server.table_info(plain).await;
    let columns: Vec<(String, String)> = uc_columns(&info)
        .into_iter()
        .map(|c| (c.name, c.type_text))
        .collect();
    let want: Vec<(String, String)> = [
        ("id", "bigint"),
        ("temp", "double"),
        ("humidity", "double"),
        ("site", "string"),
        ("ok", "boolean"),
        ("tags", "variant"),
    ]
    .iter()
    .map(|(n, t)| (n.to_string(), t.to_string()))
    .collect();
    assert_eq!(columns, want, "{info}");
    let rescue = server.json_stream(rescued).await;
    rescue
        .ingest_record_offset(JsonString(json!({"id": 1, "extra": "x"}).to_string()))
        .await
        .expect("ingest");
    rescue.flush().await.expect("acked");
    let mut stream = stream;
    stream.close().await.expect("close");
    let mut rescue = rescue;
    rescue.close().await.expect("close");
    server.terminate();
    let log = server.log();
    assert!(log.contains("auto-evolve added columns"), "{log}");
    assert!(
        log.contains("auto-evolve") && log.contains("table.alter"),
        "{log}"
    );

    let (rows, _) = polars_rows(&plain_at);
    let ids: Vec<i64> = rows.iter().map(|r| r["id"].as_i64().expect("id")).collect();
    assert_eq!(ids, [1, 10, 11, 12]);
    assert_eq!(rows[0]["humidity"], Value::Null);
    assert_eq!(rows[2]["humidity"], json!(40.5));
    assert_eq!(rows[2]["site"], json!("a"));
    assert_eq!(rows[3]["ok"], json!(true));
    assert_eq!(rows[3]["tags"], json!("[1,2]"));
    let (rows, _) = polars_rows(&rescued_at);
    assert_eq!(rows[0]["extra"], json!("x"), "{rows:?}");
    assert_eq!(rows[0]["_rescued_data"], Value::Null, "{rows:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_an_alter_cut_short_before_its_delta_commit_then_the_restarted_pod_forgets_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = Server::start(dir.path(), "300ms").await;
    server.create_table(TABLE, COLUMNS);
    server.terminate();
    // What a pod killed between `begin_alter` and the Delta commit leaves: a pending alter
    // the Delta log never saw.
    let path = dir.path().join("catalog.json");
    let mut catalog: Value =
        serde_json::from_slice(&std::fs::read(&path).expect("catalog")).expect("json");
    catalog["tables"][TABLE]["pending_columns"] = json!(format!("{COLUMNS}, humidity DOUBLE"));
    std::fs::write(&path, serde_json::to_vec_pretty(&catalog).expect("encode")).expect("write");
    server.restart().await;
    assert!(
        server
            .log()
            .contains("an alter cut short before its Delta commit: forgotten"),
        "{}",
        server.log()
    );
    let info = server.table_info(TABLE).await;
    let names: Vec<String> = uc_columns(&info).into_iter().map(|c| c.name).collect();
    assert_eq!(names, ["id", "device", "temp", "site"]);
    // The table takes alters again.
    cli_ok(
        &server,
        &["table", "alter", TABLE, "--add-columns", "humidity DOUBLE"],
    );
    let stream = server.json_stream(TABLE).await;
    json_rows(&stream, 0..2, false).await;
    drop(stream);
    server.terminate();
}
