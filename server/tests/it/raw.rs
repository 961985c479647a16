//! A raw tonic client of the Zerobus protocol for the security and
//! bad-input tests: builds requests the official SDKs would never send, and
//! keeps a well-behaved stream open alongside to show it is not disturbed.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use prost::Message;
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, FieldDescriptorProto};
use sluice_proto::zerobus_client::ZerobusClient;
use sluice_proto::{
    ephemeral_stream_request::Payload, ephemeral_stream_response, ingest_record_batch_request,
    ingest_record_request, CreateIngestStreamRequest, EphemeralStreamRequest,
    IngestRecordBatchRequest, IngestRecordRequest, JsonRecordBatch, ProtoEncodedRecordBatch,
    RecordType,
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

/// A `create_stream` request.
pub fn create(
    table: &str,
    record_type: RecordType,
    descriptor: Option<Vec<u8>>,
) -> EphemeralStreamRequest {
    EphemeralStreamRequest {
        payload: Some(Payload::CreateStream(CreateIngestStreamRequest {
            table_name: Some(table.into()),
            descriptor_proto: descriptor.map(Bytes::from),
            record_type: Some(record_type as i32),
            avro_schema_json: None,
        })),
    }
}

/// An AVRO `create_stream` request with writer schema `schema` (None: none sent).
pub fn create_avro(table: &str, schema: Option<&str>) -> EphemeralStreamRequest {
    EphemeralStreamRequest {
        payload: Some(Payload::CreateStream(CreateIngestStreamRequest {
            table_name: Some(table.into()),
            descriptor_proto: None,
            record_type: Some(RecordType::Avro as i32),
            avro_schema_json: schema.map(str::to_string),
        })),
    }
}

/// One raw Avro datum at `offset`.
pub fn avro_record(offset: i64, datum: Vec<u8>) -> EphemeralStreamRequest {
    EphemeralStreamRequest {
        payload: Some(Payload::IngestRecord(IngestRecordRequest {
            offset_id: Some(offset),
            record: Some(ingest_record_request::Record::AvroEncodedRecord(
                Bytes::from(datum),
            )),
        })),
    }
}

/// A JSON `create_stream` request.
pub fn create_json(table: &str) -> EphemeralStreamRequest {
    create(table, RecordType::Json, None)
}

/// One JSON record at `offset`.
pub fn json_record(offset: i64, text: &str) -> EphemeralStreamRequest {
    EphemeralStreamRequest {
        payload: Some(Payload::IngestRecord(IngestRecordRequest {
            offset_id: Some(offset),
            record: Some(ingest_record_request::Record::JsonRecord(text.into())),
        })),
    }
}

/// One protobuf record at `offset`.
pub fn proto_record(offset: i64, bytes: Vec<u8>) -> EphemeralStreamRequest {
    EphemeralStreamRequest {
        payload: Some(Payload::IngestRecord(IngestRecordRequest {
            offset_id: Some(offset),
            record: Some(ingest_record_request::Record::ProtoEncodedRecord(
                Bytes::from(bytes),
            )),
        })),
    }
}

/// A JSON batch at `offset`.
pub fn json_batch(offset: i64, records: Vec<String>) -> EphemeralStreamRequest {
    EphemeralStreamRequest {
        payload: Some(Payload::IngestRecordBatch(IngestRecordBatchRequest {
            offset_id: Some(offset),
            batch: Some(ingest_record_batch_request::Batch::JsonBatch(
                JsonRecordBatch { records },
            )),
        })),
    }
}

/// A protobuf batch of `records` at `offset`.
pub fn proto_batch(offset: i64, records: Vec<Vec<u8>>) -> EphemeralStreamRequest {
    EphemeralStreamRequest {
        payload: Some(Payload::IngestRecordBatch(IngestRecordBatchRequest {
            offset_id: Some(offset),
            batch: Some(ingest_record_batch_request::Batch::ProtoEncodedBatch(
                ProtoEncodedRecordBatch {
                    records: records.into_iter().map(Bytes::from).collect(),
                },
            )),
        })),
    }
}

/// Metadata of a call: bearer token and table header.
pub struct Call<'a> {
    pub url: &'a str,
    pub table: &'a str,
    pub token: Option<&'a str>,
}

/// A request of `body` with the call's metadata.
pub fn request<S>(call: &Call<'_>, body: S) -> tonic::Request<S> {
    let mut req = tonic::Request::new(body);
    if let Some(t) = call.token {
        req.metadata_mut().insert(
            "authorization",
            format!("Bearer {t}").parse().expect("meta"),
        );
    }
    req.metadata_mut().insert(
        "x-databricks-zerobus-table-name",
        call.table.parse().expect("meta"),
    );
    req
}

/// Sends `requests` on one stream; returns the acked offsets and the final
/// status (`None` when the stream ended OK).
pub async fn exchange(
    call: Call<'_>,
    requests: Vec<EphemeralStreamRequest>,
) -> (Vec<i64>, Option<tonic::Status>) {
    let mut client = ZerobusClient::connect(call.url.to_string())
        .await
        .expect("connect")
        .max_encoding_message_size(usize::MAX);
    let req = request(&call, futures::stream::iter(requests));
    let mut acks = Vec::new();
    let mut inbound = match client.ephemeral_stream(req).await {
        Ok(r) => r.into_inner(),
        Err(status) => return (acks, Some(status)),
    };
    loop {
        match inbound.message().await {
            Ok(Some(m)) => {
                if let Some(ephemeral_stream_response::Payload::IngestRecordResponse(a)) = m.payload
                {
                    acks.push(a.durability_ack_up_to_offset.expect("ack offset"));
                }
            }
            Ok(None) => return (acks, None),
            Err(status) => return (acks, Some(status)),
        }
    }
}

/// A stream kept open: requests go in through a channel, acks are counted.
pub struct OpenStream {
    tx: Option<mpsc::Sender<EphemeralStreamRequest>>,
    /// Highest acked offset (-1: none yet).
    pub acked: Arc<AtomicI64>,
    /// `CloseStreamSignal`s received.
    pub close_signals: Arc<AtomicI64>,
    reader: tokio::task::JoinHandle<Option<tonic::Status>>,
    next: i64,
}

impl OpenStream {
    /// Opens a JSON stream on `table`; `Err` is the status of a refused stream.
    pub async fn open(call: Call<'_>) -> Result<OpenStream, tonic::Status> {
        let mut client = ZerobusClient::connect(call.url.to_string())
            .await
            .expect("connect");
        let (tx, rx) = mpsc::channel(64);
        tx.send(create_json(call.table)).await.expect("send create");
        let req = request(&call, ReceiverStream::new(rx));
        let mut inbound = client.ephemeral_stream(req).await?.into_inner();
        // Wait for the create response (or the refusal).
        match inbound.message().await {
            Ok(Some(_)) => {}
            Ok(None) => return Err(tonic::Status::unknown("stream ended at once")),
            Err(status) => return Err(status),
        }
        let acked = Arc::new(AtomicI64::new(-1));
        let seen = acked.clone();
        let close_signals = Arc::new(AtomicI64::new(0));
        let signals = close_signals.clone();
        let reader = tokio::spawn(async move {
            loop {
                match inbound.message().await {
                    Ok(Some(m)) => match m.payload {
                        Some(ephemeral_stream_response::Payload::IngestRecordResponse(a)) => {
                            let o = a.durability_ack_up_to_offset.unwrap_or(-1);
                            seen.fetch_max(o, Ordering::SeqCst);
                        }
                        Some(ephemeral_stream_response::Payload::CloseStreamSignal(_)) => {
                            signals.fetch_add(1, Ordering::SeqCst);
                        }
                        _ => {}
                    },
                    Ok(None) => return None,
                    Err(status) => return Some(status),
                }
            }
        });
        Ok(OpenStream {
            tx: Some(tx),
            acked,
            close_signals,
            reader,
            next: 0,
        })
    }

    /// Sends the next JSON record; returns its offset.
    pub async fn send(&mut self, text: &str) -> i64 {
        let offset = self.next;
        self.next += 1;
        if let Some(tx) = &self.tx {
            tx.send(json_record(offset, text))
                .await
                .expect("send record");
        }
        offset
    }

    /// Waits until `offset` is acked (panics after 30 s).
    pub async fn wait_acked(&self, offset: i64) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.acked.load(Ordering::SeqCst) < offset {
            assert!(
                Instant::now() < deadline,
                "offset {offset} not acked in 30 s"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits (up to `timeout`) for the server to end the stream, the client side still
    /// open; returns its final status (`None` = OK).
    pub async fn ended_by_server(self, timeout: Duration) -> Option<tonic::Status> {
        let status = tokio::time::timeout(timeout, self.reader)
            .await
            .expect("the server ended the stream in time")
            .expect("reader");
        drop(self.tx);
        status
    }

    /// Ends the stream cleanly; returns its final status (`None` = OK).
    pub async fn close(mut self) -> Option<tonic::Status> {
        self.tx.take();
        self.reader.await.expect("reader")
    }
}

/// Fetches a token for `client_id` naming `tables` in authorization_details
/// (as the official SDKs do); returns the HTTP status and the JSON body.
pub async fn token_for(
    url: &str,
    client_id: &str,
    secret: &str,
    tables: &[&str],
) -> (u16, serde_json::Value) {
    let details: Vec<serde_json::Value> = tables
        .iter()
        .map(|t| {
            serde_json::json!({
                "type": "unity_catalog_privileges",
                "privileges": ["SELECT", "MODIFY"],
                "object_type": "TABLE",
                "object_full_path": t,
            })
        })
        .collect();
    let details = serde_json::Value::Array(details).to_string();
    let mut form = vec![("grant_type", "client_credentials"), ("scope", "all-apis")];
    if !tables.is_empty() {
        form.push(("authorization_details", details.as_str()));
    }
    let resp = reqwest::Client::new()
        .post(format!("{url}/oidc/v1/token"))
        .basic_auth(client_id, Some(secret))
        .form(&form)
        .send()
        .await
        .expect("token request");
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(serde_json::Value::Null))
}

/// The access token of a successful [`token_for`].
pub async fn token(url: &str, client_id: &str, secret: &str, tables: &[&str]) -> String {
    let (status, body) = token_for(url, client_id, secret, tables).await;
    assert_eq!(status, 200, "token refused: {body}");
    body["access_token"]
        .as_str()
        .expect("access_token")
        .to_string()
}

/// Passes bytes through unchanged, to send what no protobuf encoder would.
#[derive(Clone, Copy, Default)]
struct RawCodec;

impl tonic::codec::Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = RawCodec;
    type Decoder = RawCodec;
    fn encoder(&mut self) -> RawCodec {
        RawCodec
    }
    fn decoder(&mut self) -> RawCodec {
        RawCodec
    }
}

impl tonic::codec::Encoder for RawCodec {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn encode(
        &mut self,
        item: Vec<u8>,
        buf: &mut tonic::codec::EncodeBuf<'_>,
    ) -> Result<(), tonic::Status> {
        use bytes::BufMut;
        buf.put_slice(&item);
        Ok(())
    }
}

impl tonic::codec::Decoder for RawCodec {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn decode(
        &mut self,
        buf: &mut tonic::codec::DecodeBuf<'_>,
    ) -> Result<Option<Vec<u8>>, tonic::Status> {
        use bytes::Buf;
        let v = buf.chunk().to_vec();
        buf.advance(v.len());
        Ok(Some(v))
    }
}

/// Sends raw gRPC messages on an `EphemeralStream` call; returns the final
/// status (`None` = OK).
pub async fn exchange_raw(call: Call<'_>, messages: Vec<Vec<u8>>) -> Option<tonic::Status> {
    let channel = tonic::transport::Endpoint::from_shared(call.url.to_string())
        .expect("endpoint")
        .connect()
        .await
        .expect("connect");
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.expect("ready");
    let path = tonic::codegen::http::uri::PathAndQuery::from_static(
        "/databricks.zerobus.Zerobus/EphemeralStream",
    );
    let req = request(&call, futures::stream::iter(messages));
    let mut inbound = match grpc.streaming(req, path, RawCodec).await {
        Ok(r) => r.into_inner(),
        Err(status) => return Some(status),
    };
    loop {
        match inbound.message().await {
            Ok(Some(_)) => {}
            Ok(None) => return None,
            Err(status) => return Some(status),
        }
    }
}

/// One encoded `DescriptorProto` named `Row` with optional scalar fields `(name, number, type)`.
pub fn descriptor(fields: &[(&str, i32, Type)]) -> Vec<u8> {
    DescriptorProto {
        name: Some("Row".into()),
        field: fields
            .iter()
            .map(|(name, number, ty)| FieldDescriptorProto {
                name: Some(name.to_string()),
                number: Some(*number),
                r#type: Some(*ty as i32),
                label: Some(Label::Optional as i32),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
    .encode_to_vec()
}
