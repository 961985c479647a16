//! The official Rust SDK 3.0.0 on an `EphemeralStream` against a real `sluice serve`: records
//! sent one by one and as a batch are acked, and each lands once in the Delta table (read
//! back with polars).

use std::time::Duration;

use sluice_interop_sdk3::delta::{expected_notes, note, read_notes_when, NOTES_COLUMNS};
use sluice_interop_sdk3::sluice::{Sluice, CLIENT_ID, CLIENT_SECRET};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_sdk3_ephemeral_stream_when_records_and_a_batch_are_flushed_then_each_lands_once() {
    let sluice = Sluice::start("200ms").await.expect("start sluice");
    let table = "main.interop.ephemeral";
    let location = sluice
        .create_table(table, NOTES_COLUMNS)
        .expect("create table");
    let sdk = sluice.sdk().expect("sdk");
    let mut stream = sdk
        .stream_builder()
        .table(table)
        .oauth(CLIENT_ID, CLIENT_SECRET)
        .json()
        .build()
        .await
        .expect("open an ephemeral stream");

    let singles = 400;
    let batch = 100;
    let mut last_single = None;
    for id in 0..singles {
        last_single = Some(stream.ingest_record_offset(note(id)).await.expect("ingest"));
    }
    let batch_offset = stream
        .ingest_records_offset((singles..singles + batch).map(note))
        .await
        .expect("ingest a batch");
    stream.flush().await.expect("every record acked");
    stream.close().await.expect("close");

    assert_eq!(
        last_single,
        Some(singles - 1),
        "one offset per record, from 0"
    );
    assert_eq!(
        batch_offset,
        Some(singles),
        "one offset for the whole batch"
    );
    let total = (singles + batch) as u64;
    let read = read_notes_when(&location, total, Duration::from_secs(30))
        .await
        .expect("read the table");
    let expected = expected_notes(0..singles + batch);
    assert_eq!(read.rows, total, "each acked record once");
    assert_eq!(read.distinct_ids, total);
    assert_eq!(read.rows_by_id, expected);
    assert!(!sluice.log().contains("panicked"), "{}", sluice.log());
}
