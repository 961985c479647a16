//! A raw tonic client of `PersistentStream` / `RetireStream` for the persistent stream
//! tests: opening requests (create, resume), JSON records `{"id": offset}`, a connection
//! whose acks are counted by a reader task, one-call refusals, and the checks the tests
//! share (a refusal's status, acks reached, each id once in Delta).

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use sluice_proto::zerobus_client::ZerobusClient;
use sluice_proto::{
    ingest_record_request, persistent_stream_request::Payload, persistent_stream_response,
    resume_ingest_stream_request, retire_stream_request, CreateIngestStreamRequest,
    CreatePersistentStreamRequest, IngestRecordRequest, PersistentStreamRequest, RecordType,
    ResumeIngestStreamRequest, RetireStreamRequest,
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use crate::harness::Server;
use crate::moto::python_read;
use crate::raw::{request, Call};
use tonic::Code;

/// A `create_stream` of a persistent stream on `table`.
pub fn create(
    table: &str,
    record_type: RecordType,
    descriptor: Option<Vec<u8>>,
) -> PersistentStreamRequest {
    PersistentStreamRequest {
        payload: Some(Payload::CreateStream(CreatePersistentStreamRequest {
            create_stream: Some(CreateIngestStreamRequest {
                table_name: Some(table.into()),
                descriptor_proto: descriptor.map(Bytes::from),
                record_type: Some(record_type as i32),
                avro_schema_json: None,
            }),
        })),
    }
}

/// A `resume_stream` of stream `id`.
pub fn resume(
    id: &str,
    record_type: RecordType,
    descriptor: Option<Vec<u8>>,
) -> PersistentStreamRequest {
    PersistentStreamRequest {
        payload: Some(Payload::ResumeStream(ResumeIngestStreamRequest {
            identifier: Some(resume_ingest_stream_request::Identifier::StreamId(
                id.into(),
            )),
            descriptor_proto: descriptor.map(Bytes::from),
            record_type: Some(record_type as i32),
        })),
    }
}

/// The JSON record `{"id": offset}` at `offset`.
pub fn record(offset: i64) -> PersistentStreamRequest {
    PersistentStreamRequest {
        payload: Some(Payload::IngestRecord(IngestRecordRequest {
            offset_id: Some(offset),
            record: Some(ingest_record_request::Record::JsonRecord(format!(
                "{{\"id\":{offset}}}"
            ))),
        })),
    }
}

/// What a connection's opening answer said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Opened {
    /// A create: the durable stream id.
    Created(String),
    /// A resume: the watermark.
    Resumed(Option<i64>),
}

/// An open persistent stream connection.
pub struct Conn {
    tx: Option<mpsc::Sender<PersistentStreamRequest>>,
    /// Highest acked offset (-1: none yet).
    pub acked: Arc<AtomicI64>,
    /// Whether a `CloseStreamSignal` arrived.
    pub close_signalled: Arc<std::sync::atomic::AtomicBool>,
    reader: tokio::task::JoinHandle<Option<tonic::Status>>,
}

impl Conn {
    /// Opens a connection with `first`; `Err` is the refusal.
    pub async fn open(
        call: Call<'_>,
        first: PersistentStreamRequest,
    ) -> Result<(Conn, Opened), tonic::Status> {
        let mut client = ZerobusClient::connect(call.url.to_string())
            .await
            .expect("connect");
        let (tx, rx) = mpsc::channel(256);
        tx.send(first).await.expect("send the opening request");
        let mut inbound = client
            .persistent_stream(request(&call, ReceiverStream::new(rx)))
            .await?
            .into_inner();
        use persistent_stream_response::Payload as Out;
        let opened = match inbound.message().await?.and_then(|m| m.payload) {
            Some(Out::CreateStreamResponse(c)) => {
                Opened::Created(c.stream_id.expect("a stream id"))
            }
            Some(Out::ResumeStreamResponse(r)) => Opened::Resumed(r.last_committed_offset),
            other => panic!("unexpected opening answer {other:?}"),
        };
        let acked = Arc::new(AtomicI64::new(-1));
        let close_signalled = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (a, c) = (acked.clone(), close_signalled.clone());
        let reader = tokio::spawn(async move {
            loop {
                match inbound.message().await {
                    Ok(Some(m)) => match m.payload {
                        Some(Out::IngestRecordResponse(r)) => {
                            let offset = r.durability_ack_up_to_offset.expect("ack offset");
                            let before = a.fetch_max(offset, Ordering::SeqCst);
                            assert!(
                                offset >= before,
                                "acks never go back: {offset} after {before}"
                            );
                        }
                        Some(Out::CloseStreamSignal(_)) => c.store(true, Ordering::SeqCst),
                        other => panic!("unexpected response {other:?}"),
                    },
                    Ok(None) => return None,
                    Err(status) => return Some(status),
                }
            }
        });
        Ok((
            Conn {
                tx: Some(tx),
                acked,
                close_signalled,
                reader,
            },
            opened,
        ))
    }

    /// Sends `requests`; false when the connection is gone.
    pub async fn send(&self, requests: impl IntoIterator<Item = PersistentStreamRequest>) -> bool {
        let Some(tx) = &self.tx else { return false };
        for r in requests {
            if tx.send(r).await.is_err() {
                return false;
            }
        }
        true
    }

    /// A sender for a producer task.
    pub fn sender(&self) -> Option<mpsc::Sender<PersistentStreamRequest>> {
        self.tx.clone()
    }

    /// Ends the sending side and returns the final status (None: ended OK).
    pub async fn finish(mut self) -> Option<tonic::Status> {
        self.tx = None;
        self.reader.await.expect("reader")
    }
}

/// Calls `RetireStream` for stream `id` of `table` (None: no table_name).
pub async fn retire(call: Call<'_>, table: Option<&str>, id: &str) -> Result<(), tonic::Status> {
    let mut client = ZerobusClient::connect(call.url.to_string())
        .await
        .expect("connect");
    client
        .retire_stream(request(
            &call,
            RetireStreamRequest {
                table_name: table.map(str::to_string),
                identifier: Some(retire_stream_request::Identifier::StreamId(id.into())),
            },
        ))
        .await
        .map(|_| ())
}

/// Asserts a refusal's code and that its message names `needle`.
pub fn refused<T>(what: &str, result: Result<T, tonic::Status>, code: Code, needle: &str) {
    let Err(status) = result else {
        panic!("{what}: accepted")
    };
    println!("| {what} | {:?} — {} |", status.code(), status.message());
    assert_eq!(status.code(), code, "{what}: {status:?}");
    assert!(
        status.message().contains(needle),
        "{what}: `{}` lacks `{needle}`",
        status.message()
    );
}

pub async fn create_stream(call: Call<'_>, table: &str) -> (Conn, String) {
    match Conn::open(call, create(table, RecordType::Json, None)).await {
        Ok((conn, Opened::Created(id))) => (conn, id),
        other => panic!("create: {:?}", other.map(|(_, o)| o)),
    }
}

pub async fn resume_stream(call: Call<'_>, id: &str) -> (Conn, Option<i64>) {
    match Conn::open(call, resume(id, RecordType::Json, None)).await {
        Ok((conn, Opened::Resumed(w))) => (conn, w),
        other => panic!("resume: {:?}", other.map(|(_, o)| o)),
    }
}

pub async fn wait_acked(conn: &Conn, offset: i64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while conn.acked.load(Ordering::SeqCst) < offset {
        assert!(Instant::now() < deadline, "offset {offset} never acked");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Reads the table with polars and asserts ids 0..n, each exactly once.
pub fn assert_each_once(location: &str, n: i64) {
    let read = python_read(location, &serde_json::json!({}));
    let s = &read.summary;
    assert_eq!(s["polars_rows"], n, "{s}");
    assert_eq!(s["polars_distinct_ids"], n, "{s}");
    assert_eq!(s["polars_id_sum"], n * (n - 1) / 2, "{s}");
}

/// A call to `server` for `table` with bearer `token`.
pub fn call<'a>(server: &'a Server, table: &'a str, token: &'a str) -> Call<'a> {
    Call {
        url: &server.url,
        table,
        token: Some(token),
    }
}
