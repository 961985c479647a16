//! A flat table's protobuf runs go to the memtable as their records, parsed at the flush
//! in batches of 8 192 rows (`sink/deferred.rs`). Against a real pod over raw gRPC: runs
//! of hundreds of single-record requests and of batch requests from two streams land
//! whole, once, each stream's rows in offset order within each batch read back (the
//! reader's 1 024 rows), every row with its own stream and
//! offset in the system columns; a bad record in a run acks and commits the requests
//! before it and nothing after it.

use std::collections::HashMap;
use std::time::Duration;

use arrow_array::{Array, Int64Array, RecordBatch, StringArray};
use prost_types::field_descriptor_proto::Type;
use sluice_proto::RecordType;
use tonic::Code;

use crate::harness::{read_delta, wait_for_rows, Server};
use crate::raw::{create, descriptor, exchange, proto_batch, proto_record, Call};

/// A `Row { id = 1; note = 2 }` record.
fn row(id: i64) -> Vec<u8> {
    let mut buf = Vec::new();
    prost::encoding::int64::encode(1, &id, &mut buf);
    prost::encoding::string::encode(2, &format!("n{id}"), &mut buf);
    buf
}

fn row_descriptor() -> Vec<u8> {
    descriptor(&[("id", 1, Type::Int64), ("note", 2, Type::String)])
}

fn int64<'a>(batch: &'a RecordBatch, name: &str) -> &'a Int64Array {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<Int64Array>())
        .unwrap_or_else(|| panic!("{name}: an INT64 column"))
}

fn string<'a>(batch: &'a RecordBatch, name: &str) -> &'a StringArray {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<StringArray>())
        .unwrap_or_else(|| panic!("{name}: a STRING column"))
}

/// Single records at offsets 0..SINGLES, then BATCHES batch requests of BATCH records.
const SINGLES: i64 = 3_000;
const BATCHES: i64 = 20;
const BATCH: i64 = 500;

/// One stream's requests: ids `base + i` for its i-th record, and the offset each id gets.
fn stream_requests(
    table: &str,
    base: i64,
) -> (Vec<sluice_proto::EphemeralStreamRequest>, Vec<(i64, i64)>) {
    let mut requests = vec![create(table, RecordType::Proto, Some(row_descriptor()))];
    let mut offsets = Vec::new();
    for i in 0..SINGLES {
        requests.push(proto_record(i, row(base + i)));
        offsets.push((base + i, i));
    }
    for b in 0..BATCHES {
        let offset = SINGLES + b;
        let ids: Vec<i64> = (0..BATCH).map(|k| base + SINGLES + b * BATCH + k).collect();
        offsets.extend(ids.iter().map(|id| (*id, offset)));
        requests.push(proto_batch(offset, ids.into_iter().map(row).collect()));
    }
    (requests, offsets)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proto_runs_land_whole_once_in_order_each_row_with_its_stream_and_offset() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), "300ms").await;
    let t = "main.runs.t";
    let location = server
        .create_table_with(t, "id BIGINT NOT NULL, note STRING", &["--system-columns"])
        .await;
    let token = server.token().await;
    let call = || Call {
        url: server.url.as_str(),
        table: t,
        token: Some(token.as_str()),
    };
    let (a, a_offsets) = stream_requests(t, 0);
    let (b, b_offsets) = stream_requests(t, 1_000_000);
    let ((a_acks, a_end), (b_acks, b_end)) = tokio::join!(exchange(call(), a), exchange(call(), b));
    let last = SINGLES + BATCHES - 1;
    for (acks, end) in [(&a_acks, a_end), (&b_acks, b_end)] {
        assert!(end.is_none(), "stream ended with {end:?}");
        assert_eq!(acks.last(), Some(&last), "every request acked");
    }

    let per_stream = (SINGLES + BATCHES * BATCH) as usize;
    wait_for_rows(&location, 2 * per_stream, Duration::from_secs(30)).await;
    let batches = read_delta(&location).await;
    let want: HashMap<i64, i64> = a_offsets.into_iter().chain(b_offsets).collect();
    let mut seen: HashMap<i64, (String, i64)> = HashMap::new();
    let mut streams: HashMap<bool, String> = HashMap::new();
    for batch in &batches {
        let (ids, notes) = (int64(batch, "id"), string(batch, "note"));
        let (stream_ids, offsets) = (
            string(batch, "_sluice_stream_id"),
            int64(batch, "_sluice_offset"),
        );
        // Within a batch read back, each stream's rows come in the order they were sent.
        let mut last_id: HashMap<bool, i64> = HashMap::new();
        for i in 0..batch.num_rows() {
            let id = ids.value(i);
            assert_eq!(notes.value(i), format!("n{id}"), "id {id}'s note");
            let second = id >= 1_000_000;
            let stream = streams
                .entry(second)
                .or_insert_with(|| stream_ids.value(i).to_string());
            assert_eq!(
                stream_ids.value(i),
                stream,
                "id {id}: one stream id per stream"
            );
            assert!(
                last_id.insert(second, id).is_none_or(|before| before < id),
                "id {id} after a later one"
            );
            let previous = seen.insert(id, (stream.clone(), offsets.value(i)));
            assert!(previous.is_none(), "id {id} twice");
        }
    }
    assert_ne!(
        streams.get(&false),
        streams.get(&true),
        "the two streams' ids differ"
    );
    assert_eq!(seen.len(), 2 * per_stream, "every row once");
    for (id, offset) in &want {
        assert_eq!(
            seen.get(id).map(|s| s.1),
            Some(*offset),
            "id {id}'s _sluice_offset"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_record_in_a_proto_run_commits_the_requests_before_it_and_none_after() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), "300ms").await;
    let t = "main.runs.bad";
    let location = server
        .create_table_at(t, "id BIGINT NOT NULL, note STRING")
        .await;
    let token = server.token().await;
    let call = Call {
        url: server.url.as_str(),
        table: t,
        token: Some(token.as_str()),
    };
    let mut requests = vec![create(t, RecordType::Proto, Some(row_descriptor()))];
    requests.extend((0..400).map(|i| proto_record(i, row(i))));
    // A varint cut short.
    requests.push(proto_record(400, vec![0x08]));
    requests.extend((401..450).map(|i| proto_record(i, row(i))));
    let (acks, end) = exchange(call, requests).await;
    let status = end.expect("the stream fails");
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(
        status.message().contains("record at offset 400"),
        "{}",
        status.message()
    );
    assert_eq!(acks.last(), Some(&399), "acked up to the bad record");

    wait_for_rows(&location, 400, Duration::from_secs(30)).await;
    // Three more flush intervals: nothing after the bad record comes later.
    tokio::time::sleep(Duration::from_millis(900)).await;
    let batches = read_delta(&location).await;
    let mut ids: Vec<i64> = batches
        .iter()
        .flat_map(|b| int64(b, "id").values().to_vec())
        .collect();
    ids.sort_unstable();
    assert_eq!(
        ids,
        (0..400).collect::<Vec<_>>(),
        "the requests before the bad one, once"
    );
}
