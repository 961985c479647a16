//! Property: for random descriptors with nested messages, repeated scalars (packed and
//! unpacked), repeated messages and maps (scalar and message values) up to three levels
//! deep, and the table schema that mirrors them, random prost-reflect messages decode in the
//! single pass (no record takes the value tree) into exactly the values prost-reflect holds,
//! and a record that fails after all its nested fields were written leaves the batch as it
//! was (the rows around it are intact). Rollback, byte for byte: random records spoiled
//! (cut, a byte overwritten, a bad field after them) leave every buffer of the batch (offsets
//! at every level, validity, values) as a builder that never saw them has it. The same schemas with random JSON records (members
//! absent, `null`, repeated; null elements and map values; repeated map keys) decode
//! straight into the columns to exactly what the value-tree decode of a builder with the
//! `_rescued_data` column gives.

use proptest::prelude::*;
use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage, Kind, MapKey, MessageDescriptor, Value};
use prost_types::field_descriptor_proto::Type;
use prost_types::{DescriptorProto, FileDescriptorProto, FileDescriptorSet};
use serde_json::Value as Json;
use sluice_zeroparser::{
    ColumnType, ProtoPlan, RecordBatchBuilder, TableSchema, RESCUED_DATA_COLUMN,
};

use crate::prost_reflect_roundtrip::{expected_field, sort_pairs};
use crate::support::{
    array_cell, map_entry, message, packed, repeated, rows, scalar, typed, typed_repeated,
};

/// Scalar field types and the column type each fills.
const SCALARS: &[(Type, &str)] = &[
    (Type::Double, "DOUBLE"),
    (Type::Float, "FLOAT"),
    (Type::Int64, "BIGINT"),
    (Type::Int32, "INT"),
    (Type::Sint64, "BIGINT"),
    (Type::Sint32, "INT"),
    (Type::Uint32, "BIGINT"),
    (Type::Fixed32, "BIGINT"),
    (Type::Sfixed64, "TIMESTAMP"),
    (Type::Sfixed32, "DATE"),
    (Type::Bool, "BOOLEAN"),
    (Type::String, "STRING"),
    (Type::Bytes, "BINARY"),
];

/// Map key types and their column types.
const KEYS: &[(Type, &str)] = &[
    (Type::String, "STRING"),
    (Type::Int32, "INT"),
    (Type::Int64, "BIGINT"),
    (Type::Bool, "BOOLEAN"),
];

/// The shape of one field.
#[derive(Debug, Clone)]
enum Shape {
    Scalar(usize),
    Repeated { scalar: usize, packed: bool },
    Message(Vec<Shape>),
    RepeatedMessage(Vec<Shape>),
    ScalarMap { key: usize, value: usize },
    MessageMap { key: usize, value: Vec<Shape> },
}

fn shapes() -> impl Strategy<Value = Vec<Shape>> {
    let leaf = prop_oneof![
        (0..SCALARS.len()).prop_map(Shape::Scalar),
        (0..SCALARS.len(), any::<bool>())
            .prop_map(|(scalar, packed)| Shape::Repeated { scalar, packed }),
        (0..KEYS.len(), 0..SCALARS.len()).prop_map(|(key, value)| Shape::ScalarMap { key, value }),
    ];
    let field = leaf.prop_recursive(3, 32, 4, |inner| {
        let fields = prop::collection::vec(inner, 1..4);
        prop_oneof![
            fields.clone().prop_map(Shape::Message),
            fields.clone().prop_map(Shape::RepeatedMessage),
            (0..KEYS.len(), fields).prop_map(|(key, value)| Shape::MessageMap { key, value }),
        ]
    });
    prop::collection::vec(field, 1..6)
}

/// The STRUCT type text of `columns` (name, type text).
fn struct_text(columns: &[(String, String)]) -> String {
    let fields: Vec<String> = columns.iter().map(|(n, t)| format!("{n}: {t}")).collect();
    format!("STRUCT<{}>", fields.join(", "))
}

/// The message `name` (full name `full`) of `fields`, and its columns (name, type text).
fn build_message(
    name: &str,
    full: &str,
    fields: &[Shape],
) -> (DescriptorProto, Vec<(String, String)>) {
    let mut descriptor = message(name, Vec::new());
    let mut columns = Vec::new();
    for (i, shape) in fields.iter().enumerate() {
        let field = format!("f{i}");
        let number = i32::try_from(i + 1).expect("few fields");
        let (proto, column) = match shape {
            Shape::Scalar(s) => (scalar(&field, number, SCALARS[*s].0), SCALARS[*s].1.into()),
            Shape::Repeated {
                scalar: s,
                packed: p,
            } => {
                let proto = repeated(&field, number, SCALARS[*s].0);
                let packable = !matches!(SCALARS[*s].0, Type::String | Type::Bytes);
                let proto = if *p && packable { packed(proto) } else { proto };
                (proto, format!("ARRAY<{}>", SCALARS[*s].1))
            }
            Shape::Message(inner) | Shape::RepeatedMessage(inner) => {
                let type_name = format!("F{i}");
                let (nested, inner_columns) =
                    build_message(&type_name, &format!("{full}.{type_name}"), inner);
                let text = struct_text(&inner_columns);
                descriptor.nested_type.push(nested);
                let reference = format!(".{full}.{type_name}");
                if matches!(shape, Shape::Message(_)) {
                    (typed(&field, number, Type::Message, &reference), text)
                } else {
                    let proto = typed_repeated(&field, number, Type::Message, &reference);
                    (proto, format!("ARRAY<{text}>"))
                }
            }
            Shape::ScalarMap { key, value } => {
                let entry = format!("F{i}Entry");
                descriptor.nested_type.push(map_entry(
                    &entry,
                    scalar("key", 1, KEYS[*key].0),
                    scalar("value", 2, SCALARS[*value].0),
                ));
                let reference = format!(".{full}.{entry}");
                (
                    typed_repeated(&field, number, Type::Message, &reference),
                    format!("MAP<{}, {}>", KEYS[*key].1, SCALARS[*value].1),
                )
            }
            Shape::MessageMap { key, value } => {
                let type_name = format!("V{i}");
                let (nested, value_columns) =
                    build_message(&type_name, &format!("{full}.{type_name}"), value);
                let text = struct_text(&value_columns);
                descriptor.nested_type.push(nested);
                let entry = format!("F{i}Entry");
                descriptor.nested_type.push(map_entry(
                    &entry,
                    scalar("key", 1, KEYS[*key].0),
                    typed("value", 2, Type::Message, &format!(".{full}.{type_name}")),
                ));
                let reference = format!(".{full}.{entry}");
                (
                    typed_repeated(&field, number, Type::Message, &reference),
                    format!("MAP<{}, {text}>", KEYS[*key].1),
                )
            }
        };
        descriptor.field.push(proto);
        columns.push((field, column));
    }
    (descriptor, columns)
}

/// A small deterministic generator (SplitMix64) for the message values.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn text(&mut self) -> String {
        const ALPHABET: &[&str] = &["a", "b", "z", "é", "日", " ", "0"];
        (0..self.below(6))
            .map(|_| ALPHABET[self.below(ALPHABET.len() as u64) as usize])
            .collect()
    }
}

fn random_value(rng: &mut Rng, kind: &Kind) -> Value {
    match kind {
        Kind::Double => Value::F64(f64::from_bits(rng.next())),
        Kind::Float => Value::F32(f32::from_bits(rng.next() as u32)),
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => {
            Value::I64(rng.next() as i64 >> rng.below(64))
        }
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => {
            Value::I32(rng.next() as i32 >> rng.below(32))
        }
        Kind::Uint32 | Kind::Fixed32 => Value::U32(rng.next() as u32 >> rng.below(32)),
        Kind::Bool => Value::Bool(rng.below(2) == 1),
        Kind::String => Value::String(rng.text()),
        Kind::Bytes => Value::Bytes(rng.text().into_bytes().into()),
        Kind::Message(descriptor) => Value::Message(random_message(rng, descriptor)),
        other => panic!("no such field in these descriptors: {other:?}"),
    }
}

fn random_key(rng: &mut Rng, kind: &Kind) -> MapKey {
    match random_value(rng, kind) {
        Value::String(s) => MapKey::String(s),
        Value::I32(i) => MapKey::I32(i),
        Value::I64(i) => MapKey::I64(i),
        Value::Bool(b) => MapKey::Bool(b),
        other => panic!("not a key: {other:?}"),
    }
}

/// A message with a random subset of its fields set, lists and maps of 0 to 3 items.
fn random_message(rng: &mut Rng, descriptor: &MessageDescriptor) -> DynamicMessage {
    let mut message = DynamicMessage::new(descriptor.clone());
    for field in descriptor.fields() {
        if rng.below(4) == 0 {
            continue;
        }
        let count = rng.below(4);
        let value = if field.is_map() {
            let entry = field.kind();
            let entry = entry.as_message().expect("map entry");
            let (key, value) = (entry.map_entry_key_field(), entry.map_entry_value_field());
            Value::Map(
                (0..count)
                    .map(|_| {
                        (
                            random_key(rng, &key.kind()),
                            random_value(rng, &value.kind()),
                        )
                    })
                    .collect(),
            )
        } else if field.is_list() {
            Value::List(
                (0..count)
                    .map(|_| random_value(rng, &field.kind()))
                    .collect(),
            )
        } else {
            random_value(rng, &field.kind())
        };
        message.set_field(&field, value);
    }
    message
}

/// Sorts the pairs of every map in `value` (a cell of `column_type`), as `expected_field`
/// does.
fn normalize(value: &mut Json, column_type: &ColumnType) {
    match (column_type, value) {
        (ColumnType::Map { value: item, .. }, Json::Array(pairs)) => {
            for pair in pairs.iter_mut() {
                if let Some(v) = pair.get_mut(1) {
                    normalize(v, item);
                }
            }
            sort_pairs(pairs);
        }
        (ColumnType::Array { element, .. }, Json::Array(items)) => {
            for item in items {
                normalize(item, element);
            }
        }
        (ColumnType::Struct(columns), Json::Object(fields)) => {
            for column in columns {
                if let Some(v) = fields.get_mut(&column.name) {
                    normalize(v, &column.data_type);
                }
            }
        }
        _ => {}
    }
}

/// A random JSON text for a value of `column_type`: `null` sometimes, objects with members
/// left out or repeated, map keys repeated.
fn random_json(rng: &mut Rng, column_type: &ColumnType) -> String {
    if rng.below(8) == 0 {
        return "null".into();
    }
    let quote = |text: String| Json::String(text).to_string();
    match column_type {
        ColumnType::BigInt | ColumnType::Timestamp => {
            (rng.next() as i64 >> rng.below(64)).to_string()
        }
        ColumnType::Int | ColumnType::Date => (rng.next() as i32 >> rng.below(32)).to_string(),
        ColumnType::Double => format!("{:.3}", (rng.next() % 100_000) as f64 / 7.0),
        ColumnType::Float => format!("{}", (rng.next() % 1000) as f32 / 4.0),
        ColumnType::Boolean => (rng.below(2) == 1).to_string(),
        ColumnType::String => quote(rng.text()),
        ColumnType::Binary => quote("YWJj".repeat(rng.below(3) as usize)),
        ColumnType::Array { element, .. } => {
            let items: Vec<String> = (0..rng.below(4))
                .map(|_| random_json(rng, element))
                .collect();
            format!("[{}]", items.join(","))
        }
        ColumnType::Map { key, value, .. } => {
            let entries: Vec<String> = (0..rng.below(4))
                .map(|_| {
                    let k = match key.as_ref() {
                        ColumnType::Boolean => (rng.below(2) == 1).to_string(),
                        ColumnType::String => rng.text(),
                        _ => (rng.below(3) as i64 - 1).to_string(),
                    };
                    format!("{}:{}", quote(k), random_json(rng, value))
                })
                .collect();
            format!("{{{}}}", entries.join(","))
        }
        ColumnType::Struct(columns) => random_object(rng, columns),
        other => panic!("no such column in these schemas: {other:?}"),
    }
}

fn random_object(rng: &mut Rng, columns: &[sluice_zeroparser::Column]) -> String {
    let mut members = Vec::new();
    for column in columns {
        for _ in 0..[0, 1, 1, 1, 2][rng.below(5) as usize] {
            members.push(format!(
                "{}:{}",
                Json::String(column.name.clone()),
                random_json(rng, &column.data_type)
            ));
        }
    }
    format!("{{{}}}", members.join(","))
}

/// The rows of `batch` without the `_rescued_data` column.
fn rows_without_rescue(batch: &arrow_array::RecordBatch) -> Vec<Json> {
    let mut out = rows(batch);
    for row in &mut out {
        if let Some(object) = row.as_object_mut() {
            object.remove(RESCUED_DATA_COLUMN);
        }
    }
    out
}

/// The descriptor of `fields`, its table schema (and its text), the prost-reflect
/// descriptor and the compiled plan.
fn compiled(fields: &[Shape]) -> (String, TableSchema, MessageDescriptor, ProtoPlan) {
    let (root, columns) = build_message("Root", "rnd.Root", fields);
    let columns: Vec<String> = columns.iter().map(|(n, t)| format!("{n} {t}")).collect();
    let columns = columns.join(", ");
    let schema = TableSchema::parse(&columns).expect("schema parses");
    let file = FileDescriptorProto {
        name: Some("rnd.proto".into()),
        package: Some("rnd".into()),
        syntax: Some("proto2".into()),
        message_type: vec![root.clone()],
        ..Default::default()
    };
    let pool = DescriptorPool::from_file_descriptor_set(FileDescriptorSet { file: vec![file] })
        .expect("prost-reflect accepts the file");
    let descriptor = pool.get_message_by_name("rnd.Root").expect("Root");
    let plan = ProtoPlan::compile(&root.encode_to_vec(), &schema).expect("plan compiles");
    (columns, schema, descriptor, plan)
}

/// How a valid record is spoiled.
#[derive(Debug, Clone)]
enum Spoil {
    /// Cut at a position and end with field 1 announcing more bytes than follow (fails
    /// unless the cut leaves half a tag that the two bytes complete into an unknown field).
    Cut(prop::sample::Index),
    /// One byte at a position overwritten (may still decode).
    Overwrite(prop::sample::Index, u8),
    /// The whole record, then the bad field 1 (always fails: field 1 arrives with the wrong
    /// wire type or as a truncated LEN): every field is written before it fails.
    Trail,
}

fn spoil() -> impl Strategy<Value = Spoil> {
    prop_oneof![
        any::<prop::sample::Index>().prop_map(Spoil::Cut),
        (any::<prop::sample::Index>(), any::<u8>()).prop_map(|(i, b)| Spoil::Overwrite(i, b)),
        Just(Spoil::Trail),
    ]
}

fn spoiled(record: &[u8], how: &Spoil) -> Vec<u8> {
    const BAD_FIELD_1: [u8; 2] = [0x0A, 0x7F];
    match how {
        Spoil::Cut(at) => {
            let mut bytes = record[..at.index(record.len() + 1)].to_vec();
            bytes.extend_from_slice(&BAD_FIELD_1);
            bytes
        }
        Spoil::Overwrite(at, byte) if !record.is_empty() => {
            let mut bytes = record.to_vec();
            bytes[at.index(record.len())] = *byte;
            bytes
        }
        Spoil::Overwrite(..) | Spoil::Trail => [record, &BAD_FIELD_1[..]].concat(),
    }
}

/// Every buffer of `array` and its children, byte for byte (validity bit by bit over the
/// array's length), with its type and length: two arrays built alike compare equal.
fn physical(array: &arrow_data::ArrayData, out: &mut Vec<String>) {
    out.push(format!(
        "{:?} len {} offset {}",
        array.data_type(),
        array.len(),
        array.offset()
    ));
    if let Some(nulls) = array.nulls() {
        out.push(format!("valid {:?}", nulls.iter().collect::<Vec<bool>>()));
    }
    for buffer in array.buffers() {
        out.push(format!("buffer {:?}", buffer.as_slice()));
    }
    for child in array.child_data() {
        physical(child, out);
    }
}

fn physical_batch(batch: &arrow_array::RecordBatch) -> Vec<String> {
    let mut out = Vec::new();
    for column in batch.columns() {
        physical(&column.to_data(), &mut out);
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Rollback: a builder that is handed spoiled copies of random records between the
    /// valid ones ends with exactly the buffers (offsets of every level, validity, values)
    /// of a builder that only saw the records it accepted.
    #[test]
    fn failing_records_leave_the_builder_identical(
        fields in shapes(),
        seed in any::<u64>(),
        spoils in prop::collection::vec(spoil(), 1..6),
    ) {
        let (columns, schema, descriptor, plan) = compiled(&fields);
        let mut rng = Rng(seed);
        let mut tried = RecordBatchBuilder::new(&schema);
        let mut clean = RecordBatchBuilder::new(&schema);
        let mut refused = 0;
        for how in &spoils {
            let record = random_message(&mut rng, &descriptor).encode_to_vec();
            tried.append_proto(&plan, &record).expect("record decodes");
            clean.append_proto(&plan, &record).expect("record decodes");
            let bad = spoiled(&record, how);
            match tried.append_proto(&plan, &bad) {
                Ok(()) => clean.append_proto(&plan, &bad).expect("same verdict on the same rows"),
                Err(_) => refused += 1,
            }
        }
        prop_assert!(refused >= spoils.iter().filter(|s| matches!(s, Spoil::Trail)).count());
        prop_assert_eq!(tried.len(), clean.len());
        prop_assert_eq!(physical_batch(&tried.finish()), physical_batch(&clean.finish()), "{}", columns);
    }

    /// `clear`: a builder that held random records (nested, repeated, maps), was cleared
    /// and then took more ends with exactly the buffers of a builder that only took the
    /// later records — with and without the rescued-data column.
    #[test]
    fn a_cleared_builder_is_as_a_fresh_one(
        fields in shapes(),
        seed in any::<u64>(),
        before in 1usize..5,
        after in 0usize..4,
        rescuing in any::<bool>(),
    ) {
        let (columns, schema, descriptor, plan) = compiled(&fields);
        let make = || if rescuing {
            RecordBatchBuilder::with_rescued_data(&schema).expect("rescuable")
        } else {
            RecordBatchBuilder::new(&schema)
        };
        let mut rng = Rng(seed);
        let (mut cleared, mut fresh) = (make(), make());
        for _ in 0..before {
            let record = random_message(&mut rng, &descriptor).encode_to_vec();
            cleared.append_proto(&plan, &record).expect("record decodes");
        }
        cleared.clear();
        prop_assert_eq!(cleared.len(), 0);
        for _ in 0..after {
            let record = random_message(&mut rng, &descriptor).encode_to_vec();
            cleared.append_proto(&plan, &record).expect("record decodes");
            fresh.append_proto(&plan, &record).expect("record decodes");
        }
        prop_assert_eq!(physical_batch(&cleared.finish()), physical_batch(&fresh.finish()), "{}", columns);
    }

    #[test]
    fn random_nested_descriptors_decode_in_one_pass_to_prost_reflects_values(
        fields in shapes(),
        seed in any::<u64>(),
    ) {
        let (columns, schema, descriptor, plan) = compiled(&fields);
        let mut rng = Rng(seed);
        let messages: Vec<DynamicMessage> =
            (0..3).map(|_| random_message(&mut rng, &descriptor)).collect();
        let mut builder = RecordBatchBuilder::new(&schema);
        for message in &messages {
            let record = message.encode_to_vec();
            builder.append_proto(&plan, &record).expect("record decodes");
            // The same record with a truncated field 1 at its end: every nested field is
            // written before it fails.
            let mut broken = record.clone();
            broken.extend_from_slice(&[0x0A, 0x05]);
            prop_assert!(builder.append_proto(&plan, &broken).is_err());
        }
        // Tables of scalars only take the flat path, which has no value tree.
        let nested = fields.iter().any(|f| !matches!(f, Shape::Scalar(_)));
        let via_tree = if nested { 3 } else { 0 };
        prop_assert_eq!(builder.proto_records_via_value_tree(), via_tree, "only the broken records");
        let batch = builder.finish();
        prop_assert_eq!(batch.num_rows(), 3);
        for (row, message) in messages.iter().enumerate() {
            for column in &schema.columns {
                let field = descriptor.get_field_by_name(&column.name).expect("field");
                let expected = expected_field(message, &field, &column.data_type);
                let array = batch.column_by_name(&column.name).expect("column");
                let mut actual = array_cell(array.as_ref(), row);
                normalize(&mut actual, &column.data_type);
                prop_assert_eq!(&actual, &expected, "column {} row {} of {}", column.name, row, columns);
            }
        }
    }

    #[test]
    fn random_json_records_decode_in_one_pass_like_the_value_tree(
        fields in shapes(),
        seed in any::<u64>(),
    ) {
        let (_, columns) = build_message("Root", "rnd.Root", &fields);
        let columns: Vec<String> = columns.iter().map(|(n, t)| format!("{n} {t}")).collect();
        let schema = TableSchema::parse(&columns.join(", ")).expect("schema parses");
        let mut rng = Rng(seed);
        let mut direct = RecordBatchBuilder::new(&schema);
        let mut tree = RecordBatchBuilder::with_rescued_data(&schema).expect("rescuable");
        for _ in 0..4 {
            let record = random_object(&mut rng, &schema.columns);
            let ours = direct.append_json(&record);
            let theirs = tree.append_json(&record);
            prop_assert_eq!(&ours, &theirs, "verdicts differ for {}", record);
            // A broken copy: every member is written before the syntax error at its end.
            let broken = format!("{},", record.trim_end_matches('}'));
            prop_assert!(direct.append_json(&broken).is_err());
        }
        prop_assert_eq!(rows(&direct.finish()), rows_without_rescue(&tree.finish()));
    }
}
