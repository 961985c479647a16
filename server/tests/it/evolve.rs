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
pub(crate) fn polars_rows(location: &str) -> (Vec<Value>, Value) {
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
            "give --rewrite",
        ),
        (
            json!({"widen": ["temp FLOAT TO INT"], "rewrite": true}),
            400,
            "INVALID_PARAMETER_VALUE",
            "not a type widening",
        ),
        (
            json!({"drop_columns": ["id", "temp", "t"], "rewrite": true}),
            400,
            "INVALID_PARAMETER_VALUE",
            "`t` is the table's last column",
        ),
        (
            json!({"drop_columns": ["nope"], "rewrite": true}),
            400,
            "INVALID_PARAMETER_VALUE",
            "no column `nope`",
        ),
        (
            json!({"rename_column": "temp TO T", "rewrite": true}),
            400,
            "INVALID_PARAMETER_VALUE",
            "already has a column `t`",
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
    let (mut server, location) = pod_pausing_alters(dir.path(), TABLE, COLUMNS).await;
    let stream = server.json_stream(TABLE).await;
    json_rows(&stream, 0..3, false).await;
    let info = alter_killed_before_the_catalog(
        &mut server,
        stream,
        &["table", "alter", TABLE, "--add-columns", ADD],
    )
    .await;
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

/// A pod whose alters pause 60 s between their Delta commit and the catalog update
/// (`SLUICE_TEST_ALTER_PAUSE_AFTER_COMMIT`), with `table` of `columns` created; returns it
/// and the table's location.
async fn pod_pausing_alters(dir: &std::path::Path, table: &str, columns: &str) -> (Server, String) {
    let server = Server::start_with_env(
        dir,
        "300ms",
        &[],
        &[("SLUICE_TEST_ALTER_PAUSE_AFTER_COMMIT", "60s")],
    )
    .await;
    server.create_table(table, columns);
    let location = server.table_info(table).await["storage_location"]
        .as_str()
        .expect("location")
        .to_string();
    (server, location)
}

/// Runs the CLI `args` (an alter of the table named in them) against `server`, started with
/// `SLUICE_TEST_ALTER_PAUSE_AFTER_COMMIT`; SIGKILLs the pod while the alter pauses between
/// its Delta commit and the catalog update, drops `stream` (open across the kill), restarts
/// the pod without the pause and checks the restart completed the alter in the catalog.
/// Returns the table's info after the restart.
async fn alter_killed_before_the_catalog(
    server: &mut Server,
    stream: ZerobusStream,
    args: &[&str],
) -> Value {
    let table = args.get(2).expect("the table's name").to_string();
    let (url, args): (String, Vec<String>) = (
        server.url.clone(),
        args.iter().map(|a| a.to_string()).collect(),
    );
    let alter = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        crate::harness::cli_at(&url, &args)
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
    server.table_info(&table).await
}

/// The (id, sensor) of every row of the table at `location` as polars reads it (NULL
/// for a missing sensor), and the rows themselves.
fn ids_and_sensors(location: &str) -> (Vec<(i64, String)>, Vec<Value>) {
    let (rows, _) = polars_rows(location);
    let pairs = rows
        .iter()
        .map(|r| {
            (
                r["id"].as_i64().expect("id"),
                r["sensor"].as_str().unwrap_or("NULL").to_string(),
            )
        })
        .collect();
    (pairs, rows)
}

/// Opts `table` into auto-evolve through the CLI.
fn auto_evolve_on(server: &Server, table: &str) {
    cli_ok(
        server,
        &[
            "table",
            "alter",
            table,
            "--set-property",
            "sluice.autoEvolve=add-columns",
        ],
    );
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
        auto_evolve_on(&server, table);
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
async fn given_auto_evolve_when_a_record_would_add_more_than_32_columns_then_the_stream_ends() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = Server::start(dir.path(), "300ms").await;
    let table = "main.evolve.autocap";
    let at = server
        .create_table_with(table, "id BIGINT NOT NULL", &[])
        .await;
    auto_evolve_on(&server, table);
    let record = |id: i64, keys: std::ops::Range<usize>| {
        let mut record = json!({ "id": id });
        for k in keys {
            record[format!("k{k}")] = json!(k);
        }
        record.to_string()
    };
    // 32 new keys: one change, accepted.
    let stream = server.json_stream(table).await;
    stream
        .ingest_record_offset(JsonString(record(1, 0..32)))
        .await
        .expect("ingest");
    stream.flush().await.expect("32 new columns are acked");
    let info = server.table_info(table).await;
    assert_eq!(uc_columns(&info).len(), 33, "{info}");
    // 33 more: the stream ends, the table keeps its columns and its acked row.
    let error = crate::rescued_data::push_json_until_rejected(
        &stream,
        &[&record(2, 0..1), &record(3, 32..65)],
    )
    .await;
    assert!(
        error.contains("auto-evolve: a record would add 33 columns")
            && error.contains("more than 32"),
        "{error}"
    );
    // The SDK's rendering of the INVALID_ARGUMENT status.
    assert!(error.starts_with("Invalid argument: "), "{error}");
    drop(stream);
    let info = server.table_info(table).await;
    assert_eq!(uc_columns(&info).len(), 33, "{info}");
    server.terminate();
    let (rows, _) = polars_rows(&at);
    let ids: Vec<i64> = rows.iter().map(|r| r["id"].as_i64().expect("id")).collect();
    assert_eq!(ids, [1, 2], "{rows:?}");
    assert_eq!(rows[0]["k31"], json!(31), "{rows:?}");
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

const REWRITTEN: &str = "main.evolve.rewritten";

/// One rewriting alter that drops `note` and renames `device` to `sensor` of [`REWRITTEN`].
const DROP_NOTE_RENAME_DEVICE: [&str; 8] = [
    "table",
    "alter",
    REWRITTEN,
    "--drop-columns",
    "note",
    "--rename-column",
    "device TO sensor",
    "--rewrite",
];

/// A protobuf stream without SDK recovery (its error carries the server's status).
async fn unrecovered_proto_stream(
    server: &Server,
    descriptor: prost_types::DescriptorProto,
) -> ZerobusStream {
    server
        .sdk()
        .stream_builder()
        .table(REWRITTEN)
        .oauth(crate::harness::CLIENT_ID, crate::harness::CLIENT_SECRET)
        .compiled_proto(descriptor)
        .recovery(false)
        .flush_timeout_ms(30_000)
        .build()
        .await
        .expect("proto stream")
}

/// A descriptor of `names` among the table's columns (`info`: its tables API answer).
fn descriptor_of(info: &Value, names: &[&str]) -> prost_types::DescriptorProto {
    let columns: Vec<UcColumn> = uc_columns(info)
        .into_iter()
        .filter(|c| names.contains(&c.name.as_str()))
        .collect();
    descriptor_from_uc_columns(&columns, "reading").expect("descriptor")
}

/// One record of `message`: `id`, and each other field set from `fields`.
fn record_of(message: &MessageDescriptor, id: i64, fields: &[(&str, ProtoValue)]) -> Vec<u8> {
    let mut record = DynamicMessage::new(message.clone());
    record.set_field_by_name("id", ProtoValue::I64(id));
    for (name, value) in fields {
        record.set_field_by_name(name, value.clone());
    }
    record.encode_to_vec()
}

/// Sends `records` (offset order) and waits for their acks.
async fn send_all(stream: &ZerobusStream, records: Vec<Vec<u8>>, json: bool) {
    for r in records {
        let sent = if json {
            stream
                .ingest_record_offset(JsonString(String::from_utf8(r).expect("utf-8")))
                .await
        } else {
            stream.ingest_record_offset(ProtoBytes(r)).await
        };
        sent.expect("ingest");
    }
    stream.flush().await.expect("acked");
}

/// The error that ends `stream` after an alter ended it on the server: its
/// next records are refused (the SDK saw the stream end; without a record in
/// flight at that moment it says only "Stream closed", so the status itself
/// is checked on a raw stream).
async fn ended_with(stream: &ZerobusStream, record: Vec<u8>, json: bool) -> String {
    for _ in 0..50 {
        let sent = if json {
            stream
                .ingest_record_offset(JsonString(
                    String::from_utf8(record.clone()).expect("utf-8"),
                ))
                .await
        } else {
            stream
                .ingest_record_offset(ProtoBytes(record.clone()))
                .await
        };
        let result = match sent {
            Ok(_) => stream.flush().await,
            Err(e) => Err(e),
        };
        if let Err(e) = result {
            return format!("{e:?} {e}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("the stream was never ended");
}

fn json_record(value: Value) -> Vec<u8> {
    value.to_string().into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_open_streams_when_columns_are_widened_dropped_and_renamed_with_rewrite_then_the_streams_writing_them_end_and_every_acked_row_reads_back(
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = Server::start(dir.path(), "300ms").await;
    server.create_table(
        REWRITTEN,
        "id BIGINT NOT NULL, device STRING, temp FLOAT, note STRING",
    );
    let info = server.table_info(REWRITTEN).await;
    let location = info["storage_location"]
        .as_str()
        .expect("location")
        .to_string();
    let full = descriptor_of(&info, &["id", "device", "temp", "note"]);
    let full_message = message_descriptor(&full).expect("message");
    let small = descriptor_of(&info, &["id", "device", "temp"]);
    let small_message = message_descriptor(&small).expect("message");
    let json = server
        .unrecovered_json_stream(REWRITTEN, None)
        .await
        .expect("json stream");
    let p_full = unrecovered_proto_stream(&server, full).await;
    let p_small = unrecovered_proto_stream(&server, small).await;
    let j = |id: i64| json_record(json!({"id": id, "device": "j", "temp": 1.5, "note": "n"}));
    let f = |id: i64| {
        record_of(
            &full_message,
            id,
            &[
                ("device", ProtoValue::String("f".into())),
                ("temp", ProtoValue::F32(2.5)),
                ("note", ProtoValue::String("m".into())),
            ],
        )
    };
    let s = |id: i64| {
        record_of(
            &small_message,
            id,
            &[
                ("device", ProtoValue::String("s".into())),
                ("temp", ProtoValue::F32(3.25)),
            ],
        )
    };
    // Committed under the first schema, then acked and waiting in the memtable.
    send_all(&json, (0..3).map(j).collect(), true).await;
    send_all(&p_full, (10..13).map(f).collect(), false).await;
    send_all(&p_small, (20..23).map(s).collect(), false).await;
    wait_for_rows(&location, 9, Duration::from_secs(30)).await;
    send_all(&json, (3..5).map(j).collect(), true).await;
    send_all(&p_full, (13..15).map(f).collect(), false).await;
    send_all(&p_small, (23..25).map(s).collect(), false).await;
    // A raw JSON stream, to see the signal and the status on the wire.
    let token = server.token().await;
    let mut raw = crate::raw::OpenStream::open(crate::raw::Call {
        url: &server.url,
        table: REWRITTEN,
        token: Some(&token),
    })
    .await
    .expect("raw stream");
    let last = raw
        .send(&json!({"id": 30, "device": "r", "temp": 4.0, "note": "r"}).to_string())
        .await;
    raw.wait_acked(last).await;

    // Without --rewrite: the precise refusal.
    let out = server.cli(&["table", "alter", REWRITTEN, "--drop-columns", "note"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("--rewrite"), "{err}");

    // Widen: every stream keeps running (its FLOAT values are cast when flushed).
    let out = cli_ok(
        &server,
        &[
            "table",
            "alter",
            REWRITTEN,
            "--widen",
            "temp FLOAT TO DOUBLE",
            "--rewrite",
        ],
    );
    assert!(out.contains("temp DOUBLE"), "{out}");
    send_all(&json, (5..6).map(j).collect(), true).await;
    send_all(&p_full, (15..16).map(f).collect(), false).await;
    send_all(&p_small, (25..26).map(s).collect(), false).await;

    // Drop: the JSON stream and the proto stream writing `note` end; the other goes on.
    cli_ok(
        &server,
        &[
            "table",
            "alter",
            REWRITTEN,
            "--drop-columns",
            "note",
            "--rewrite",
        ],
    );
    let signals = raw.close_signals.clone();
    let status = raw
        .ended_by_server(Duration::from_secs(10))
        .await
        .expect("a status");
    assert_eq!(status.code(), tonic::Code::FailedPrecondition, "{status:?}");
    assert!(status.message().contains("column `note`"), "{status:?}");
    assert_eq!(signals.load(std::sync::atomic::Ordering::SeqCst), 1);
    for (stream, record, is_json) in [(&json, j(6), true), (&p_full, f(16), false)] {
        let e = ended_with(stream, record, is_json).await;
        assert!(e.contains("closed"), "{e}");
    }
    send_all(&p_small, (26..28).map(s).collect(), false).await;

    // Rename: the proto stream writing `device` ends.
    cli_ok(
        &server,
        &[
            "table",
            "alter",
            REWRITTEN,
            "--rename-column",
            "device TO sensor",
            "--rewrite",
        ],
    );
    let e = ended_with(&p_small, s(28), false).await;
    assert!(e.contains("closed"), "{e}");
    let log = server.log();
    let ended: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("the table no longer has a column it writes"))
        .collect();
    assert_eq!(ended.len(), 4, "{log}");
    assert_eq!(
        ended.iter().filter(|l| l.contains("note")).count(),
        3,
        "{log}"
    );
    assert!(ended[3].contains("device"), "{log}");

    // Clients fetch the schema again and reopen.
    let info = server.table_info(REWRITTEN).await;
    let names: Vec<String> = uc_columns(&info).into_iter().map(|c| c.name).collect();
    assert_eq!(names, ["id", "sensor", "temp"], "{info}");
    let new = descriptor_of(&info, &["id", "sensor", "temp"]);
    let new_message = message_descriptor(&new).expect("message");
    let mut json_new = server.json_stream(REWRITTEN).await;
    send_all(
        &json_new,
        (100..102)
            .map(|id| json_record(json!({"id": id, "sensor": "J", "temp": 1.0e300})))
            .collect(),
        true,
    )
    .await;
    let mut proto_new = server.proto_stream(REWRITTEN, new).await;
    let records = (200..202)
        .map(|id| {
            record_of(
                &new_message,
                id,
                &[
                    ("sensor", ProtoValue::String("P".into())),
                    ("temp", ProtoValue::F64(0.1)),
                ],
            )
        })
        .collect();
    send_all(&proto_new, records, false).await;
    json_new.close().await.expect("close");
    proto_new.close().await.expect("close");
    drop((json, p_full, p_small));
    server.terminate();

    // deltalake reads the new schema (and as many rows as polars, below).
    let read = python_read_with(&location, &json!({}), &[]);
    let schema = read.batches[0].schema();
    let fields: Vec<(&str, &arrow_schema::DataType)> = schema
        .fields()
        .iter()
        .map(|f| (f.name().as_str(), f.data_type()))
        .collect();
    assert_eq!(fields[1].0, "sensor");
    assert_eq!(fields[2], ("temp", &arrow_schema::DataType::Float64));
    let (rows, summary) = polars_rows(&location);
    let ids: Vec<i64> = rows.iter().map(|r| r["id"].as_i64().expect("id")).collect();
    let want: Vec<i64> = (0..6)
        .chain(10..16)
        .chain(20..28)
        .chain(30..31)
        .chain(100..102)
        .chain(200..202)
        .collect();
    assert_eq!(ids, want, "every acked row once: {summary}");
    for row in &rows {
        let keys: Vec<&String> = row.as_object().expect("row").keys().collect();
        assert_eq!(keys.len(), 3, "{row}");
        let id = row["id"].as_i64().expect("id");
        let (sensor, temp) = match id {
            0..10 => ("j", 1.5),
            10..20 => ("f", 2.5),
            20..30 => ("s", 3.25),
            30 => ("r", 4.0),
            100..200 => ("J", 1.0e300),
            _ => ("P", 0.1),
        };
        assert_eq!(row["sensor"], json!(sensor), "{row}");
        assert_eq!(row["temp"], json!(temp), "{row}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_acked_rows_not_yet_committed_when_the_pod_is_killed_after_a_drop_and_a_rename_then_replay_keeps_them(
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = Server::start(dir.path(), "1h").await;
    server.create_table(REWRITTEN, "id BIGINT NOT NULL, device STRING, note STRING");
    let info = server.table_info(REWRITTEN).await;
    let location = info["storage_location"]
        .as_str()
        .expect("location")
        .to_string();
    let full = descriptor_of(&info, &["id", "device", "note"]);
    let message = message_descriptor(&full).expect("message");
    let json = server
        .unrecovered_json_stream(REWRITTEN, None)
        .await
        .expect("json stream");
    let proto = unrecovered_proto_stream(&server, full).await;
    send_all(
        &json,
        (0..3)
            .map(|id| json_record(json!({"id": id, "device": "j", "note": "n"})))
            .collect(),
        true,
    )
    .await;
    let records = (10..13)
        .map(|id| {
            record_of(
                &message,
                id,
                &[
                    ("device", ProtoValue::String("p".into())),
                    ("note", ProtoValue::String("m".into())),
                ],
            )
        })
        .collect();
    send_all(&proto, records, false).await;
    // Acked, in the WAL and the memtable only (flush interval 1 h), when the
    // table loses `note` and `device` becomes `sensor`.
    cli_ok(&server, &DROP_NOTE_RENAME_DEVICE);
    server.kill();
    drop((json, proto));
    server.restart().await;
    server.terminate();
    let (got, rows) = ids_and_sensors(&location);
    let want: Vec<(i64, String)> = (0..3)
        .map(|id| (id, "j".to_string()))
        .chain((10..13).map(|id| (id, "p".to_string())))
        .collect();
    assert_eq!(got, want, "{rows:?}");
    assert_eq!(rows[0].as_object().expect("row").len(), 2, "{rows:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_pod_killed_between_a_rewrite_commit_and_the_catalog_update_then_it_restarts_with_the_rewritten_schema(
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut server, location) = pod_pausing_alters(
        dir.path(),
        REWRITTEN,
        "id BIGINT NOT NULL, device STRING, note STRING",
    )
    .await;
    let stream = server.json_stream(REWRITTEN).await;
    send_all(
        &stream,
        (0..3)
            .map(|id| json_record(json!({"id": id, "device": "j", "note": "n"})))
            .collect(),
        true,
    )
    .await;
    wait_for_rows(&location, 3, Duration::from_secs(30)).await;
    let info = alter_killed_before_the_catalog(&mut server, stream, &DROP_NOTE_RENAME_DEVICE).await;
    let names: Vec<String> = uc_columns(&info).into_iter().map(|c| c.name).collect();
    assert_eq!(names, ["id", "sensor"], "{info}");
    let mut stream = server.json_stream(REWRITTEN).await;
    send_all(
        &stream,
        vec![json_record(json!({"id": 100, "sensor": "new"}))],
        true,
    )
    .await;
    stream.close().await.expect("close");
    server.terminate();
    let (got, _) = ids_and_sensors(&location);
    assert_eq!(
        got,
        [(0, "j"), (1, "j"), (2, "j"), (100, "new")]
            .map(|(i, s)| (i, s.to_string()))
            .to_vec()
    );
}

/// An alter whose Delta commit lands on S3 while its answer is lost on the way back (the
/// connection ends; object_store's retry of the put-if-absent then finds the file there):
/// the commit reports an error, but the log holds the new schema, so the alter is done and
/// answered so — the table's catalog entry, the pod's sink and the client agree.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_an_alter_whose_commit_lands_but_its_answer_is_lost_then_it_is_answered_as_done() {
    let moto = crate::moto::Moto::start().await;
    let proxy = crate::lost_answer_proxy::LostAnswerProxy::start(&moto.endpoint).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let warehouse = format!("s3://{}/lost", crate::moto::BUCKET);
    let args = crate::moto::s3_args(&warehouse, &proxy.endpoint);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut server = Server::start_with_args(dir.path(), "200ms", &args).await;
    let location = server.create_table_at(TABLE, COLUMNS).await;
    let stream = server.json_stream(TABLE).await;
    json_rows(&stream, 0..3, false).await;
    s3_rows_at_least(&location, &moto, 3);

    // No rows are pending: the next commit file written is the alter's.
    proxy.arm("/_delta_log/", ".json");
    cli_ok(&server, &["table", "alter", TABLE, "--add-columns", ADD]);
    assert_eq!(proxy.lost(), 1, "the alter's commit answer was lost");

    let info = server.table_info(TABLE).await;
    let names: Vec<String> = uc_columns(&info).into_iter().map(|c| c.name).collect();
    assert_eq!(
        names,
        ["id", "device", "temp", "site", "humidity"],
        "{info}"
    );
    // The pod's own sink has the new columns: a stream writes them.
    json_rows(&stream, 3..5, false).await;
    let mut new = server.json_stream(TABLE).await;
    json_rows(&new, 100..102, true).await;
    new.close().await.expect("close");
    server.terminate();
    let read = python_read_with(
        &location,
        &moto.storage_options(),
        &[("SLUICE_POLARS_ROWS", "1")],
    );
    let rows = read.summary["polars_row_dicts"]
        .as_array()
        .expect("rows")
        .clone();
    let humidity: Vec<Value> = rows.iter().map(|r| r["humidity"].clone()).collect();
    assert_eq!(
        humidity,
        [
            Value::Null,
            Value::Null,
            Value::Null,
            Value::Null,
            Value::Null,
            json!(50.0),
            json!(50.5)
        ],
        "{rows:?}"
    );
}

/// Waits (up to 60 s) until Python `deltalake` reads at least `rows` rows at `location` on
/// moto.
fn s3_rows_at_least(location: &str, moto: &crate::moto::Moto, rows: i64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let read = python_read_with(location, &moto.storage_options(), &[]);
        if read.summary["rows"].as_i64().unwrap_or(0) >= rows {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{rows} rows not readable in 60 s: {}",
            read.summary
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}
