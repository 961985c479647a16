//! Descriptor → table mapping: what compiles, and the schema errors for what does not.

use prost::Message;
use prost_types::field_descriptor_proto::Type;
use serde_json::json;
use sluice_zeroparser::{ProtoPlan, RecordBatchBuilder, SchemaError, TableSchema};

use crate::support::{
    compile, map_entry, message, repeated, rows, scalar, telemetry_descriptor, typed,
    typed_repeated, Enc,
};

#[test]
fn the_telemetry_descriptor_compiles_against_its_table() {
    let (_, plan, _) = crate::support::telemetry();
    assert_eq!(plan.message_name(), "Telemetry");
}

#[test]
fn bytes_that_are_not_a_descriptor_are_rejected() {
    let schema = TableSchema::parse("a INT").expect("parses");
    let error = ProtoPlan::compile(&[0xff, 0xff, 0xff], &schema).expect_err("garbage");
    assert!(matches!(error, SchemaError::InvalidDescriptor { .. }));
}

#[test]
fn a_descriptor_field_without_a_column_is_rejected() {
    let root = message(
        "M",
        vec![
            scalar("a", 1, Type::Int32),
            scalar("extra", 2, Type::String),
        ],
    );
    let error = compile(&root, "a INT").expect_err("extra has no column");
    assert_eq!(
        error.to_string(),
        "descriptor field `extra` (string) has no column in the table"
    );
}

#[test]
fn an_incompatible_field_type_names_the_path_and_both_types() {
    let mut root = message("M", vec![typed("loc", 1, Type::Message, ".M.Loc")]);
    root.nested_type = vec![message("Loc", vec![scalar("lat", 1, Type::String)])];
    let error = compile(&root, "loc STRUCT<lat: DOUBLE>").expect_err("string into DOUBLE");
    assert_eq!(
        error.to_string(),
        "descriptor field `loc.lat` is string, which cannot fill column type DOUBLE"
    );
    for (ty, column) in [
        (Type::Int64, "INT"),
        (Type::Double, "FLOAT"),
        (Type::Int32, "TIMESTAMP"),
        (Type::Int64, "DATE"),
        (Type::Bytes, "STRING"),
        (Type::String, "BINARY"),
        (Type::Int32, "BOOLEAN"),
    ] {
        let root = message("M", vec![scalar("x", 1, ty)]);
        assert!(
            matches!(
                compile(&root, &format!("x {column}")),
                Err(SchemaError::IncompatibleType { .. })
            ),
            "{ty:?} into {column}"
        );
    }
}

#[test]
fn every_allowed_scalar_pairing_compiles() {
    for (ty, column) in [
        (Type::Sint32, "TINYINT"),
        (Type::Fixed32, "SMALLINT"),
        (Type::Uint32, "INT"),
        (Type::Uint64, "BIGINT"),
        (Type::Sfixed32, "BIGINT"),
        (Type::Float, "FLOAT"),
        (Type::Float, "DOUBLE"),
        (Type::String, "VARIANT"),
        (Type::Sfixed32, "DATE"),
        (Type::Sfixed64, "TIMESTAMP"),
        (Type::Fixed64, "TIMESTAMP_NTZ"),
    ] {
        let root = message("M", vec![scalar("x", 1, ty)]);
        assert!(
            compile(&root, &format!("x {column}")).is_ok(),
            "{ty:?} into {column}"
        );
    }
}

#[test]
fn a_not_null_column_without_a_field_is_rejected() {
    let root = message("M", vec![scalar("a", 1, Type::Int32)]);
    let error = compile(&root, "a INT, b STRING NOT NULL").expect_err("b has no field");
    assert_eq!(
        error,
        SchemaError::MissingNotNullField {
            path: sluice_zeroparser::FieldPath::field("b")
        }
    );
    assert!(compile(&root, "a INT, b STRING").is_ok());
}

#[test]
fn repeated_fields_need_array_or_map_columns_and_the_other_way_round() {
    let root = message("M", vec![repeated("a", 1, Type::Int32)]);
    let error = compile(&root, "a INT").expect_err("repeated into INT");
    assert_eq!(
        error.to_string(),
        "descriptor field `a` is repeated int32, which cannot fill column type INT"
    );
    let root = message("M", vec![scalar("a", 1, Type::Int32)]);
    assert!(matches!(
        compile(&root, "a ARRAY<INT>"),
        Err(SchemaError::IncompatibleType { .. })
    ));
}

#[test]
fn a_map_field_fills_only_a_map_column() {
    let mut root = message(
        "M",
        vec![typed_repeated("m", 1, Type::Message, ".M.MEntry")],
    );
    root.nested_type = vec![map_entry(
        "MEntry",
        scalar("key", 1, Type::String),
        scalar("value", 2, Type::Int64),
    )];
    assert!(compile(&root, "m MAP<STRING, BIGINT>").is_ok());
    let error =
        compile(&root, "m ARRAY<STRUCT<key: STRING, value: BIGINT>>").expect_err("map into array");
    assert_eq!(
        error.to_string(),
        "descriptor field `m` is map<string, int64>, which cannot fill column type \
         ARRAY<STRUCT<key: STRING, value: BIGINT>>"
    );
    assert!(compile(&root, "m MAP<STRING, INT>").is_err());
    assert!(compile(&root, "m MAP<INT, BIGINT>").is_err());
}

#[test]
fn a_repeated_key_value_message_without_the_map_option_fills_a_map_or_an_array() {
    let mut root = message("M", vec![typed_repeated("m", 1, Type::Message, ".M.Pair")]);
    root.nested_type = vec![message(
        "Pair",
        vec![
            scalar("key", 1, Type::Int32),
            scalar("value", 2, Type::String),
        ],
    )];
    let record = Enc::new()
        .message(1, Enc::new().int(1, 1).string(2, "one"))
        .message(1, Enc::new().int(1, 2).string(2, "two"))
        .build();
    for (schema_text, expected) in [
        ("m MAP<INT, STRING>", json!([[1, "one"], [2, "two"]])),
        (
            "m ARRAY<STRUCT<key: INT, value: STRING>>",
            json!([{"key": 1, "value": "one"}, {"key": 2, "value": "two"}]),
        ),
    ] {
        let schema = TableSchema::parse(schema_text).expect("parses");
        let plan = ProtoPlan::compile(&root.encode_to_vec(), &schema).expect("compiles");
        let mut builder = RecordBatchBuilder::new(&schema);
        builder.append_proto(&plan, &record).expect("decodes");
        assert_eq!(rows(&builder.finish())[0]["m"], expected);
    }
}

#[test]
fn type_references_resolve_with_or_without_package_and_leading_dot() {
    for reference in [".M.Loc", "M.Loc", ".some.pkg.M.Loc", "Loc"] {
        let mut root = message("M", vec![typed("loc", 1, Type::Message, reference)]);
        root.nested_type = vec![message("Loc", vec![scalar("lat", 1, Type::Double)])];
        assert!(
            compile(&root, "loc STRUCT<lat: DOUBLE>").is_ok(),
            "{reference}"
        );
    }
    let root = message("M", vec![typed("loc", 1, Type::Message, ".M.Nowhere")]);
    let error = compile(&root, "loc STRUCT<lat: DOUBLE>").expect_err("unresolved");
    assert!(matches!(error, SchemaError::UnresolvedType { .. }));
    assert!(error.to_string().contains(".M.Nowhere"));
}

#[test]
fn field_names_match_columns_exactly_or_ignoring_case() {
    let root = message("M", vec![scalar("DeviceId", 1, Type::String)]);
    let schema = TableSchema::parse("deviceid STRING").expect("parses");
    let plan = ProtoPlan::compile(&root.encode_to_vec(), &schema).expect("compiles");
    let mut builder = RecordBatchBuilder::new(&schema);
    builder
        .append_proto(&plan, &Enc::new().string(1, "d").build())
        .expect("decodes");
    assert_eq!(rows(&builder.finish())[0], json!({"deviceid": "d"}));
}

#[test]
fn two_fields_that_map_to_one_column_are_rejected() {
    let root = message(
        "M",
        vec![
            scalar("name", 1, Type::String),
            scalar("NAME", 2, Type::String),
        ],
    );
    let error = compile(&root, "Name STRING").expect_err("both map to Name");
    assert!(matches!(error, SchemaError::DuplicateFieldMapping { .. }));
}

#[test]
fn a_recursive_message_type_is_followed_as_deep_as_the_schema_goes() {
    let mut root = message(
        "Node",
        vec![
            scalar("value", 1, Type::Int32),
            typed("child", 2, Type::Message, ".Node"),
        ],
    );
    root.nested_type = vec![];
    let schema_text = "value INT, child STRUCT<value: INT, child: STRUCT<value: INT>>";
    let schema = TableSchema::parse(schema_text).expect("parses");
    let plan = ProtoPlan::compile(&root.encode_to_vec(), &schema).expect("compiles");
    let leaf = Enc::new().int(1, 3).message(2, Enc::new().int(1, 4));
    let record = Enc::new()
        .int(1, 1)
        .message(2, Enc::new().int(1, 2).message(2, leaf))
        .build();
    let mut builder = RecordBatchBuilder::new(&schema);
    builder.append_proto(&plan, &record).expect("decodes");
    assert_eq!(
        rows(&builder.finish())[0],
        json!({"value": 1, "child": {"value": 2, "child": {"value": 3}}})
    );
}

#[test]
fn groups_and_invalid_field_numbers_in_the_descriptor_are_unsupported() {
    let mut root = message("M", vec![typed("g", 1, Type::Group, ".M.G")]);
    root.nested_type = vec![message("G", vec![scalar("x", 1, Type::Int32)])];
    assert!(matches!(
        compile(&root, "g STRUCT<x: INT>"),
        Err(SchemaError::UnsupportedField { .. })
    ));
    let root = message("M", vec![scalar("a", 0, Type::Int32)]);
    assert!(matches!(
        compile(&root, "a INT"),
        Err(SchemaError::UnsupportedField { .. })
    ));
    let root = message(
        "M",
        vec![scalar("a", 1, Type::Int32), scalar("b", 1, Type::Int32)],
    );
    assert!(matches!(
        compile(&root, "a INT, b INT"),
        Err(SchemaError::UnsupportedField { .. })
    ));
}

#[test]
fn the_telemetry_descriptor_fails_against_a_table_missing_one_of_its_fields() {
    let root = telemetry_descriptor();
    let text = crate::support::TELEMETRY_SCHEMA.replace(", big BIGINT", "");
    let error = compile(&root, &text).expect_err("big has no column");
    assert_eq!(
        error.to_string(),
        "descriptor field `big` (fixed64) has no column in the table"
    );
}
