//! Property: for a table whose columns are all scalars, the single-pass flat path
//! (`ProtoPlan::visit` straight into the columns) and the value-tree path (taken when the same
//! table has one extra STRUCT column) agree on every record of arbitrary wire bytes: both
//! accept or both reject it with the same error (kind, path, offset), and the batches hold
//! the same values. Sequences of records check that a rejected record leaves the flat
//! columns exactly as they were (last-one-wins, oneof clearing and NOT NULL included), and
//! that `check_proto` (a record checked, not appended) gives the flat append's answer. String
//! payloads reach past 32 bytes, where the string check hands over to `simdutf8`, as text,
//! as text with one byte replaced, and as any bytes.

use proptest::prelude::*;
use prost::Message;
use prost_types::field_descriptor_proto::Type;
use prost_types::{DescriptorProto, OneofDescriptorProto};
use serde_json::Value as Json;
use sluice_zeroparser::{ProtoPlan, RecordBatchBuilder, TableSchema};

use crate::support::{enumeration, in_oneof, message, rows, scalar, typed, Enc};

/// (field number, name, proto type, column type)
const FIELDS: &[(u32, &str, Type, &str)] = &[
    (1, "f_double", Type::Double, "DOUBLE"),
    (2, "f_float", Type::Float, "FLOAT"),
    (3, "f_int64", Type::Int64, "BIGINT"),
    (4, "f_uint64", Type::Uint64, "BIGINT"),
    (5, "f_int32", Type::Int32, "INT"),
    (6, "f_fixed64", Type::Fixed64, "TIMESTAMP"),
    (7, "f_fixed32", Type::Fixed32, "BIGINT"),
    (8, "f_bool", Type::Bool, "BOOLEAN"),
    (9, "f_string", Type::String, "STRING"),
    (10, "f_bytes", Type::Bytes, "BINARY"),
    (11, "f_uint32", Type::Uint32, "INT"),
    (12, "f_sfixed32", Type::Sfixed32, "DATE"),
    (13, "f_sfixed64", Type::Sfixed64, "TIMESTAMP_NTZ"),
    (14, "f_sint32", Type::Sint32, "SMALLINT"),
    (15, "f_sint64", Type::Sint64, "BIGINT"),
    (16, "f_enum", Type::Enum, "STRING"),
    (17, "f_tiny", Type::Int32, "TINYINT"),
    (18, "f_variant", Type::String, "VARIANT"),
    (19, "o_a", Type::Int64, "BIGINT"),
    (20, "o_b", Type::String, "STRING"),
    (21, "f_req", Type::Int64, "BIGINT NOT NULL"),
    (300, "f_far", Type::Float, "DOUBLE"),
];

fn descriptor() -> DescriptorProto {
    let fields = FIELDS
        .iter()
        .map(|&(number, name, ty, _)| {
            let field = if ty == Type::Enum {
                typed(name, number as i32, ty, ".Flat.Kind")
            } else {
                scalar(name, number as i32, ty)
            };
            if number == 19 || number == 20 {
                in_oneof(field, 0)
            } else {
                field
            }
        })
        .collect();
    let mut root = message("Flat", fields);
    root.enum_type = vec![enumeration("Kind", &[("ZERO", 0), ("ONE", 1), ("TWO", 2)])];
    root.oneof_decl = vec![OneofDescriptorProto {
        name: Some("choice".into()),
        ..Default::default()
    }];
    root
}

fn schema_text() -> String {
    FIELDS
        .iter()
        .map(|(_, name, _, column)| format!("{name} {column}"))
        .collect::<Vec<_>>()
        .join(", ")
}

struct Pair {
    plan_flat: ProtoPlan,
    plan_tree: ProtoPlan,
    flat: RecordBatchBuilder,
    tree: RecordBatchBuilder,
    /// Only checks the records (`check_proto`), for the flat plan.
    checker: RecordBatchBuilder,
}

fn pair() -> Pair {
    let bytes = descriptor().encode_to_vec();
    let flat_schema = TableSchema::parse(&schema_text()).expect("flat schema");
    let tree_schema =
        TableSchema::parse(&format!("{}, extra STRUCT<z: INT>", schema_text())).expect("schema");
    Pair {
        plan_flat: ProtoPlan::compile(&bytes, &flat_schema).expect("flat plan"),
        plan_tree: ProtoPlan::compile(&bytes, &tree_schema).expect("tree plan"),
        flat: RecordBatchBuilder::new(&flat_schema),
        tree: RecordBatchBuilder::new(&tree_schema),
        checker: RecordBatchBuilder::new(&flat_schema),
    }
}

/// One field occurrence on the wire: which field, which wire type, what payload.
#[derive(Debug, Clone)]
struct Item {
    field: usize,
    wire: u8,
    number: u64,
    payload: Vec<u8>,
}

fn item() -> impl Strategy<Value = Item> {
    (
        0..FIELDS.len() + 2,
        prop_oneof![6 => Just(9u8), 1 => 0u8..6],
        prop_oneof![
            Just(0u64),
            0u64..300,
            any::<u64>(),
            Just(u64::MAX),
            Just(i64::MAX as u64 + 1),
        ],
        prop_oneof![
            prop::collection::vec(any::<u8>(), 0..12),
            "[a-z ]{0,10}".prop_map(String::into_bytes),
            Just(b"{ \"a\" : [1, 2] }".to_vec()),
            Just(b"{\"a\":".to_vec()),
            // Past the 32 bytes the string check hands to `simdutf8`: text, text with one
            // byte anywhere replaced by any byte (often not UTF-8 then), and any bytes.
            "[a-zé€ ]{30,90}".prop_map(String::into_bytes),
            ("[a-zé€ ]{30,90}", any::<prop::sample::Index>(), any::<u8>()).prop_map(
                |(text, at, byte)| {
                    let mut bytes = text.into_bytes();
                    let i = at.index(bytes.len());
                    bytes[i] = byte;
                    bytes
                }
            ),
            prop::collection::vec(any::<u8>(), 33..80),
        ],
    )
        .prop_map(|(field, wire, number, payload)| Item {
            field,
            wire,
            number,
            payload,
        })
}

/// The wire type a field's proto type uses.
fn natural_wire(ty: Type) -> u8 {
    match ty {
        Type::Double | Type::Fixed64 | Type::Sfixed64 => 1,
        Type::Float | Type::Fixed32 | Type::Sfixed32 => 5,
        Type::String | Type::Bytes | Type::Message => 2,
        _ => 0,
    }
}

fn encode(items: &[Item], cut: Option<usize>) -> Vec<u8> {
    let mut enc = Enc::new();
    for item in items {
        let (number, ty) = match FIELDS.get(item.field) {
            Some(&(number, _, ty, _)) => (number, ty),
            // Unknown fields, dense and sparse numbers.
            None if item.field == FIELDS.len() => (22, Type::Int32),
            None => (1000, Type::Bytes),
        };
        let wire = if item.wire == 9 {
            natural_wire(ty)
        } else {
            item.wire
        };
        enc = enc.tag(number, wire);
        enc = match wire {
            0 => enc.raw_varint(item.number),
            1 => enc.raw(&item.number.to_le_bytes()),
            2 => enc.raw_varint(item.payload.len() as u64).raw(&item.payload),
            3 => enc.raw_varint(8).tag(number, 4),
            4 => enc,
            _ => enc.raw(&(item.number as u32).to_le_bytes()),
        };
    }
    let mut bytes = enc.build();
    if let Some(cut) = cut {
        bytes.truncate(cut % (bytes.len() + 1));
    }
    bytes
}

fn without_extra(mut rows: Vec<Json>) -> Vec<Json> {
    for row in &mut rows {
        if let Json::Object(map) = row {
            map.remove("extra");
        }
    }
    rows
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn the_flat_path_and_the_value_tree_agree_on_arbitrary_records(
        records in prop::collection::vec(
            (prop::collection::vec(item(), 0..24), prop::option::weighted(0.2, any::<usize>())),
            1..6,
        ),
    ) {
        let mut p = pair();
        for (items, cut) in &records {
            let bytes = encode(items, *cut);
            let flat = p.flat.append_proto(&p.plan_flat, &bytes);
            let tree = p.tree.append_proto(&p.plan_tree, &bytes);
            match (&flat, &tree) {
                (Ok(()), Ok(())) => {}
                (Err(a), Err(b)) => {
                    prop_assert_eq!(a.kind(), b.kind());
                    prop_assert_eq!(a.path(), b.path());
                    prop_assert_eq!(a.offset(), b.offset());
                }
                _ => prop_assert!(false, "flat {:?} but tree {:?} for {:?}", flat, tree, bytes),
            }
            prop_assert_eq!(p.flat.len(), p.tree.len());
            // Checking answers as the append does, error for error, and appends nothing.
            let checked = p.checker.check_proto(&p.plan_flat, &bytes);
            match (&flat, &checked) {
                (Ok(()), Some(Ok(()))) => {}
                (Err(a), Some(Err(b))) => prop_assert_eq!(a.to_string(), b.to_string()),
                _ => prop_assert!(false, "append {:?} but check {:?} for {:?}", flat, checked, bytes),
            }
            prop_assert_eq!(p.checker.len(), 0);
            prop_assert!(p.tree.check_proto(&p.plan_tree, &bytes).is_none());
            // The predicate the pod asks before deferring a run says the same.
            prop_assert!(p.checker.checks_proto_without_appending());
            prop_assert!(!p.tree.checks_proto_without_appending());
        }
        let flat_rows = rows(&p.flat.finish());
        let tree_rows = without_extra(rows(&p.tree.finish()));
        prop_assert_eq!(flat_rows, tree_rows);
    }
}

/// A builder with `_rescued_data` cannot check without appending (its rescued text is
/// written by the append), and says so: the pod parses such a run into a batch once.
#[test]
fn a_rescuing_builder_does_not_check_without_appending() {
    let flat_schema = TableSchema::parse(&schema_text()).expect("flat schema");
    let plan = ProtoPlan::compile(&descriptor().encode_to_vec(), &flat_schema).expect("plan");
    let mut rescuing = RecordBatchBuilder::with_rescued_data(&flat_schema).expect("rescuing");
    assert!(!rescuing.checks_proto_without_appending());
    assert!(rescuing.check_proto(&plan, &[]).is_none());
    assert!(RecordBatchBuilder::new(&flat_schema).checks_proto_without_appending());
}
