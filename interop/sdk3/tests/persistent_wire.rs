//! What the official Rust SDK 3.0.0 sends on a `PersistentStream` (feature `eos`), watched
//! through the recording endpoint (decoded with Sluice's own `sluice-proto` types): the
//! opening message of a create and of a resume, the offsets records carry, and which records
//! it sends again when a connection drops and it resumes by itself. These are the facts the
//! server side of issue 20 must serve.

use databricks_zerobus_ingest_sdk::{JsonString, PersistentStreamBuilder, ZerobusSdk};
use sluice_interop_sdk3::recorder::{Connection, Fault, Recorder, Script};
use sluice_interop_sdk3::sluice::sdk_at;
use sluice_proto::persistent_stream_request::Payload as In;
use sluice_proto::resume_ingest_stream_request::Identifier;
use sluice_proto::{ingest_record_request, RecordType};

const TABLE: &str = "main.wire.persistent";
const MINTED: &str = "minted-by-recorder";

fn script(resume_watermark: Option<i64>, first_connection_fault: Option<Fault>) -> Script {
    Script {
        minted_stream_id: MINTED.to_string(),
        resume_watermark,
        first_connection_fault,
    }
}

fn builder(sdk: &ZerobusSdk) -> PersistentStreamBuilder<'_> {
    sdk.persistent_stream_builder()
        .table(TABLE)
        .no_auth()
        .json()
        .recovery_backoff_ms(50)
}

fn record(id: i64) -> JsonString {
    JsonString(format!("{{\"id\":{id}}}"))
}

fn first_payload(connection: &Connection) -> &In {
    connection
        .requests
        .first()
        .and_then(|r| r.payload.as_ref())
        .expect("an opening message")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_new_persistent_stream_then_sdk3_opens_with_create_and_numbers_records_from_0() {
    let recorder = Recorder::start(script(None, None)).await.expect("recorder");
    let sdk = sdk_at(&recorder.url).expect("sdk");
    let mut stream = builder(&sdk).build().await.expect("create");
    assert_eq!(stream.stream_id(), Some(MINTED), "the id the server minted");
    assert_eq!(stream.resume_watermark(), None);
    for id in 0..5 {
        assert_eq!(
            stream
                .ingest_record_offset(record(id))
                .await
                .expect("ingest"),
            id
        );
    }
    stream.flush().await.expect("acked");
    stream.close().await.expect("close");

    let connections = recorder.connections();
    assert_eq!(connections.len(), 1);
    let conn = &connections[0];
    // The table header comes from the SDK's headers provider (the OAuth one adds it);
    // `no_auth()` sends none, so with `--auth none` the table is only in the create message.
    assert_eq!(conn.table_header, None);
    let In::CreateStream(create) = first_payload(conn) else {
        panic!("first message is not create_stream: {:?}", conn.requests[0]);
    };
    let inner = create
        .create_stream
        .as_ref()
        .expect("wrapped CreateIngestStreamRequest");
    assert_eq!(inner.table_name.as_deref(), Some(TABLE));
    assert_eq!(inner.record_type(), RecordType::Json);
    assert_eq!(inner.descriptor_proto, None);
    assert_eq!(conn.ingest_offsets(), vec![0, 1, 2, 3, 4]);
    let Some(In::IngestRecord(rec)) = &conn.requests[1].payload else {
        panic!("records go as ingest_record: {:?}", conn.requests[1]);
    };
    assert_eq!(
        rec.record,
        Some(ingest_record_request::Record::JsonRecord(
            "{\"id\":0}".to_string()
        ))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_stream_id_then_sdk3_opens_with_resume_and_continues_past_the_watermark() {
    let recorder = Recorder::start(script(Some(41), None))
        .await
        .expect("recorder");
    let sdk = sdk_at(&recorder.url).expect("sdk");
    let mut stream = builder(&sdk).resume("stream-7").await.expect("resume");
    assert_eq!(stream.resume_watermark(), Some(41));
    assert_eq!(
        stream.stream_id(),
        Some("stream-7"),
        "the resumed id (the resume answer carries none)"
    );
    assert_eq!(
        stream
            .ingest_record_offset(record(42))
            .await
            .expect("ingest"),
        42
    );
    stream.flush().await.expect("acked");
    stream.close().await.expect("close");

    let connections = recorder.connections();
    assert_eq!(connections.len(), 1);
    let conn = &connections[0];
    assert_eq!(conn.table_header, None, "no_auth(): no table header");
    let In::ResumeStream(resume) = first_payload(conn) else {
        panic!("first message is not resume_stream: {:?}", conn.requests[0]);
    };
    assert_eq!(
        resume.identifier,
        Some(Identifier::StreamId("stream-7".to_string()))
    );
    assert_eq!(resume.record_type(), RecordType::Json);
    assert_eq!(resume.descriptor_proto, None);
    assert_eq!(
        conn.ingest_offsets(),
        vec![42],
        "continues at watermark + 1"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_dropped_connection_then_sdk3_resumes_its_id_and_resends_only_above_the_watermark()
{
    // First connection: 0..=3 acked, the connection ends when 7 arrives. The resume answer
    // says 5 was committed, so 4 and 5 are settled by the watermark, 6.. must come again.
    let fault = Fault {
        ack_up_to: 3,
        drop_at: 7,
    };
    let recorder = Recorder::start(script(Some(5), Some(fault)))
        .await
        .expect("recorder");
    let sdk = sdk_at(&recorder.url).expect("sdk");
    let mut stream = builder(&sdk).build().await.expect("create");
    for id in 0..10 {
        assert_eq!(
            stream
                .ingest_record_offset(record(id))
                .await
                .expect("ingest"),
            id
        );
    }
    stream
        .flush()
        .await
        .expect("every record acked after the resume");
    stream.close().await.expect("close");

    let connections = recorder.connections();
    assert_eq!(
        connections.len(),
        2,
        "one drop, one resume: {connections:?}"
    );
    assert!(matches!(
        first_payload(&connections[0]),
        In::CreateStream(_)
    ));
    let In::ResumeStream(resume) = first_payload(&connections[1]) else {
        panic!(
            "reconnect does not resume: {:?}",
            connections[1].requests[0]
        );
    };
    assert_eq!(
        resume.identifier,
        Some(Identifier::StreamId(MINTED.to_string())),
        "the reconnect resumes the minted id"
    );
    let first = connections[0].ingest_offsets();
    assert_eq!(
        &first[..8],
        &[0, 1, 2, 3, 4, 5, 6, 7],
        "sent in order until the drop"
    );
    assert_eq!(
        connections[1].ingest_offsets(),
        vec![6, 7, 8, 9],
        "only the records above the watermark come again, same offsets"
    );
}
