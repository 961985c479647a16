//! gRPC request decoding and validation: arbitrary bytes as one
//! `EphemeralStreamRequest` (prost, as tonic decodes it), then what the pod
//! does with each payload: a `create_stream` descriptor is compiled against a
//! table schema (an `avro_schema_json` too, with and without rescued data),
//! protobuf records are parsed with a plan compiled from a fixed descriptor,
//! Avro datums with a plan compiled from a fixed writer schema, JSON records
//! with the JSON parser. Nothing may panic.

#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use prost::Message;
use sluice_proto::{
    ephemeral_stream_request::Payload, ingest_record_batch_request::Batch,
    ingest_record_request::Record, EphemeralStreamRequest,
};
use sluice_zeroparser::{AvroPlan, ProtoPlan, RecordBatchBuilder, TableSchema};

const COLUMNS: &str = "id BIGINT NOT NULL, note STRING, temp DOUBLE, ok BOOLEAN, \
     tags ARRAY<STRING>, attrs MAP<STRING, BIGINT>, pos STRUCT<x: INT, y: INT>, ts TIMESTAMP";

const AVRO: &str = r#"{"type":"record","name":"Row","fields":[
    {"name":"id","type":"long"},{"name":"note","type":["null","string"]},
    {"name":"tags","type":["null",{"type":"array","items":"string"}]},
    {"name":"attrs","type":["null",{"type":"map","values":"long"}]},
    {"name":"pos","type":["null",{"type":"record","name":"Pos","fields":[
        {"name":"x","type":"int"},{"name":"y","type":"int"}]}]},
    {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}}]}"#;

struct Fixture {
    schema: TableSchema,
    plan: ProtoPlan,
    avro: AvroPlan,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        use prost_types::field_descriptor_proto::{Label, Type};
        use prost_types::{DescriptorProto, FieldDescriptorProto};
        let schema = TableSchema::parse(COLUMNS).expect("schema");
        let field = |name: &str, number: i32, ty: Type, label: Label| FieldDescriptorProto {
            name: Some(name.into()),
            number: Some(number),
            r#type: Some(ty as i32),
            label: Some(label as i32),
            ..Default::default()
        };
        let descriptor = DescriptorProto {
            name: Some("Row".into()),
            field: vec![
                field("id", 1, Type::Int64, Label::Optional),
                field("note", 2, Type::String, Label::Optional),
                field("temp", 3, Type::Double, Label::Optional),
                field("ok", 4, Type::Bool, Label::Optional),
                field("tags", 5, Type::String, Label::Repeated),
                field("ts", 8, Type::Int64, Label::Optional),
            ],
            ..Default::default()
        }
        .encode_to_vec();
        let plan = ProtoPlan::compile(&descriptor, &schema).expect("plan");
        let avro = AvroPlan::compile(AVRO, &schema, false).expect("avro plan");
        Fixture { schema, plan, avro }
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(request) = EphemeralStreamRequest::decode(data) else {
        return;
    };
    let f = fixture();
    let mut builder = RecordBatchBuilder::new(&f.schema);
    match request.payload {
        Some(Payload::CreateStream(c)) => {
            if let Some(d) = c.descriptor_proto {
                let _ = ProtoPlan::compile(&d, &f.schema);
            }
            if let Some(json) = c.avro_schema_json {
                let _ = AvroPlan::compile(&json, &f.schema, false);
                let _ = AvroPlan::compile(&json, &f.schema, true);
            }
        }
        Some(Payload::IngestRecord(r)) => match r.record {
            Some(Record::ProtoEncodedRecord(b)) => {
                let _ = builder.append_proto(&f.plan, &b);
            }
            Some(Record::JsonRecord(s)) => {
                let _ = builder.append_json(&s);
            }
            Some(Record::AvroEncodedRecord(b)) => {
                let _ = builder.append_avro(&f.avro, &b);
            }
            None => {}
        },
        Some(Payload::IngestRecordBatch(b)) => match b.batch {
            Some(Batch::ProtoEncodedBatch(batch)) => {
                for r in &batch.records {
                    let _ = builder.append_proto(&f.plan, r);
                }
            }
            Some(Batch::JsonBatch(batch)) => {
                for r in &batch.records {
                    let _ = builder.append_json(r);
                }
            }
            Some(Batch::AvroBatch(batch)) => {
                for r in &batch.records {
                    let _ = builder.append_avro(&f.avro, r);
                }
            }
            None => {}
        },
        None => {}
    }
    let _ = builder.finish();
});
