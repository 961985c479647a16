//! One Kafka client connection: size-prefixed request frames read in order, each handled
//! at once up to the point its answer waits for (a Produce's WAL durability), answers
//! written in request order by a writer task — so a client's pipelined requests share
//! fdatasyncs. SASL comes first unless the pod runs `--auth none`; a request of another
//! API before it, an unknown API, an unserved version (other than ApiVersions, answered
//! UNSUPPORTED_VERSION with the versions served), a frame over the limit or a failed
//! SaslAuthenticate (answered SASL_AUTHENTICATION_FAILED first) close the connection, as a
//! Kafka broker does.

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use futures::future::BoxFuture;
use futures::FutureExt;
use kafka_protocol::messages::init_producer_id_response::InitProducerIdResponse;
use kafka_protocol::messages::produce_request::ProduceRequest;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, ProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::sasl_authenticate_response::SaslAuthenticateResponse;
use kafka_protocol::messages::sasl_handshake_response::SaslHandshakeResponse;
use kafka_protocol::messages::{
    ApiKey, ProducerId, RequestHeader, RequestKind, ResponseHeader, ResponseKind,
};
use kafka_protocol::protocol::{Encodable, StrBytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use super::decode::decode_request;
use super::produce::{code, produce, KafkaIngest, Outcome};
use super::sasl::{self, Mechanism};
use super::versions::{api_versions, served, UNSUPPORTED_VERSION};
use crate::auth::Caller;
use crate::config::AuthMode;
use crate::ingest::acks::count_refusal_code;
use crate::pod::Pod;

/// Answers waiting to be written, per connection (the client's pipelining bound).
const MAX_PENDING_ANSWERS: usize = 64;
/// Request bytes allowed beyond `--max-request-bytes` (headers, topic names).
const FRAME_OVERHEAD: usize = 64 << 10;
/// SASL_AUTHENTICATION_FAILED.
const SASL_AUTHENTICATION_FAILED: i16 = 58;
/// UNSUPPORTED_SASL_MECHANISM.
const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
/// ILLEGAL_SASL_STATE.
const ILLEGAL_SASL_STATE: i16 = 34;

/// What the Kafka listener shares with its connections.
pub struct Shared {
    /// The pod.
    pub pod: Arc<Pod>,
    /// Streams and producers.
    pub kafka: Arc<KafkaIngest>,
    /// The address Metadata advertises.
    pub advertise: (String, u16),
}

/// The connection's SASL state.
struct Session {
    caller: Option<Caller>,
    mechanism: Option<Mechanism>,
}

/// What handling one request came to.
enum Step {
    /// An answer (written when the future resolves, in request order).
    Answer(BoxFuture<'static, Option<Bytes>>),
    /// Answer, then close (a refusal, counted with its gRPC code).
    AnswerAndClose(Bytes, tonic::Code, String),
    /// Nothing to write (acks=0).
    Silent,
    /// Close without an answer (a refusal, counted with its gRPC code).
    Close(tonic::Code, String),
}

/// Serves one connection (plain TCP or TLS) from `peer` until the client or the pod ends
/// it.
pub async fn serve<S>(shared: Arc<Shared>, stream: S, peer: std::net::SocketAddr)
where
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let (mut reader, mut writer) = tokio::io::split(stream);
    let (tx, mut rx) = mpsc::channel::<BoxFuture<'static, Option<Bytes>>>(MAX_PENDING_ANSWERS);
    let write_task = tokio::spawn(async move {
        while let Some(answer) = rx.recv().await {
            if let Some(bytes) = answer.await {
                if writer.write_all(&bytes).await.is_err() {
                    break;
                }
            }
        }
        let _ = writer.shutdown().await;
    });
    let mut session = Session {
        caller: (shared.pod.config.auth == AuthMode::None).then_some(Caller::Anonymous),
        mechanism: None,
    };
    let limit = shared.pod.config.max_message_bytes + FRAME_OVERHEAD;
    let shutdown = shared.pod.shutdown.clone();
    // A draining pod closes its Kafka connections (answers under way are written first):
    // clients reconnect through the router to another pod, which takes their producers over.
    let draining = shared.pod.draining.clone();
    loop {
        let frame = tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = draining.cancelled() => break,
            frame = read_frame(&mut reader, limit) => frame,
        };
        let frame = match frame {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err((code, reason)) => {
                if let Some(code) = code {
                    count_refusal_code(code);
                }
                tracing::info!(%peer, "Kafka connection closed: {reason}");
                break;
            }
        };
        let step = handle(&shared, &mut session, frame).await;
        let sent = match step {
            Step::Answer(answer) => tx.send(answer).await.is_ok(),
            Step::Silent => true,
            Step::AnswerAndClose(bytes, code, reason) => {
                count_refusal_code(code);
                let _ = tx.send(async move { Some(bytes) }.boxed()).await;
                tracing::info!(%peer, "Kafka connection closed: {reason}");
                false
            }
            Step::Close(code, reason) => {
                count_refusal_code(code);
                tracing::info!(%peer, "Kafka connection closed: {reason}");
                false
            }
        };
        if !sent {
            break;
        }
    }
    drop(tx);
    let _ = write_task.await;
}

/// The next request frame (None: the client closed between frames); an error says why
/// the connection ends, with the refusal's gRPC code when the client is at fault.
async fn read_frame(
    reader: &mut (impl AsyncRead + Unpin),
    limit: usize,
) -> Result<Option<Bytes>, (Option<tonic::Code>, String)> {
    let mut size = [0u8; 4];
    match reader.read_exact(&mut size).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err((None, format!("reading: {e}"))),
    }
    let size = i32::from_be_bytes(size);
    let size = usize::try_from(size).map_err(|_| {
        (
            Some(tonic::Code::InvalidArgument),
            format!("negative frame size {size}"),
        )
    })?;
    if size > limit {
        return Err((
            Some(tonic::Code::ResourceExhausted),
            format!(
                "request frame of {size} bytes is over the limit of {limit} \
                 (--max-request-bytes plus {FRAME_OVERHEAD})"
            ),
        ));
    }
    let mut frame = BytesMut::zeroed(size);
    reader
        .read_exact(&mut frame)
        .await
        .map_err(|e| (None, format!("reading a {size}-byte frame: {e}")))?;
    Ok(Some(frame.freeze()))
}

/// Encodes one answer: size, response header, body.
fn encode(header: &RequestHeader, version: i16, body: ResponseKind) -> Result<Bytes, String> {
    let api = ApiKey::try_from(header.request_api_key)
        .map_err(|_| format!("unknown API key {}", header.request_api_key))?;
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    ResponseHeader::default()
        .with_correlation_id(header.correlation_id)
        .encode(&mut buf, api.response_header_version(version))
        .map_err(|e| format!("encoding a response header: {e}"))?;
    body.encode(&mut buf, version)
        .map_err(|e| format!("encoding a {api:?} v{version} response: {e}"))?;
    let size = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    Ok(buf.freeze())
}

fn answer_now(header: &RequestHeader, body: impl Into<ResponseKind>) -> Step {
    match encode(header, header.request_api_version, body.into()) {
        Ok(bytes) => Step::Answer(async move { Some(bytes) }.boxed()),
        Err(e) => Step::Close(tonic::Code::Internal, e),
    }
}

async fn handle(shared: &Arc<Shared>, session: &mut Session, frame: Bytes) -> Step {
    let request = match decode_request(frame, served) {
        Ok(r) => r,
        Err(e) => return Step::Close(tonic::Code::InvalidArgument, e.to_string()),
    };
    let header = request.header;
    let version = header.request_api_version;
    let api = match ApiKey::try_from(header.request_api_key) {
        Ok(api) => api,
        Err(_) => {
            return Step::Close(
                tonic::Code::Unimplemented,
                format!("unknown API key {}", header.request_api_key),
            )
        }
    };
    let Some(body) = request.body else {
        if api == ApiKey::ApiVersions {
            // KIP-511: a version this pod does not serve gets the list in the v0 layout.
            return match encode(&header, 0, api_versions(UNSUPPORTED_VERSION).into()) {
                Ok(bytes) => Step::Answer(async move { Some(bytes) }.boxed()),
                Err(e) => Step::Close(tonic::Code::Internal, e),
            };
        }
        return Step::Close(
            tonic::Code::Unimplemented,
            match served(api) {
                Some(range) => format!(
                    "{api:?} v{version} is not served (versions {}..={})",
                    range.min, range.max
                ),
                None => format!("{api:?} is not served (a producer-only broker)"),
            },
        );
    };
    match body {
        RequestKind::ApiVersions(_) => answer_now(&header, api_versions(0)),
        RequestKind::SaslHandshake(req) => {
            let mechanisms = sasl::MECHANISMS
                .iter()
                .map(|m| StrBytes::from_static_str(m))
                .collect();
            let answer = SaslHandshakeResponse::default().with_mechanisms(mechanisms);
            match Mechanism::from_name(req.mechanism.as_str()) {
                Some(m) => {
                    session.mechanism = Some(m);
                    answer_now(&header, answer)
                }
                None => {
                    count_refusal_code(tonic::Code::Unauthenticated);
                    answer_now(&header, answer.with_error_code(UNSUPPORTED_SASL_MECHANISM))
                }
            }
        }
        RequestKind::SaslAuthenticate(req) => {
            let Some(mechanism) = session.mechanism.take() else {
                return close_with(
                    &header,
                    tonic::Code::Unauthenticated,
                    SaslAuthenticateResponse::default()
                        .with_error_code(ILLEGAL_SASL_STATE)
                        .with_error_message(Some(StrBytes::from_static_str(
                            "SaslAuthenticate before SaslHandshake",
                        ))),
                    "SaslAuthenticate before SaslHandshake",
                );
            };
            match sasl::authenticate(&shared.pod.auth, mechanism, &req.auth_bytes) {
                Ok(caller) => {
                    session.caller = Some(caller);
                    answer_now(&header, SaslAuthenticateResponse::default())
                }
                Err(e) => {
                    metrics::counter!("sluice_kafka_sasl_failures_total").increment(1);
                    let message = format!("{mechanism:?}: {e}");
                    close_with(
                        &header,
                        tonic::Code::Unauthenticated,
                        SaslAuthenticateResponse::default()
                            .with_error_code(SASL_AUTHENTICATION_FAILED)
                            .with_error_message(Some(StrBytes::from_string(message.clone()))),
                        &format!("SASL authentication failed: {message}"),
                    )
                }
            }
        }
        other => {
            let Some(caller) = session.caller.clone() else {
                return Step::Close(
                    tonic::Code::Unauthenticated,
                    format!(
                        "{api:?} before SASL authentication (use SASL_PLAINTEXT or SASL_SSL \
                         with PLAIN or OAUTHBEARER)"
                    ),
                );
            };
            match other {
                RequestKind::Metadata(req) => answer_now(
                    &header,
                    super::metadata::metadata(&shared.pod, &caller, &req, &shared.advertise),
                ),
                RequestKind::InitProducerId(req) => {
                    answer_now(&header, init_producer_id(shared, &req))
                }
                RequestKind::Produce(req) => produce_request(shared, &caller, header, req).await,
                _ => Step::Close(tonic::Code::Unimplemented, format!("{api:?} is not served")),
            }
        }
    }
}

fn close_with(
    header: &RequestHeader,
    code: tonic::Code,
    body: SaslAuthenticateResponse,
    reason: &str,
) -> Step {
    match encode(header, header.request_api_version, body.into()) {
        Ok(bytes) => Step::AnswerAndClose(bytes, code, reason.to_string()),
        Err(e) => Step::Close(code, e),
    }
}

fn init_producer_id(
    shared: &Shared,
    req: &kafka_protocol::messages::InitProducerIdRequest,
) -> InitProducerIdResponse {
    if req.transactional_id.is_some() {
        count_refusal_code(code::grpc(code::INVALID_REQUEST));
        return InitProducerIdResponse::default()
            .with_error_code(code::INVALID_REQUEST)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
    }
    let producers = &shared.kafka.producers;
    let given = if req.producer_id.0 >= 0 && req.producer_epoch >= 0 {
        producers.bump(req.producer_id.0, req.producer_epoch)
    } else {
        producers.allocate()
    };
    match given {
        Ok((id, epoch)) => InitProducerIdResponse::default()
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(epoch),
        Err(e) => {
            tracing::error!("InitProducerId: {e}");
            count_refusal_code(tonic::Code::Internal);
            InitProducerIdResponse::default()
                .with_error_code(code::UNKNOWN_SERVER_ERROR)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1)
        }
    }
}

async fn produce_request(
    shared: &Arc<Shared>,
    caller: &Caller,
    header: RequestHeader,
    req: ProduceRequest,
) -> Step {
    let version = header.request_api_version;
    let acks = req.acks;
    let mut outcomes: Vec<(kafka_protocol::messages::TopicName, Vec<(i32, Outcome)>)> = Vec::new();
    for topic in req.topic_data {
        let mut partitions = Vec::with_capacity(topic.partition_data.len());
        for p in topic.partition_data {
            let outcome = if matches!(acks, -1..=1) {
                produce(
                    &shared.pod,
                    &shared.kafka,
                    caller,
                    topic.name.0.as_str(),
                    p.index,
                    p.records,
                )
                .await
                .unwrap_or_else(|e| Outcome::from_error(&e))
            } else {
                Outcome {
                    error_code: code::INVALID_REQUIRED_ACKS,
                    message: Some(format!("acks={acks}: only -1 (all), 0 and 1 are served")),
                    base_offset: -1,
                    ..Outcome::default()
                }
            };
            if outcome.error_code != code::NONE {
                metrics::counter!("sluice_kafka_refused_batches_total", "code" => outcome.error_code.to_string())
                    .increment(1);
                count_refusal_code(outcome.grpc_code());
            }
            partitions.push((p.index, outcome));
        }
        outcomes.push((topic.name, partitions));
    }
    if acks == 0 {
        return Step::Silent;
    }
    let pod = shared.pod.clone();
    Step::Answer(
        async move {
            let last = outcomes
                .iter()
                .flat_map(|(_, ps)| ps.iter().filter_map(|(_, o)| o.durable))
                .max();
            let failed = match last {
                Some(lsn) => pod.wal.wait_durable(lsn).await.err().map(|e| e.to_string()),
                None => None,
            };
            let responses = outcomes
                .into_iter()
                .map(|(name, partitions)| {
                    let partition_responses = partitions
                        .into_iter()
                        .map(|(index, o)| partition_response(index, o, failed.as_deref(), version))
                        .collect();
                    TopicProduceResponse::default()
                        .with_name(name)
                        .with_partition_responses(partition_responses)
                })
                .collect();
            match encode(
                &header,
                version,
                ProduceResponse::default().with_responses(responses).into(),
            ) {
                Ok(bytes) => Some(bytes),
                Err(e) => {
                    tracing::error!("Kafka Produce answer: {e}");
                    None
                }
            }
        }
        .boxed(),
    )
}

fn partition_response(
    index: i32,
    outcome: Outcome,
    wal_failed: Option<&str>,
    version: i16,
) -> PartitionProduceResponse {
    let (error_code, message) = match (outcome.durable, wal_failed) {
        (Some(_), Some(e)) => {
            count_refusal_code(tonic::Code::Unavailable);
            (
                code::KAFKA_STORAGE_ERROR,
                Some(format!("the WAL failed before the batch was durable: {e}")),
            )
        }
        _ => (outcome.error_code, outcome.message),
    };
    let mut answer = PartitionProduceResponse::default()
        .with_index(index)
        .with_error_code(error_code)
        .with_base_offset(if error_code == code::NONE {
            outcome.base_offset
        } else {
            -1
        });
    if version >= 8 {
        answer = answer.with_error_message(message.map(StrBytes::from_string));
        if let Some((i, m)) = outcome.record_error {
            answer = answer.with_record_errors(vec![BatchIndexAndErrorMessage::default()
                .with_batch_index(i)
                .with_batch_index_error_message(Some(StrBytes::from_string(m)))]);
        }
    }
    answer
}
