//! The Kafka listener's exact answers, over a raw TCP client built from the
//! `kafka-protocol` crate's types (what real clients see in their logs only in part):
//! ApiVersions (and UNSUPPORTED_VERSION with the list for a version not served), a
//! request before SASL closing the connection, SASL_AUTHENTICATION_FAILED with its
//! message, Metadata (UNKNOWN_TOPIC_OR_PARTITION), INVALID_RECORD naming the record and
//! field, MESSAGE_TOO_LARGE, an idempotent producer's duplicate answered without a write,
//! OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH after a bump, and a retried batch
//! still recognised after a SIGKILL and restart; the rows read back from Delta. Then the
//! refusals no real client produces (a corrupt batch, two batches in one partition,
//! acks=2, a transactional batch and transactional id, a principal without MODIFY, a frame
//! over the limit), each
//! counted exactly in `sluice_refusals_total{code}`, and the accepted records in
//! `sluice_kafka_records_total`.

use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use indexmap::IndexMap;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, InitProducerIdRequest, InitProducerIdResponse,
    MetadataRequest, MetadataResponse, ProduceRequest, ProduceResponse, ProducerId, RequestHeader,
    ResponseHeader, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::harness::{free_port, read_delta, Server, CLIENT_ID, CLIENT_SECRET};

const TABLE: &str = "main.kafka.raw";

struct Raw {
    stream: TcpStream,
    correlation: i32,
}

impl Raw {
    async fn connect(port: u16) -> Raw {
        Raw {
            stream: TcpStream::connect(("127.0.0.1", port))
                .await
                .expect("connect"),
            correlation: 0,
        }
    }

    /// Sends a request; the response body bytes (None: the connection closed).
    async fn send_raw(&mut self, api: ApiKey, version: i16, body: &[u8]) -> Option<Bytes> {
        self.correlation += 1;
        let mut buf = BytesMut::new();
        buf.put_i32(0);
        RequestHeader::default()
            .with_request_api_key(api as i16)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation)
            .with_client_id(Some(StrBytes::from_static_str("raw")))
            .encode(&mut buf, api.request_header_version(version))
            .expect("header");
        buf.extend_from_slice(body);
        let size = (buf.len() - 4) as i32;
        buf[..4].copy_from_slice(&size.to_be_bytes());
        self.stream.write_all(&buf).await.ok()?;
        let mut size = [0u8; 4];
        tokio::time::timeout(Duration::from_secs(30), self.stream.read_exact(&mut size))
            .await
            .expect("answered or closed in time")
            .ok()?;
        let mut frame = vec![0u8; i32::from_be_bytes(size) as usize];
        self.stream.read_exact(&mut frame).await.ok()?;
        Some(Bytes::from(frame))
    }

    async fn call<Q: Encodable + HeaderVersion, R: Decodable>(
        &mut self,
        api: ApiKey,
        version: i16,
        request: &Q,
    ) -> Option<R> {
        let mut body = BytesMut::new();
        request.encode(&mut body, version).expect("encode");
        let mut answer = self.send_raw(api, version, &body).await?;
        let header = ResponseHeader::decode(&mut answer, api.response_header_version(version))
            .expect("response header");
        assert_eq!(header.correlation_id, self.correlation);
        Some(R::decode(&mut answer, version).expect("response body"))
    }

    async fn authenticate(&mut self, secret: &str) -> SaslAuthenticateResponse {
        self.authenticate_as(CLIENT_ID, secret).await
    }

    async fn authenticate_as(&mut self, client_id: &str, secret: &str) -> SaslAuthenticateResponse {
        let handshake: SaslHandshakeResponse = self
            .call(
                ApiKey::SaslHandshake,
                1,
                &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")),
            )
            .await
            .expect("handshake answered");
        assert_eq!(handshake.error_code, 0);
        let message = format!("\0{client_id}\0{secret}");
        self.call(
            ApiKey::SaslAuthenticate,
            2,
            &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(message)),
        )
        .await
        .expect("authenticate answered")
    }

    async fn produce(
        &mut self,
        topic: &str,
        partition: i32,
        batch: Bytes,
    ) -> (i16, Option<String>, Vec<i32>) {
        self.produce_acks(-1, topic, partition, batch).await
    }

    async fn produce_acks(
        &mut self,
        acks: i16,
        topic: &str,
        partition: i32,
        batch: Bytes,
    ) -> (i16, Option<String>, Vec<i32>) {
        let request = ProduceRequest::default()
            .with_acks(acks)
            .with_timeout_ms(30_000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(partition)
                    .with_records(Some(batch))])]);
        let answer: ProduceResponse = self
            .call(ApiKey::Produce, 9, &request)
            .await
            .expect("produce answered");
        let p = &answer.responses[0].partition_responses[0];
        (
            p.error_code,
            p.error_message.as_ref().map(|m| m.as_str().to_string()),
            p.record_errors.iter().map(|e| e.batch_index).collect(),
        )
    }
}

/// A v2 batch of `values` from producer `pid`/`epoch` starting at sequence `seq`.
fn batch(pid: i64, epoch: i16, seq: i32, values: &[&[u8]]) -> Bytes {
    batch_of(pid, epoch, seq, false, values)
}

/// [`batch`], part of a transaction if `transactional`.
fn batch_of(pid: i64, epoch: i16, seq: i32, transactional: bool, values: &[&[u8]]) -> Bytes {
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, v)| Record {
            transactional,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: pid,
            producer_epoch: epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: if seq < 0 { -1 } else { seq + i as i32 },
            timestamp: 1_700_000_000_000,
            key: None,
            value: Some(Bytes::copy_from_slice(v)),
            headers: IndexMap::new(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records.iter(),
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .expect("batch");
    buf.freeze()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_answers_on_the_wire_and_idempotence_survives_a_sigkill() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kport = free_port();
    let listen = format!("127.0.0.1:{kport}");
    let mut server = Server::start_with_args(
        dir.path(),
        "200ms",
        &["--kafka-listen", &listen, "--max-record-bytes", "1024"],
    )
    .await;
    let location = server
        .create_table_at(TABLE, "id BIGINT NOT NULL, note STRING")
        .await;

    // ApiVersions, served and not: a version not served gets the list in the v0 layout.
    let mut raw = Raw::connect(kport).await;
    let versions: ApiVersionsResponse = raw
        .call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default())
        .await
        .expect("answered");
    assert_eq!(versions.error_code, 0);
    let produce = versions
        .api_keys
        .iter()
        .find(|k| k.api_key == ApiKey::Produce as i16)
        .expect("Produce listed");
    assert_eq!((produce.min_version, produce.max_version), (3, 12));
    let mut answer = raw
        .send_raw(ApiKey::ApiVersions, 99, &[0])
        .await
        .expect("answered");
    assert_eq!(answer.get_i32(), raw.correlation);
    let unsupported = ApiVersionsResponse::decode(&mut answer, 0).expect("v0 layout");
    assert_eq!(unsupported.error_code, 35, "UNSUPPORTED_VERSION");
    assert_eq!(unsupported.api_keys.len(), versions.api_keys.len());
    // Anything but SASL before SASL closes the connection.
    let closed = raw
        .call::<_, MetadataResponse>(ApiKey::Metadata, 12, &MetadataRequest::default())
        .await;
    assert!(closed.is_none(), "Metadata before SASL is not answered");

    let mut raw = Raw::connect(kport).await;
    let refused = raw.authenticate("wrong-secret").await;
    assert_eq!(refused.error_code, 58, "SASL_AUTHENTICATION_FAILED");
    let message = refused.error_message.expect("message").to_string();
    assert!(message.contains("invalid client id or secret"), "{message}");

    let mut raw = Raw::connect(kport).await;
    assert_eq!(raw.authenticate(CLIENT_SECRET).await.error_code, 0);
    let metadata: MetadataResponse = raw
        .call(
            ApiKey::Metadata,
            12,
            &MetadataRequest::default().with_topics(Some(
                [TABLE, "main.kafka.nope"]
                    .iter()
                    .map(|t| {
                        MetadataRequestTopic::default()
                            .with_name(Some(TopicName(StrBytes::from_static_str(t))))
                    })
                    .collect(),
            )),
        )
        .await
        .expect("metadata");
    assert_eq!(metadata.brokers[0].port, i32::from(kport));
    assert_eq!(metadata.topics[0].error_code, 0);
    assert_eq!(metadata.topics[0].partitions.len(), 1);
    assert_eq!(
        metadata.topics[1].error_code, 3,
        "UNKNOWN_TOPIC_OR_PARTITION"
    );

    let init: InitProducerIdResponse = raw
        .call(
            ApiKey::InitProducerId,
            4,
            &InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        )
        .await
        .expect("init");
    let pid = init.producer_id.0;
    assert!(pid > 0 && init.producer_epoch == 0);

    let first = batch(pid, 0, 0, &[br#"{"id":0}"#, br#"{"id":1}"#, br#"{"id":2}"#]);
    assert_eq!(raw.produce(TABLE, 0, first.clone()).await.0, 0);
    assert_eq!(
        raw.produce(TABLE, 0, first.clone()).await.0,
        0,
        "a duplicate is answered as success"
    );
    let gap = raw
        .produce(TABLE, 0, batch(pid, 0, 5, &[br#"{"id":5}"#]))
        .await;
    assert_eq!(gap.0, 45, "OUT_OF_ORDER_SEQUENCE_NUMBER: {gap:?}");
    let gap_message = gap.1.clone();
    assert!(gap.1.expect("message").contains("expected sequence 3"));
    let invalid = raw
        .produce(
            TABLE,
            0,
            batch(pid, 0, 3, &[br#"{"id":3}"#, br#"{"id":"x"}"#]),
        )
        .await;
    assert_eq!(invalid.0, 87, "INVALID_RECORD: {invalid:?}");
    let invalid_message = invalid.1.expect("message");
    assert!(
        invalid_message.starts_with("record 1: ") && invalid_message.contains("`id`"),
        "{invalid_message}"
    );
    assert_eq!(invalid.2, vec![1]);
    let not_json = raw
        .produce(TABLE, 0, batch(-1, -1, -1, &[b"not json"]))
        .await;
    assert_eq!(not_json.0, 87, "{not_json:?}");
    assert!(not_json.1.expect("message").starts_with("record 0: "));
    let big = format!(r#"{{"id":9,"note":"{}"}}"#, "x".repeat(2000));
    let too_large = raw
        .produce(TABLE, 0, batch(-1, -1, -1, &[big.as_bytes()]))
        .await;
    assert_eq!(too_large.0, 10, "MESSAGE_TOO_LARGE: {too_large:?}");
    assert_eq!(
        raw.produce(TABLE, 1, batch(-1, -1, -1, &[br#"{"id":9}"#]))
            .await
            .0,
        3
    );
    assert_eq!(
        raw.produce("main.kafka.nope", 0, batch(-1, -1, -1, &[br#"{"id":9}"#]))
            .await
            .0,
        3
    );

    // The pod dies; after its replay the same batch is still a duplicate, the next is written.
    server.kill();
    server.restart().await;
    let mut raw = Raw::connect(kport).await;
    assert_eq!(raw.authenticate(CLIENT_SECRET).await.error_code, 0);
    assert_eq!(
        raw.produce(TABLE, 0, first).await.0,
        0,
        "duplicate after the restart"
    );
    assert_eq!(
        raw.produce(TABLE, 0, batch(pid, 0, 3, &[br#"{"id":3}"#]))
            .await
            .0,
        0
    );
    // An epoch bump fences the older epoch.
    let bumped: InitProducerIdResponse = raw
        .call(
            ApiKey::InitProducerId,
            4,
            &InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(0),
        )
        .await
        .expect("bump");
    assert_eq!((bumped.producer_id.0, bumped.producer_epoch), (pid, 1));
    let fenced = raw
        .produce(TABLE, 0, batch(pid, 0, 4, &[br#"{"id":4}"#]))
        .await;
    assert_eq!(fenced.0, 47, "INVALID_PRODUCER_EPOCH: {fenced:?}");
    assert_eq!(
        raw.produce(TABLE, 0, batch(pid, 1, 0, &[br#"{"id":4}"#]))
            .await
            .0,
        0
    );
    server.terminate();
    for (what, message) in [
        ("bad secret", Some(message.clone())),
        ("sequence gap", gap_message.clone()),
        ("invalid record", Some(invalid_message.clone())),
        ("too large", too_large.1.clone()),
        ("fenced", fenced.1.clone()),
    ] {
        eprintln!("| {what} | {} |", message.unwrap_or_default());
    }

    assert_eq!(
        sorted_ids(&location).await,
        vec![0, 1, 2, 3, 4],
        "each accepted record once, nothing refused"
    );
}

/// The `id` column of the Delta table at `location`, sorted.
async fn sorted_ids(location: &str) -> Vec<i64> {
    let mut ids: Vec<i64> = read_delta(location)
        .await
        .iter()
        .flat_map(|b| {
            let col = b
                .column_by_name("id")
                .expect("id")
                .as_any()
                .downcast_ref::<arrow_array::Int64Array>()
                .expect("bigint")
                .clone();
            col.values().to_vec()
        })
        .collect();
    ids.sort();
    ids
}

/// The `sluice_refusals_total` series of one scrape, by code.
fn refusals(text: &str) -> std::collections::BTreeMap<String, f64> {
    text.lines()
        .filter_map(|l| l.strip_prefix("sluice_refusals_total{code=\""))
        .filter_map(|l| {
            let (code, rest) = l.split_once("\"}")?;
            Some((code.to_string(), rest.trim().parse().ok()?))
        })
        .collect()
}

/// The value of the series `name` (with its labels) in `text`; 0 when absent.
fn series(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_refusals_no_client_sends_are_answered_and_counted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kport = free_port();
    let listen = format!("127.0.0.1:{kport}");
    let mut server =
        Server::start_with_args(dir.path(), "200ms", &["--kafka-listen", &listen]).await;
    let location = server
        .create_table_at(TABLE, "id BIGINT NOT NULL, note STRING")
        .await;
    let bob = crate::auth::create_principal(&server, "bob");
    let before = server.metrics_text().await;

    let mut raw = Raw::connect(kport).await;
    assert_eq!(raw.authenticate(CLIENT_SECRET).await.error_code, 0);
    // A batch whose bytes changed after its CRC was computed: CORRUPT_MESSAGE (2).
    let good = batch(-1, -1, -1, &[br#"{"id":1}"#]);
    let mut flipped = BytesMut::from(&good[..]);
    let last = flipped.len() - 2;
    flipped[last] ^= 0x01;
    let corrupt = raw.produce(TABLE, 0, flipped.freeze()).await;
    assert_eq!(corrupt.0, 2, "CORRUPT_MESSAGE: {corrupt:?}");
    assert!(
        corrupt.1.as_deref().unwrap_or("").contains("record batch"),
        "{corrupt:?}"
    );
    // Two batches in one partition: CORRUPT_MESSAGE (2).
    let mut two = BytesMut::from(&good[..]);
    two.extend_from_slice(&good);
    let twice = raw.produce(TABLE, 0, two.freeze()).await;
    assert_eq!(twice.0, 2, "CORRUPT_MESSAGE: {twice:?}");
    assert!(
        twice
            .1
            .as_deref()
            .unwrap_or("")
            .contains("exactly one record batch"),
        "{twice:?}"
    );
    // acks=2: INVALID_REQUIRED_ACKS (21), nothing written.
    let acks = raw.produce_acks(2, TABLE, 0, good.clone()).await;
    assert_eq!(acks.0, 21, "INVALID_REQUIRED_ACKS: {acks:?}");
    // A transactional batch, and an InitProducerId with a transactional id:
    // INVALID_REQUEST (42).
    let tx = raw
        .produce(TABLE, 0, batch_of(5, 0, 0, true, &[br#"{"id":2}"#]))
        .await;
    assert_eq!(tx.0, 42, "INVALID_REQUEST: {tx:?}");
    assert!(
        tx.1.as_deref().unwrap_or("").contains("transactional"),
        "{tx:?}"
    );
    let init: InitProducerIdResponse = raw
        .call(
            ApiKey::InitProducerId,
            4,
            &InitProducerIdRequest::default()
                .with_transactional_id(Some(StrBytes::from_static_str("tx-1").into()))
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        )
        .await
        .expect("init answered");
    assert_eq!((init.error_code, init.producer_id.0), (42, -1));
    // Accepted: two records (two batches: the crate's encoder starts a new batch at each
    // record without a sequence).
    for id in [3, 4] {
        let value = format!(r#"{{"id":{id}}}"#);
        let ok = raw
            .produce(TABLE, 0, batch(-1, -1, -1, &[value.as_bytes()]))
            .await;
        assert_eq!(ok.0, 0, "{ok:?}");
    }
    // A principal without MODIFY on the table: TOPIC_AUTHORIZATION_FAILED (29).
    let mut as_bob = Raw::connect(kport).await;
    assert_eq!(as_bob.authenticate_as("bob", &bob).await.error_code, 0);
    let denied = as_bob.produce(TABLE, 0, good.clone()).await;
    assert_eq!(denied.0, 29, "TOPIC_AUTHORIZATION_FAILED: {denied:?}");
    assert!(
        denied
            .1
            .as_deref()
            .unwrap_or("")
            .contains("principal `bob` holds no MODIFY on table `main.kafka.raw`"),
        "{denied:?}"
    );
    // A wrong secret: SASL_AUTHENTICATION_FAILED, counted as Unauthenticated.
    let mut wrong = Raw::connect(kport).await;
    assert_eq!(wrong.authenticate("wrong-secret").await.error_code, 58);
    // A frame announcing more than --max-request-bytes + 64 KiB: closed before it is read.
    let mut huge = Raw::connect(kport).await;
    assert_eq!(huge.authenticate(CLIENT_SECRET).await.error_code, 0);
    huge.stream
        .write_all(&i32::MAX.to_be_bytes())
        .await
        .expect("size sent");
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(Duration::from_secs(30), huge.stream.read(&mut byte))
        .await
        .expect("closed in time");
    assert_eq!(read.unwrap_or(0), 0, "closed without an answer");

    let after = server.metrics_text().await;
    let (b, a) = (refusals(&before), refusals(&after));
    let delta =
        |code: &str| a.get(code).copied().unwrap_or(0.0) - b.get(code).copied().unwrap_or(0.0);
    for (code, n) in [
        ("InvalidArgument", 3.0),
        ("Unimplemented", 2.0),
        ("PermissionDenied", 1.0),
        ("Unauthenticated", 1.0),
        ("ResourceExhausted", 1.0),
    ] {
        assert_eq!(
            delta(code),
            n,
            "sluice_refusals_total{{code={code:?}}}: {b:?} -> {a:?}"
        );
    }
    let counted: f64 = a.values().sum::<f64>() - b.values().sum::<f64>();
    assert_eq!(counted, 8.0, "no other refusal counted: {b:?} -> {a:?}");
    assert_eq!(series(&after, "sluice_kafka_records_total"), 2.0);
    assert_eq!(
        series(
            &after,
            &format!("sluice_table_records_total{{table=\"{TABLE}\"}}")
        ),
        2.0
    );
    for (what, answer) in [
        ("corrupt", &corrupt),
        ("two batches", &twice),
        ("acks=2", &acks),
        ("transactional", &tx),
        ("no MODIFY", &denied),
    ] {
        eprintln!(
            "| {what} | {} | {} |",
            answer.0,
            answer.1.clone().unwrap_or_default()
        );
    }
    server.terminate();
    assert_eq!(
        sorted_ids(&location).await,
        vec![3, 4],
        "nothing refused was written"
    );
}
