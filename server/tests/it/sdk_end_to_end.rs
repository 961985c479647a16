//! The trunk, end to end: the official Rust SDK pushes 100 000 protobuf and
//! 100 000 JSON records (single and batch calls) into one table with every
//! column type of the mapping; after flush and close the Delta table holds
//! exactly those rows with exactly those values.
//!
//! The protobuf descriptor is built by the SDK's own
//! `descriptor_from_uc_columns` from the columns our Unity-Catalog-shaped
//! tables API returns, so this also checks that API's shape.
//!
//! The same push runs against the local warehouse (read back with the
//! deltalake crate) and against a real S3-compatible server, moto (read back
//! with Python `deltalake` and `polars` through storage options).

use std::time::Duration;

use databricks_zerobus_ingest_sdk::schema::{descriptor_from_uc_columns, UcColumn};
use databricks_zerobus_ingest_sdk::{message_descriptor, JsonString, ProtoBytes};
use prost::Message;

use crate::harness::{read_delta, Server};
use crate::moto::{python_read, Moto};
use crate::rows::{expected, expected_as_stored, proto_row, rows_as_json, ALL_TYPES};

const PER_STREAM: i64 = 100_000;
const BATCH: i64 = 1_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_rust_sdk_proto_and_json_streams_land_every_value_in_delta() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), "250ms").await;
    let location = push_every_type(&server, "main.trunk.all_types").await;
    let total = 2 * PER_STREAM as usize;
    crate::harness::wait_for_rows(&location, total, Duration::from_secs(60)).await;
    assert_rows_are_every_value(&read_delta(&location).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_rust_sdk_streams_land_every_value_in_delta_on_s3_read_by_python_deltalake_and_polars(
) {
    let moto = Moto::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let args = moto.serve_args("e2e");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut server = Server::start_with_args(dir.path(), "250ms", &args).await;
    let location = push_every_type(&server, "main.trunk.all_types").await;
    assert!(location.starts_with("s3://sluice-it/e2e/"), "{location}");
    server.terminate();
    let read = python_read(&location, &moto.storage_options());
    let total = 2 * PER_STREAM;
    assert_eq!(read.summary["rows"], total, "{}", read.summary);
    assert_eq!(read.summary["polars_rows"], total, "{}", read.summary);
    assert_eq!(read.summary["polars_distinct_ids"], total);
    assert_eq!(read.summary["polars_id_sum"], total * (total - 1) / 2);
    assert_rows_are_every_value(&read.batches);
    let objects = moto.list("e2e/main/trunk/all_types/").await;
    assert!(
        objects
            .iter()
            .any(|k| k.ends_with("_delta_log/00000000000000000000.json")),
        "{objects:?}"
    );
    assert!(objects
        .iter()
        .any(|k| k.ends_with(".zstd.parquet") || k.ends_with(".parquet")));
}

fn assert_rows_are_every_value(batches: &[arrow_array::RecordBatch]) {
    let total = 2 * PER_STREAM as usize;
    let mut rows = rows_as_json(batches);
    rows.sort_by_key(|r| r["id"].as_i64().expect("id"));
    assert_eq!(rows.len(), total);
    for (i, row) in rows.iter().enumerate() {
        let want = expected_as_stored(i as i64);
        assert_eq!(row, &want, "row {i} differs");
    }
}

/// Pushes rows 0..PER_STREAM as protobuf and PER_STREAM..2*PER_STREAM as
/// JSON (half single calls, half batches) into a new all-types `table`;
/// returns its storage location once every record is acked.
async fn push_every_type(server: &Server, table: &str) -> String {
    server.create_table(table, ALL_TYPES);

    let info = server.table_info(table).await;
    let columns: Vec<UcColumn> =
        serde_json::from_value(info["columns"].clone()).expect("UC columns deserialize");
    let descriptor = descriptor_from_uc_columns(&columns, "all_types").expect("descriptor");
    let message = message_descriptor(&descriptor).expect("message descriptor");

    let proto = async {
        let mut stream = server.proto_stream(table, descriptor.clone()).await;
        let half = PER_STREAM / 2;
        for i in 0..half {
            let bytes = proto_row(&message, i).encode_to_vec();
            stream
                .ingest_record_offset(ProtoBytes(bytes))
                .await
                .expect("ingest");
        }
        for start in (half..PER_STREAM).step_by(BATCH as usize) {
            let batch: Vec<ProtoBytes> = (start..start + BATCH)
                .map(|i| ProtoBytes(proto_row(&message, i).encode_to_vec()))
                .collect();
            stream
                .ingest_records_offset(batch)
                .await
                .expect("ingest batch");
        }
        stream.flush().await.expect("flush");
        stream.close().await.expect("close");
    };
    let json = async {
        let mut stream = server.json_stream(table).await;
        let (lo, hi) = (PER_STREAM, 2 * PER_STREAM);
        let mid = lo + PER_STREAM / 2;
        for i in lo..mid {
            let text = expected(i).to_string();
            stream
                .ingest_record_offset(JsonString(text))
                .await
                .expect("ingest");
        }
        for start in (mid..hi).step_by(BATCH as usize) {
            let batch: Vec<JsonString> = (start..start + BATCH)
                .map(|i| JsonString(expected(i).to_string()))
                .collect();
            stream
                .ingest_records_offset(batch)
                .await
                .expect("ingest batch");
        }
        stream.flush().await.expect("flush");
        stream.close().await.expect("close");
    };
    tokio::join!(proto, json);
    info["storage_location"]
        .as_str()
        .expect("location")
        .to_string()
}
