//! Arrow Flight `DoPut` against a real `sluice serve`: a raw Flight client (the arrow-flight
//! crate's) for every refusal — wrong schema, offset gap, over-size batch, corrupt IPC —
//! while a neighbour Flight stream keeps flowing; SIGKILL with acked arrow-batch frames
//! (ZSTD bodies, a dictionary column) and their replay, exactly once; the official Rust
//! SDK 2.12.0 (`arrow-flight` feature) with LZ4 bodies.

use std::sync::Arc;
use std::time::Duration;

use arrow_array::{ArrayRef, DictionaryArray, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_flight::encode::{DictionaryHandling, FlightDataEncoderBuilder};
use arrow_flight::flight_service_client::FlightServiceClient;
use arrow_flight::{FlightData, PutResult};
use arrow_ipc::writer::IpcWriteOptions;
use arrow_ipc::CompressionType;
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use futures::StreamExt;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, Status, Streaming};

use crate::harness::{read_delta, wait_for_rows, Server, CLIENT_ID, CLIENT_SECRET};
use crate::raw::{request, token, Call};
use crate::rows::rows_as_json;

const COLUMNS: &str = "id BIGINT NOT NULL, name STRING, score DOUBLE";

fn schema(dictionary: bool) -> SchemaRef {
    let name = if dictionary {
        DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
    } else {
        DataType::Utf8
    };
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", name, true),
        Field::new("score", DataType::Float64, true),
    ]))
}

/// Rows `from..from + n`: name `n{id % 3}` (null every 5th), score id / 2.
fn batch(schema: &SchemaRef, from: i64, n: i64) -> RecordBatch {
    let ids: Vec<i64> = (from..from + n).collect();
    let names: Vec<Option<String>> = ids
        .iter()
        .map(|i| (i % 5 != 4).then(|| format!("n{}", i % 3)))
        .collect();
    let name: ArrayRef = match schema.field(1).data_type() {
        DataType::Dictionary(..) => Arc::new(
            names
                .iter()
                .map(|n| n.as_deref())
                .collect::<DictionaryArray<arrow_array::types::Int32Type>>(),
        ),
        _ => Arc::new(StringArray::from(names)),
    };
    RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Int64Array::from(ids.clone())),
            name,
            Arc::new(Float64Array::from_iter_values(
                ids.iter().map(|i| *i as f64 / 2.0),
            )),
        ],
    )
    .expect("batch")
}

/// The Flight messages of `batches` (schema first), each record batch tagged with its
/// `offset_id` from `first_offset` on; dictionaries sent as dictionary batches.
async fn encode(
    schema: &SchemaRef,
    batches: Vec<RecordBatch>,
    compression: Option<CompressionType>,
    first_offset: i64,
) -> Vec<FlightData> {
    let options = IpcWriteOptions::default()
        .try_with_compression(compression)
        .expect("compression");
    let mut frames: Vec<FlightData> = FlightDataEncoderBuilder::new()
        .with_schema(schema.clone())
        .with_options(options)
        .with_dictionary_handling(DictionaryHandling::Resend)
        .with_max_flight_data_size(usize::MAX)
        .build(futures::stream::iter(batches.into_iter().map(Ok)))
        .map(|r| r.expect("encodes"))
        .collect()
        .await;
    let mut offset = first_offset;
    for frame in &mut frames {
        let header = arrow_ipc::root_as_message(&frame.data_header).expect("message");
        if header.header_type() == arrow_ipc::MessageHeader::RecordBatch {
            frame.app_metadata = format!("{{\"offset_id\": {offset}}}").into_bytes().into();
            offset += 1;
        }
    }
    frames
}

/// An open `DoPut`: messages go in through a channel, `PutResult`s come back.
struct Put {
    tx: mpsc::Sender<FlightData>,
    responses: Streaming<PutResult>,
}

impl Put {
    async fn open(call: Call<'_>, first: Vec<FlightData>) -> Result<Put, Status> {
        let channel = tonic::transport::Channel::from_shared(call.url.to_string())
            .expect("url")
            .connect()
            .await
            .expect("connect");
        let mut client = FlightServiceClient::new(channel).max_encoding_message_size(usize::MAX);
        let (tx, rx) = mpsc::channel(64);
        for frame in first {
            tx.send(frame).await.expect("queue");
        }
        let responses = client
            .do_put(request(&call, ReceiverStream::new(rx)))
            .await?
            .into_inner();
        Ok(Put { tx, responses })
    }

    /// The next answer's JSON, or the status the stream ended with (OK: None).
    async fn next(&mut self) -> Result<Option<serde_json::Value>, Status> {
        let answer = tokio::time::timeout(Duration::from_secs(30), self.responses.message())
            .await
            .expect("an answer within 30 s")?;
        Ok(answer.map(|r| serde_json::from_slice(&r.app_metadata).expect("ack json")))
    }

    /// Answers until one acks `offset` (the records it counts), or the stream's end.
    async fn acked(&mut self, offset: i64) -> Result<u64, Status> {
        loop {
            match self.next().await? {
                Some(ack) if ack["ack_up_to_offset"] == offset => {
                    return Ok(ack["ack_up_to_records"].as_u64().expect("records"))
                }
                Some(_) => {}
                None => return Err(Status::ok("ended before the ack")),
            }
        }
    }

    /// Half-closes the request stream, then returns the status the stream ends with
    /// (after any acks).
    async fn end(mut self) -> Status {
        // Dropping the real sender ends the request stream after what is queued.
        self.tx = mpsc::channel(1).0;
        loop {
            match self.next().await {
                Ok(Some(_)) => {}
                Ok(None) => return Status::ok(""),
                Err(status) => return status,
            }
        }
    }
}

async fn ready(put: &mut Put) {
    let ready = put.next().await.expect("ready").expect("ready signal");
    assert_eq!(ready["ack_up_to_offset"], -1, "{ready}");
    assert_eq!(ready["ack_up_to_records"], 0, "{ready}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flight_refusals_are_precise_and_a_neighbour_keeps_flowing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), "200ms").await;
    let table = "main.flight.refusals";
    let location = server.create_table_at(table, COLUMNS).await;
    let token = token(&server.url, CLIENT_ID, CLIENT_SECRET, &[table]).await;
    let call = || Call {
        url: &server.url,
        table,
        token: Some(&token),
    };
    let plain = schema(false);

    // The neighbour: open, one batch acked before the bad ones.
    let mut frames = encode(&plain, vec![batch(&plain, 0, 100)], None, 0).await;
    let mut neighbour = Put::open(call(), frames.drain(..1).collect())
        .await
        .expect("neighbour opens");
    ready(&mut neighbour).await;
    for f in frames {
        neighbour.tx.send(f).await.expect("send");
    }
    assert_eq!(neighbour.acked(0).await.expect("ack 0"), 100);

    // Wrong schema: refused before the ready signal, naming the column.
    let wrong = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("score", DataType::Utf8, true),
    ]));
    let frames = encode(&wrong, vec![], None, 0).await;
    let status = match Put::open(call(), frames).await {
        Ok(put) => put.end().await,
        Err(status) => status,
    };
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(
        status.message().contains("column `score` is DOUBLE") && status.message().contains("Utf8"),
        "{status:?}"
    );

    // Offset gap: batch 0 acked, then offset 2 where 1 was due.
    let mut frames = encode(&plain, vec![batch(&plain, 1000, 10)], None, 0).await;
    frames.extend(
        encode(&plain, vec![batch(&plain, 1010, 10)], None, 2)
            .await
            .into_iter()
            .skip(1),
    );
    let mut put = Put::open(call(), frames).await.expect("opens");
    ready(&mut put).await;
    assert_eq!(put.acked(0).await.expect("ack 0"), 10);
    let status = put.end().await;
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(
        status
            .message()
            .contains("offset gap: expected offset_id 1, got 2"),
        "{status:?}"
    );

    // Over-size batch: more than the 10 MiB request limit in one FlightData.
    let big_schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
    ]));
    let text = "x".repeat(11 << 20);
    let big = RecordBatch::try_new(
        big_schema.clone(),
        vec![
            Arc::new(Int64Array::from(vec![1])),
            Arc::new(StringArray::from(vec![text.as_str()])),
        ],
    )
    .expect("big batch");
    let frames = encode(&big_schema, vec![big], None, 0).await;
    let mut put = Put::open(call(), frames).await.expect("opens");
    ready(&mut put).await;
    let status = put.end().await;
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(
        status.message().contains("--max-request-bytes"),
        "{status:?}"
    );

    // Corrupt IPC: the record batch's body cut short.
    let mut frames = encode(&plain, vec![batch(&plain, 2000, 50)], None, 0).await;
    let body = frames[1].data_body.clone();
    frames[1].data_body = body.slice(..body.len() / 3);
    let mut put = Put::open(call(), frames).await.expect("opens");
    ready(&mut put).await;
    let status = put.end().await;
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(
        status.message().contains("batch offset_id 0")
            && status.message().contains("does not decode"),
        "{status:?}"
    );

    // Corrupt IPC: a header that is no flatbuffer.
    let mut frames = encode(&plain, vec![batch(&plain, 2000, 50)], None, 0).await;
    frames[1].data_header = vec![0xff; 12].into();
    let mut put = Put::open(call(), frames).await.expect("opens");
    ready(&mut put).await;
    let status = put.end().await;
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(
        status.message().contains("not an Arrow IPC message"),
        "{status:?}"
    );

    // The neighbour still flows.
    for f in encode(&plain, vec![batch(&plain, 100, 100)], None, 1)
        .await
        .into_iter()
        .skip(1)
    {
        neighbour.tx.send(f).await.expect("send");
    }
    assert_eq!(neighbour.acked(1).await.expect("ack 1"), 200);
    if let Some(status) = neighbour.end_ok().await {
        panic!("the neighbour ends OK, not {status:?}");
    }

    // Rows: the neighbour's 200 and the gap stream's acked 10, nothing of the refused.
    wait_for_rows(&location, 210, Duration::from_secs(30)).await;
    let rows = rows_as_json(&read_delta(&location).await);
    assert_eq!(rows.len(), 210);
}

impl Put {
    /// Ends after the client finished: None when the stream ended OK.
    async fn end_ok(self) -> Option<Status> {
        let status = self.end().await;
        (status.code() != Code::Ok).then_some(status)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acked_arrow_frames_survive_sigkill_and_replay_exactly_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = Server::start(dir.path(), "1h").await;
    let table = "main.flight.replay";
    let location = server.create_table_at(table, COLUMNS).await;
    let token = token(&server.url, CLIENT_ID, CLIENT_SECRET, &[table]).await;
    let dict = schema(true);
    let batches: Vec<RecordBatch> = (0..20).map(|b| batch(&dict, b * 500, 500)).collect();
    let mut frames = encode(&dict, batches, Some(CompressionType::ZSTD), 0).await;
    let call = Call {
        url: &server.url,
        table,
        token: Some(&token),
    };
    let mut put = Put::open(call, frames.drain(..1).collect())
        .await
        .expect("opens");
    ready(&mut put).await;
    for f in frames {
        put.tx.send(f).await.expect("send");
    }
    assert_eq!(put.acked(19).await.expect("all acked"), 10_000);
    server.kill();
    drop(put);

    server.restart().await;
    wait_for_rows(&location, 10_000, Duration::from_secs(30)).await;
    server.kill();
    server.restart().await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut rows = rows_as_json(&read_delta(&location).await);
    rows.sort_by_key(|r| r["id"].as_i64());
    assert_eq!(rows.len(), 10_000, "replayed exactly once");
    for (i, r) in rows.iter().enumerate() {
        let i = i as i64;
        assert_eq!(r["id"], i);
        let name = (i % 5 != 4).then(|| format!("n{}", i % 3));
        assert_eq!(r["name"], serde_json::json!(name), "row {i}");
        assert_eq!(r["score"], serde_json::json!(i as f64 / 2.0), "row {i}");
    }
    assert!(
        server.log().contains("replayed WAL records"),
        "replay happened"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_rust_sdk_streams_arrow_batches() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), "200ms").await;
    let table = "main.flight.rust_sdk";
    let location = server.create_table_at(table, COLUMNS).await;
    let plain = schema(false);
    let sdk = server.sdk();
    let mut stream = sdk
        .stream_builder()
        .table(table)
        .oauth(CLIENT_ID, CLIENT_SECRET)
        .arrow(plain.clone())
        .ipc_compression(Some(CompressionType::LZ4_FRAME))
        .build_arrow()
        .await
        .expect("arrow stream");
    for b in 0..8 {
        stream
            .ingest_batch(batch(&plain, b * 1000, 1000))
            .await
            .expect("ingest");
    }
    stream.flush().await.expect("flush");
    stream.close().await.expect("close");
    wait_for_rows(&location, 8000, Duration::from_secs(30)).await;
    let rows = rows_as_json(&read_delta(&location).await);
    let mut ids: Vec<i64> = rows.iter().filter_map(|r| r["id"].as_i64()).collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..8000).collect::<Vec<_>>());
    assert!(rows.iter().all(|r| r["score"].is_number()));
    let nulls = rows.iter().filter(|r| r["name"].is_null()).count();
    assert_eq!(nulls, 1600, "every 5th name is null");
}

/// A graceful stop acks what is durable, then sends the Flight form of `CloseStreamSignal`
/// (`close_stream_duration_ms`, repeating the last ack) and ends with UNAVAILABLE.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopping_pod_sends_the_flight_close_signal_then_unavailable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), "200ms").await;
    let table = "main.flight.stopping";
    server.create_table_at(table, COLUMNS).await;
    let token = token(&server.url, CLIENT_ID, CLIENT_SECRET, &[table]).await;
    let plain = schema(false);
    let frames = encode(&plain, vec![batch(&plain, 0, 10)], None, 0).await;
    let call = Call {
        url: &server.url,
        table,
        token: Some(&token),
    };
    let mut put = Put::open(call, frames).await.expect("opens");
    ready(&mut put).await;
    assert_eq!(put.acked(0).await.expect("ack 0"), 10);
    server.sigterm();
    let close = put.next().await.expect("close signal").expect("an answer");
    assert_eq!(close["close_stream_duration_ms"], 0, "{close}");
    assert_eq!(close["ack_up_to_offset"], 0, "{close}");
    assert_eq!(close["ack_up_to_records"], 10, "{close}");
    let status = put.end().await;
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
}
