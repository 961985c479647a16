//! Callgrind workload of scripts/callgrind-zeroparser.sh: 20 000 records through
//! `RecordBatchBuilder::append_proto` / `append_json` (counted: `run_proto`, `run_json`).
//! Usage: `zp-measure flat|nested|json [rescue]`; `rescue` (feature `rescue`) uses a builder
//! with the `_rescued_data` column.
use prost::Message;
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, FieldDescriptorProto};
use sluice_zeroparser::{ProtoPlan, RecordBatchBuilder, TableSchema};

const N: usize = 20_000;

fn field(name: &str, number: i32, ty: Type, label: Label) -> FieldDescriptorProto {
    FieldDescriptorProto {
        name: Some(name.into()),
        number: Some(number),
        label: Some(label as i32),
        r#type: Some(ty as i32),
        ..Default::default()
    }
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn record(i: u64, with_tags: bool) -> Vec<u8> {
    let mut r = Vec::new();
    r.push(0x08);
    varint(&mut r, 1_000_000 + i); // 1 id int64
    r.push(0x12);
    let name = format!("device-{}", i % 97);
    varint(&mut r, name.len() as u64);
    r.extend_from_slice(name.as_bytes()); // 2 name
    r.push(0x19);
    r.extend_from_slice(&(20.5 + i as f64).to_le_bytes()); // 3 temp double
    r.push(0x20);
    r.push((i % 2) as u8); // 4 ok bool
    r.push(0x28);
    varint(&mut r, i % 1000); // 5 n int32
    r.push(0x48);
    varint(&mut r, 77); // 9 unknown varint
    if with_tags {
        for t in ["a", "bb"] {
            r.push(0x32);
            r.push(t.len() as u8);
            r.extend_from_slice(t.as_bytes());
        }
    } // 6 tags
    r
}

#[inline(never)]
fn run_proto(builder: &mut RecordBatchBuilder, plan: &ProtoPlan, records: &[Vec<u8>]) -> usize {
    let mut rows = 0;
    for (i, r) in records.iter().enumerate() {
        builder.append_proto(plan, r).expect("append");
        if i % 4096 == 4095 {
            rows += builder.finish().num_rows();
        }
    }
    rows + builder.finish().num_rows()
}

#[inline(never)]
fn run_json(builder: &mut RecordBatchBuilder, records: &[String]) -> usize {
    let mut rows = 0;
    for (i, r) in records.iter().enumerate() {
        builder.append_json(r).expect("append");
        if i % 4096 == 4095 {
            rows += builder.finish().num_rows();
        }
    }
    rows + builder.finish().num_rows()
}

fn main() {
    let which = std::env::args().nth(1).unwrap_or_default();
    let rescue = std::env::args().nth(2).as_deref() == Some("rescue");
    let new = |schema: &TableSchema| {
        #[cfg(feature = "rescue")]
        if rescue {
            return RecordBatchBuilder::with_rescued_data(schema).unwrap();
        }
        assert!(!rescue, "built without the rescue feature");
        RecordBatchBuilder::new(schema)
    };
    let flat = "id BIGINT NOT NULL, name STRING, temp DOUBLE, ok BOOLEAN, n INT";
    let mut fields = vec![
        field("id", 1, Type::Int64, Label::Optional),
        field("name", 2, Type::String, Label::Optional),
        field("temp", 3, Type::Double, Label::Optional),
        field("ok", 4, Type::Bool, Label::Optional),
        field("n", 5, Type::Int32, Label::Optional),
    ];
    let rows = match which.as_str() {
        "flat" | "nested" => {
            let nested = which == "nested";
            let columns = if nested {
                format!("{flat}, tags ARRAY<STRING>")
            } else {
                flat.to_string()
            };
            if nested {
                fields.push(field("tags", 6, Type::String, Label::Repeated));
            }
            let schema = TableSchema::parse(&columns).unwrap();
            let d = DescriptorProto {
                name: Some("R".into()),
                field: fields,
                ..Default::default()
            }
            .encode_to_vec();
            let plan = ProtoPlan::compile(&d, &schema).unwrap();
            let records: Vec<_> = (0..N as u64).map(|i| record(i, nested)).collect();
            run_proto(&mut new(&schema), &plan, &records)
        }
        "json" => {
            let schema = TableSchema::parse(&format!("{flat}, tags ARRAY<STRING>")).unwrap();
            let records: Vec<_> = (0..N).map(|i| format!(
                r#"{{"id": {}, "name": "device-{}", "temp": {}.5, "ok": {}, "n": {}, "tags": ["a", "bb"]}}"#,
                1_000_000 + i, i % 97, 20 + i, i % 2 == 0, i % 1000)).collect();
            run_json(&mut new(&schema), &records)
        }
        _ => panic!("usage: zp-measure flat|nested|json"),
    };
    assert_eq!(rows, N);
}
