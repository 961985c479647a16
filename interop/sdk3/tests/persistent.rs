//! The official Rust SDK 3.0.0 `PersistentStream` (feature `eos`) against a real
//! `sluice serve`.
//!
//! Sluice serves `PersistentStream` on a single pod (issue 20), so the switch
//! [`PERSISTENT_STREAMS_SERVED`] is `true`: the exactly-once create → close → resume flow.
//! `false` would check the UNIMPLEMENTED answer of Sluice before issue 20.

use std::time::Duration;

use databricks_zerobus_ingest_sdk::{GrpcCode, ZerobusError, ZerobusSdk};
use sluice_interop_sdk3::delta::{expected_notes, note, read_notes_when, NOTES_COLUMNS};
use sluice_interop_sdk3::sluice::{Sluice, CLIENT_ID, CLIENT_SECRET};

/// EXPECTATION SWITCH. `false`: Sluice refuses persistent streams (UNIMPLEMENTED), the
/// answer before issue 20. `true`: the full create → ingest → close → resume → ingest flow, every record
/// exactly once in Delta.
const PERSISTENT_STREAMS_SERVED: bool = true;

const TABLE: &str = "main.interop.persistent";

fn builder(sdk: &ZerobusSdk) -> databricks_zerobus_ingest_sdk::PersistentStreamBuilder<'_> {
    sdk.persistent_stream_builder()
        .table(TABLE)
        .oauth(CLIENT_ID, CLIENT_SECRET)
        .json()
        .recovery(false)
}

fn assert_unimplemented(what: &str, result: Result<impl Sized, ZerobusError>) {
    match result {
        Err(ZerobusError::CreateStreamError(status)) => assert_eq!(
            status.code(),
            GrpcCode::Unimplemented,
            "{what}: {}",
            status.message()
        ),
        Err(other) => panic!("{what}: expected UNIMPLEMENTED, got {other}"),
        Ok(_) => {
            panic!("{what}: Sluice now serves persistent streams; flip PERSISTENT_STREAMS_SERVED")
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_sdk3_persistent_stream_when_created_closed_and_resumed_then_each_record_once() {
    let sluice = Sluice::start("200ms").await.expect("start sluice");
    let location = sluice
        .create_table(TABLE, NOTES_COLUMNS)
        .expect("create table");
    let sdk = sluice.sdk().expect("sdk");

    if !PERSISTENT_STREAMS_SERVED {
        assert_unimplemented("create", builder(&sdk).build().await);
        assert_unimplemented("resume", builder(&sdk).resume("no-such-stream").await);
        assert!(!sluice.log().contains("panicked"), "{}", sluice.log());
        return;
    }

    // Session 1: create, ingest 0..100, flush, close without retiring.
    let mut first = builder(&sdk)
        .build()
        .await
        .expect("create a persistent stream");
    let stream_id = first.stream_id().expect("a durable stream id").to_string();
    assert_eq!(first.resume_watermark(), None, "nothing committed yet");
    for id in 0..100 {
        assert_eq!(
            first.ingest_record_offset(note(id)).await.expect("ingest"),
            id
        );
    }
    first.flush().await.expect("acked");
    first.close().await.expect("close");

    // Session 2: resume by id; the watermark covers every acked record, offsets continue.
    let mut second = builder(&sdk)
        .resume(stream_id.clone())
        .await
        .expect("resume the persistent stream");
    assert_eq!(second.stream_id(), Some(stream_id.as_str()));
    let watermark = second.resume_watermark().expect("a committed offset");
    assert!(watermark >= 99, "never below an acked offset: {watermark}");
    for id in watermark + 1..200 {
        assert_eq!(
            second.ingest_record_offset(note(id)).await.expect("ingest"),
            id
        );
    }
    second.flush().await.expect("acked");
    second.close().await.expect("close");

    let read = read_notes_when(&location, 200, Duration::from_secs(30))
        .await
        .expect("read the table");
    let expected = expected_notes(0..200);
    assert_eq!(read.rows, 200, "each record exactly once");
    assert_eq!(read.distinct_ids, 200);
    assert_eq!(read.rows_by_id, expected);
}
