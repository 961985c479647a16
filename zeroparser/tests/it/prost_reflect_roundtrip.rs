//! Property: random messages built with prost-reflect over a descriptor that uses every
//! scalar type, nested messages, repeated fields (packed and not) and maps decode into a
//! batch holding exactly the values prost-reflect holds.

use std::collections::HashMap;

use base64::Engine;
use proptest::prelude::*;
use prost::Message;
use prost_reflect::{
    DescriptorPool, DynamicMessage, FieldDescriptor, Kind, MapKey, MessageDescriptor,
    ReflectMessage, Value,
};
use prost_types::field_descriptor_proto::Type;
use prost_types::{FileDescriptorProto, FileDescriptorSet};
use serde_json::{json, Value as Json};
use sluice_zeroparser::{ColumnType, ProtoPlan, RecordBatchBuilder, TableSchema};

use crate::support::{
    array_cell, enumeration, map_entry, message, packed, repeated, scalar, typed, typed_repeated,
};

const NESTED: &str = "STRUCT<x: BIGINT, label: STRING, inner: STRUCT<flag: BOOLEAN>>";

fn table() -> TableSchema {
    TableSchema::parse(&format!(
        "f_double DOUBLE, f_float FLOAT, f_int64 BIGINT, f_uint64 BIGINT, f_int32 INT, \
         f_fixed64 TIMESTAMP, f_fixed32 BIGINT, f_bool BOOLEAN, f_string STRING, f_bytes BINARY, \
         f_uint32 BIGINT, f_sfixed32 DATE, f_sfixed64 TIMESTAMP_NTZ, f_sint32 INT, f_sint64 BIGINT, \
         f_enum STRING, f_enum_num INT, nested {NESTED}, r_packed ARRAY<INT NOT NULL>, \
         r_unpacked ARRAY<BIGINT>, r_string ARRAY<STRING>, r_double ARRAY<DOUBLE>, \
         r_nested ARRAY<{NESTED}>, m_str MAP<STRING, BIGINT>, m_nested MAP<INT, {NESTED}>, \
         m_bool MAP<BOOLEAN, STRING>, f_tiny TINYINT, f_small SMALLINT, r_enum ARRAY<STRING>, \
         f_variant VARIANT"
    ))
    .expect("table parses")
}

fn file() -> FileDescriptorProto {
    let nested_ref = ".sluice.prop.Root.Nested";
    let mut root = message(
        "Root",
        vec![
            scalar("f_double", 1, Type::Double),
            scalar("f_float", 2, Type::Float),
            scalar("f_int64", 3, Type::Int64),
            scalar("f_uint64", 4, Type::Uint64),
            scalar("f_int32", 5, Type::Int32),
            scalar("f_fixed64", 6, Type::Fixed64),
            scalar("f_fixed32", 7, Type::Fixed32),
            scalar("f_bool", 8, Type::Bool),
            scalar("f_string", 9, Type::String),
            scalar("f_bytes", 10, Type::Bytes),
            scalar("f_uint32", 11, Type::Uint32),
            scalar("f_sfixed32", 12, Type::Sfixed32),
            scalar("f_sfixed64", 13, Type::Sfixed64),
            scalar("f_sint32", 14, Type::Sint32),
            scalar("f_sint64", 15, Type::Sint64),
            typed("f_enum", 16, Type::Enum, ".sluice.prop.Root.Kind"),
            typed("f_enum_num", 17, Type::Enum, ".sluice.prop.Root.Kind"),
            typed("nested", 18, Type::Message, nested_ref),
            packed(repeated("r_packed", 19, Type::Int32)),
            repeated("r_unpacked", 20, Type::Sint64),
            repeated("r_string", 21, Type::String),
            packed(repeated("r_double", 22, Type::Double)),
            typed_repeated("r_nested", 23, Type::Message, nested_ref),
            typed_repeated("m_str", 24, Type::Message, ".sluice.prop.Root.MStrEntry"),
            typed_repeated(
                "m_nested",
                25,
                Type::Message,
                ".sluice.prop.Root.MNestedEntry",
            ),
            typed_repeated("m_bool", 26, Type::Message, ".sluice.prop.Root.MBoolEntry"),
            scalar("f_tiny", 27, Type::Int32),
            scalar("f_small", 28, Type::Sint32),
            packed(typed_repeated(
                "r_enum",
                29,
                Type::Enum,
                ".sluice.prop.Root.Kind",
            )),
            scalar("f_variant", 30, Type::String),
        ],
    );
    let mut nested = message(
        "Nested",
        vec![
            scalar("x", 1, Type::Int64),
            scalar("label", 2, Type::String),
            typed("inner", 3, Type::Message, ".sluice.prop.Root.Nested.Inner"),
        ],
    );
    nested.nested_type = vec![message("Inner", vec![scalar("flag", 1, Type::Bool)])];
    root.nested_type = vec![
        nested,
        map_entry(
            "MStrEntry",
            scalar("key", 1, Type::String),
            scalar("value", 2, Type::Int64),
        ),
        map_entry(
            "MNestedEntry",
            scalar("key", 1, Type::Int32),
            typed("value", 2, Type::Message, nested_ref),
        ),
        map_entry(
            "MBoolEntry",
            scalar("key", 1, Type::Bool),
            scalar("value", 2, Type::String),
        ),
    ];
    root.enum_type = vec![enumeration(
        "Kind",
        &[("K_ZERO", 0), ("K_ONE", 1), ("K_TWO", 2)],
    )];
    FileDescriptorProto {
        name: Some("prop.proto".into()),
        package: Some("sluice.prop".into()),
        syntax: Some("proto2".into()),
        message_type: vec![root],
        ..Default::default()
    }
}

fn root_descriptor() -> MessageDescriptor {
    let pool = DescriptorPool::from_file_descriptor_set(FileDescriptorSet { file: vec![file()] })
        .expect("prost-reflect accepts the file");
    pool.get_message_by_name("sluice.prop.Root")
        .expect("Root exists")
}

fn nested_value() -> impl Strategy<Value = Vec<(&'static str, Value)>> {
    (
        proptest::option::of(any::<i64>()),
        proptest::option::of("\\PC{0,6}"),
        proptest::option::of(proptest::option::of(any::<bool>())),
    )
        .prop_map(|(x, label, inner)| {
            let mut fields = Vec::new();
            if let Some(x) = x {
                fields.push(("x", Value::I64(x)));
            }
            if let Some(label) = label {
                fields.push(("label", Value::String(label)));
            }
            if let Some(flag) = inner {
                fields.push((
                    "inner",
                    Value::List(flag.into_iter().map(Value::Bool).collect()),
                ));
            }
            fields
        })
}

/// Field values to set on Root; nested messages are built later, when the descriptor is at hand.
#[derive(Debug, Clone)]
enum Spec {
    Plain(Value),
    Nested(Vec<(&'static str, Value)>),
    NestedList(Vec<Vec<(&'static str, Value)>>),
    NestedMap(Vec<(i32, Vec<(&'static str, Value)>)>),
}

fn specs() -> impl Strategy<Value = Vec<(&'static str, Spec)>> {
    let scalars = (
        (
            proptest::option::of(any::<f64>().prop_map(Value::F64)),
            proptest::option::of(any::<f32>().prop_map(Value::F32)),
            proptest::option::of(any::<i64>().prop_map(Value::I64)),
            proptest::option::of((0..=i64::MAX as u64).prop_map(Value::U64)),
            proptest::option::of(any::<i32>().prop_map(Value::I32)),
            proptest::option::of((0..=i64::MAX as u64).prop_map(Value::U64)),
            proptest::option::of(any::<u32>().prop_map(Value::U32)),
            proptest::option::of(any::<bool>().prop_map(Value::Bool)),
        ),
        (
            proptest::option::of("\\PC{0,8}".prop_map(Value::String)),
            proptest::option::of(
                prop::collection::vec(any::<u8>(), 0..8).prop_map(|b| Value::Bytes(b.into())),
            ),
            proptest::option::of(any::<u32>().prop_map(Value::U32)),
            proptest::option::of(any::<i32>().prop_map(Value::I32)),
            proptest::option::of(any::<i64>().prop_map(Value::I64)),
            proptest::option::of(any::<i32>().prop_map(Value::I32)),
            proptest::option::of(any::<i64>().prop_map(Value::I64)),
            proptest::option::of((0..3i32).prop_map(Value::EnumNumber)),
        ),
        (
            proptest::option::of((0..3i32).prop_map(Value::EnumNumber)),
            proptest::option::of((-128..=127i32).prop_map(Value::I32)),
            proptest::option::of((-32768..=32767i32).prop_map(Value::I32)),
            proptest::option::of(
                prop_oneof![
                    Just("null"),
                    Just("{\"a\":[1,2.5,\"x\"]}"),
                    Just("\"s\""),
                    Just("[]")
                ]
                .prop_map(|s| Value::String(s.to_owned())),
            ),
        ),
    );
    let collections = (
        prop::collection::vec(any::<i32>().prop_map(Value::I32), 0..5),
        prop::collection::vec(any::<i64>().prop_map(Value::I64), 0..5),
        prop::collection::vec("\\PC{0,4}".prop_map(Value::String), 0..4),
        prop::collection::vec(any::<f64>().prop_map(Value::F64), 0..4),
        prop::collection::vec((0..3i32).prop_map(Value::EnumNumber), 0..4),
        proptest::option::of(nested_value()),
        prop::collection::vec(nested_value(), 0..3),
        prop::collection::hash_map("\\PC{0,4}", any::<i64>(), 0..4),
        prop::collection::hash_map(any::<i32>(), nested_value(), 0..3),
        prop::collection::hash_map(any::<bool>(), "\\PC{0,4}", 0..2),
    );
    (scalars, collections).prop_map(
        |(
            (a, b, c),
            (
                packed,
                unpacked,
                strings,
                doubles,
                enums,
                nested,
                nested_list,
                m_str,
                m_nested,
                m_bool,
            ),
        )| {
            let mut out: Vec<(&'static str, Spec)> = Vec::new();
            let names_a = [
                "f_double",
                "f_float",
                "f_int64",
                "f_uint64",
                "f_int32",
                "f_fixed64",
                "f_fixed32",
                "f_bool",
            ];
            let values_a = [a.0, a.1, a.2, a.3, a.4, a.5, a.6, a.7];
            let names_b = [
                "f_string",
                "f_bytes",
                "f_uint32",
                "f_sfixed32",
                "f_sfixed64",
                "f_sint32",
                "f_sint64",
                "f_enum",
            ];
            let values_b = [b.0, b.1, b.2, b.3, b.4, b.5, b.6, b.7];
            let names_c = ["f_enum_num", "f_tiny", "f_small", "f_variant"];
            let values_c = [c.0, c.1, c.2, c.3];
            let singles = names_a
                .into_iter()
                .zip(values_a)
                .chain(names_b.into_iter().zip(values_b))
                .chain(names_c.into_iter().zip(values_c));
            for (name, value) in singles {
                if let Some(value) = value {
                    out.push((name, Spec::Plain(value)));
                }
            }
            out.push(("r_packed", Spec::Plain(Value::List(packed))));
            out.push(("r_unpacked", Spec::Plain(Value::List(unpacked))));
            out.push(("r_string", Spec::Plain(Value::List(strings))));
            out.push(("r_double", Spec::Plain(Value::List(doubles))));
            out.push(("r_enum", Spec::Plain(Value::List(enums))));
            if let Some(nested) = nested {
                out.push(("nested", Spec::Nested(nested)));
            }
            out.push(("r_nested", Spec::NestedList(nested_list)));
            out.push((
                "m_str",
                Spec::Plain(Value::Map(
                    m_str
                        .into_iter()
                        .map(|(k, v)| (MapKey::String(k), Value::I64(v)))
                        .collect(),
                )),
            ));
            out.push(("m_nested", Spec::NestedMap(m_nested.into_iter().collect())));
            out.push((
                "m_bool",
                Spec::Plain(Value::Map(
                    m_bool
                        .into_iter()
                        .map(|(k, v)| (MapKey::Bool(k), Value::String(v)))
                        .collect(),
                )),
            ));
            out
        },
    )
}

fn build_nested(
    descriptor: &MessageDescriptor,
    fields: &[(&'static str, Value)],
) -> DynamicMessage {
    let mut message = DynamicMessage::new(descriptor.clone());
    for (name, value) in fields {
        match (name, value) {
            (&"inner", Value::List(flag)) => {
                let inner_descriptor = descriptor
                    .get_field_by_name("inner")
                    .and_then(|f| f.kind().as_message().cloned())
                    .expect("inner is a message");
                let mut inner = DynamicMessage::new(inner_descriptor);
                if let Some(flag) = flag.first() {
                    inner.set_field_by_name("flag", flag.clone());
                }
                message.set_field_by_name("inner", Value::Message(inner));
            }
            (name, value) => message.set_field_by_name(name, value.clone()),
        }
    }
    message
}

fn build(root: &MessageDescriptor, specs: &[(&'static str, Spec)]) -> DynamicMessage {
    let nested = root.get_message_by_name_suffix().expect("Nested exists");
    let mut message = DynamicMessage::new(root.clone());
    for (name, spec) in specs {
        let value = match spec {
            Spec::Plain(value) => value.clone(),
            Spec::Nested(fields) => Value::Message(build_nested(&nested, fields)),
            Spec::NestedList(items) => Value::List(
                items
                    .iter()
                    .map(|fields| Value::Message(build_nested(&nested, fields)))
                    .collect(),
            ),
            Spec::NestedMap(entries) => Value::Map(
                entries
                    .iter()
                    .map(|(k, fields)| {
                        (
                            MapKey::I32(*k),
                            Value::Message(build_nested(&nested, fields)),
                        )
                    })
                    .collect::<HashMap<_, _>>(),
            ),
        };
        message.set_field_by_name(name, value);
    }
    message
}

trait NestedLookup {
    fn get_message_by_name_suffix(&self) -> Option<MessageDescriptor>;
}

impl NestedLookup for MessageDescriptor {
    fn get_message_by_name_suffix(&self) -> Option<MessageDescriptor> {
        self.parent_pool()
            .get_message_by_name("sluice.prop.Root.Nested")
    }
}

fn float(value: f64) -> Json {
    if value.is_finite() {
        json!(value)
    } else {
        json!(value.to_string())
    }
}

/// What the batch should hold for `field` of `message`, derived from prost-reflect's values.
pub(crate) fn expected_field(
    message: &DynamicMessage,
    field: &FieldDescriptor,
    column_type: &ColumnType,
) -> Json {
    let value = message.get_field(field);
    match (value.as_ref(), column_type) {
        (Value::List(items), ColumnType::Array { element, .. }) => Json::Array(
            items
                .iter()
                .map(|item| expected_value(item, &field.kind(), element))
                .collect(),
        ),
        (
            Value::Map(entries),
            ColumnType::Map {
                value: value_type, ..
            },
        ) => {
            let value_kind = field
                .kind()
                .as_message()
                .and_then(|entry| entry.get_field(2))
                .map(|f| f.kind())
                .expect("map entry value");
            let mut pairs: Vec<Json> = entries
                .iter()
                .map(|(key, value)| {
                    let key = match key {
                        MapKey::Bool(b) => json!(b),
                        MapKey::I32(i) => json!(i),
                        MapKey::I64(i) => json!(i),
                        MapKey::U32(u) => json!(u),
                        MapKey::U64(u) => json!(u),
                        MapKey::String(s) => json!(s),
                    };
                    json!([key, expected_value(value, &value_kind, value_type)])
                })
                .collect();
            sort_pairs(&mut pairs);
            Json::Array(pairs)
        }
        _ if !message.has_field(field) => Json::Null,
        (value, column_type) => expected_value(value, &field.kind(), column_type),
    }
}

pub(crate) fn expected_value(value: &Value, kind: &Kind, column_type: &ColumnType) -> Json {
    match value {
        Value::Bool(b) => json!(b),
        Value::I32(i) => json!(i),
        Value::I64(i) => json!(i),
        Value::U32(u) => json!(u),
        Value::U64(u) => json!(u),
        Value::F32(f) => float(f64::from(*f)),
        Value::F64(f) => float(*f),
        Value::String(s) => json!(s),
        Value::Bytes(b) => json!(base64::engine::general_purpose::STANDARD.encode(b)),
        Value::EnumNumber(n) => match (column_type, kind.as_enum()) {
            (ColumnType::String, Some(e)) => json!(e.get_value(*n).expect("known value").name()),
            _ => json!(n),
        },
        Value::Message(message) => {
            let ColumnType::Struct(columns) = column_type else {
                panic!("message for {column_type:?}");
            };
            Json::Object(
                columns
                    .iter()
                    .map(|column| {
                        let field = message
                            .descriptor()
                            .get_field_by_name(&column.name)
                            .expect("field for column");
                        (
                            column.name.clone(),
                            expected_field(message, &field, &column.data_type),
                        )
                    })
                    .collect(),
            )
        }
        other => panic!("unexpected nested value {other:?}"),
    }
}

pub(crate) fn sort_pairs(pairs: &mut [Json]) {
    pairs.sort_by_key(|pair| pair[0].to_string());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn prost_reflect_messages_decode_to_the_values_prost_reflect_holds(specs in specs()) {
        let root = root_descriptor();
        let schema = table();
        let descriptor_bytes = file().message_type[0].encode_to_vec();
        let plan = ProtoPlan::compile(&descriptor_bytes, &schema).expect("descriptor compiles");
        let message = build(&root, &specs);
        let record = message.encode_to_vec();

        let mut builder = RecordBatchBuilder::new(&schema);
        builder.append_proto(&plan, &record).expect("record decodes");
        // A second copy checks that rows do not bleed into each other.
        builder.append_proto(&plan, &record).expect("record decodes");
        let batch = builder.finish();
        prop_assert_eq!(batch.num_rows(), 2);

        for column in &schema.columns {
            let field = root.get_field_by_name(&column.name).expect("field for column");
            let expected = expected_field(&message, &field, &column.data_type);
            for row in 0..2 {
                let array = batch.column_by_name(&column.name).expect("column");
                let mut actual = array_cell(array.as_ref(), row);
                if let (ColumnType::Map { .. }, Json::Array(pairs)) = (&column.data_type, &mut actual) {
                    sort_pairs(pairs);
                }
                prop_assert_eq!(&actual, &expected, "column {} row {}", column.name, row);
            }
        }
    }
}
