//! The Kafka load: `producers` connections, each a raw Kafka producer over the
//! `kafka-protocol` crate's types (SASL PLAIN, Produce v9, acks=all): records are the same
//! JSON telemetry objects REST and the gRPC JSON row send, cut into record batches of at
//! most `batch_bytes` uncompressed (librdkafka's `batch.size`; with `linger.ms=5` a
//! closed-loop generator fills 64 KiB long before the linger ends), LZ4-framed, up to `in_flight`
//! requests pipelined per connection (librdkafka's `max.in.flight`).

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, ProduceRequest, ProduceResponse, RequestHeader, ResponseHeader,
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
    TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use sluice_bench::e2e::{CLIENT_ID, CLIENT_SECRET, ID_STRIDE};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

/// How the producers send.
pub struct Shape {
    pub producers: usize,
    pub window: Duration,
    pub batch_bytes: usize,
    pub in_flight: usize,
}

const PRODUCE_VERSION: i16 = 9;

fn frame(api: ApiKey, version: i16, correlation: i32, body: &impl Encodable) -> Result<Bytes> {
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    RequestHeader::default()
        .with_request_api_key(api as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation)
        .with_client_id(Some(StrBytes::from_static_str("kafka-bench")))
        .encode(&mut buf, api.request_header_version(version))?;
    body.encode(&mut buf, version)?;
    let size = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    Ok(buf.freeze())
}

async fn read_answer<R: Decodable>(
    read: &mut OwnedReadHalf,
    api: ApiKey,
    version: i16,
) -> Result<R> {
    let mut size = [0u8; 4];
    read.read_exact(&mut size)
        .await
        .context("the broker closed")?;
    let mut answer = vec![0u8; i32::from_be_bytes(size) as usize];
    read.read_exact(&mut answer).await?;
    let mut answer = Bytes::from(answer);
    ResponseHeader::decode(&mut answer, api.response_header_version(version))?;
    R::decode(&mut answer, version)
}

async fn call<Q: Encodable + HeaderVersion, R: Decodable>(
    read: &mut OwnedReadHalf,
    write: &mut OwnedWriteHalf,
    api: ApiKey,
    version: i16,
    request: &Q,
) -> Result<R> {
    write.write_all(&frame(api, version, 0, request)?).await?;
    read_answer(read, api, version).await
}

/// One LZ4 batch of the records with ids `first..first + n`.
fn batch(first: i64, n: usize, padding: &str) -> Result<Bytes> {
    let records: Vec<Record> = (0..n)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // The crate starts a new batch where offset - sequence changes; -1 first
            // (no producer id) keeps all the records in one batch.
            sequence: i as i32 - 1,
            timestamp: 1_700_000_000_000,
            key: None,
            value: Some(Bytes::from(crate::rest_load::json_record(
                first + i as i64,
                padding,
            ))),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode_with_custom_compression(
        &mut buf,
        records.iter(),
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::Lz4,
        },
        Some(
            |raw: &mut BytesMut, out: &mut BytesMut, _c: Compression| -> anyhow::Result<()> {
                let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
                e.write_all(raw)?;
                out.extend_from_slice(&e.finish()?);
                Ok(())
            },
        ),
    )?;
    Ok(buf.freeze())
}

/// Records acked (acks=all) inside the window, all connections.
pub async fn run(port: u16, table: &str, shape: Shape, padding: Arc<String>) -> Result<u64> {
    let deadline = Instant::now() + shape.window;
    let record_bytes = crate::rest_load::json_record(0, &padding).len() + 8;
    let per_batch = (shape.batch_bytes / record_bytes).max(1);
    let mut tasks = Vec::new();
    for p in 0..shape.producers {
        let table = table.to_string();
        let padding = padding.clone();
        let in_flight = shape.in_flight;
        tasks.push(tokio::spawn(async move {
            let stream = TcpStream::connect(("127.0.0.1", port)).await?;
            stream.set_nodelay(true)?;
            let (mut read, mut write) = stream.into_split();
            let hs: SaslHandshakeResponse = call(
                &mut read,
                &mut write,
                ApiKey::SaslHandshake,
                1,
                &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")),
            )
            .await?;
            let auth: SaslAuthenticateResponse = call(
                &mut read,
                &mut write,
                ApiKey::SaslAuthenticate,
                2,
                &SaslAuthenticateRequest::default()
                    .with_auth_bytes(Bytes::from(format!("\0{CLIENT_ID}\0{CLIENT_SECRET}"))),
            )
            .await?;
            if hs.error_code != 0 || auth.error_code != 0 {
                bail!("SASL refused: {:?}", auth.error_message);
            }
            let permits = Arc::new(tokio::sync::Semaphore::new(in_flight));
            let (sizes_tx, mut sizes_rx) = tokio::sync::mpsc::unbounded_channel::<u64>();
            let reader_permits = permits.clone();
            let reader = tokio::spawn(async move {
                let mut acked = 0u64;
                let outcome = async {
                    while let Some(n) = sizes_rx.recv().await {
                        let answer: ProduceResponse =
                            read_answer(&mut read, ApiKey::Produce, PRODUCE_VERSION).await?;
                        let p = &answer.responses[0].partition_responses[0];
                        if p.error_code != 0 {
                            bail!("Produce refused: {} {:?}", p.error_code, p.error_message);
                        }
                        acked += n;
                        reader_permits.add_permits(1);
                    }
                    anyhow::Ok(())
                }
                .await;
                // A failed reader releases the writer waiting for a permit.
                reader_permits.close();
                outcome.map(|()| acked)
            });
            let mut next = p as i64 * ID_STRIDE;
            let mut correlation = 0;
            while Instant::now() < deadline {
                let records = batch(next, per_batch, &padding)?;
                next += per_batch as i64;
                let request = ProduceRequest::default()
                    .with_acks(-1)
                    .with_timeout_ms(30_000)
                    .with_topic_data(vec![TopicProduceData::default()
                        .with_name(TopicName(StrBytes::from_string(table.clone())))
                        .with_partition_data(vec![PartitionProduceData::default()
                            .with_index(0)
                            .with_records(Some(records))])]);
                let Ok(permit) = permits.acquire().await else {
                    break;
                };
                permit.forget();
                correlation += 1;
                write
                    .write_all(&frame(
                        ApiKey::Produce,
                        PRODUCE_VERSION,
                        correlation,
                        &request,
                    )?)
                    .await?;
                sizes_tx.send(per_batch as u64)?;
            }
            drop(sizes_tx);
            let acked = reader.await??;
            let _ = write.shutdown().await;
            anyhow::Ok(acked)
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await??;
    }
    Ok(total)
}
