//! Protobuf decoding semantics: every column type, absent fields, last-one-wins, message
//! merge, packed + unpacked, skipped unknown fields, maps, oneofs, batch reset.

use serde_json::json;
use sluice_zeroparser::{DecodeErrorKind, RecordBatchBuilder, TableSchema};

use crate::support::{cell, minimal, rows, telemetry, Enc};

fn loc(lat: f64, lon: f64) -> Enc {
    Enc::new().double(1, lat).double(2, lon)
}

#[test]
fn a_full_record_decodes_into_every_column_type() {
    let (_, plan, mut builder) = telemetry();
    let record = Enc::new()
        .int(1, 42)
        .string(2, "dev-1")
        .int(3, 1_700_000_000_000_000)
        .double(4, 21.5)
        .string(5, "a")
        .string(5, "b")
        .message(6, Enc::new().string(1, "k").string(2, "v"))
        .message(7, loc(1.5, 2.5))
        .int(8, 19_000)
        .bytes(9, &[0, 1, 255])
        .string(10, "{ \"x\" : [1, 2] }")
        .int(11, -5)
        .int(12, -128)
        .sint(13, -300)
        .varint(14, 4_000_000)
        .sint(15, -7)
        .sint(15, 1 << 40)
        .varint(16, 2)
        .varint(17, 1)
        .float(18, 0.25)
        .string(19, "alpha")
        .message(21, loc(3.0, 4.0))
        .message(22, Enc::new().int(1, -1).message(2, loc(5.0, 6.0)))
        .fixed64(23, 1 << 62)
        .varint(24, 1)
        .build();
    builder.append_proto(&plan, &record).expect("decodes");
    let batch = builder.finish();
    assert_eq!(batch.num_rows(), 1);
    assert_eq!(
        rows(&batch)[0],
        json!({
            "id": 42, "device": "dev-1", "ts": 1_700_000_000_000_000i64, "temp": 21.5,
            "tags": ["a", "b"], "attrs": [["k", "v"]], "loc": {"lat": 1.5, "lon": 2.5},
            "d": 19_000, "b": "AAH/", "v": "{\"x\":[1,2]}", "n": -5, "t": -128, "s": -300,
            "i": 4_000_000, "nums": [-7, 1i64 << 40], "kind": "GATEWAY", "ok": true,
            "f": 0.25, "a": "alpha", "b2": null,
            "path": [{"lat": 3.0, "lon": 4.0}],
            "places": [[-1, {"lat": 5.0, "lon": 6.0}]],
            "big": 1i64 << 62, "code": 1
        })
    );
}

#[test]
fn enum_fields_fill_string_columns_with_names_and_integer_columns_with_numbers() {
    let schema = TableSchema::parse("id BIGINT NOT NULL, kind STRING, code INT").expect("parses");
    let mut root = crate::support::telemetry_descriptor();
    root.field
        .retain(|f| matches!(f.name(), "id" | "kind" | "code"));
    root.oneof_decl.clear();
    let plan =
        sluice_zeroparser::ProtoPlan::compile(&prost::Message::encode_to_vec(&root), &schema)
            .expect("compiles");
    let mut builder = RecordBatchBuilder::new(&schema);
    builder
        .append_proto(&plan, &minimal(1).varint(16, 1).varint(24, 2).build())
        .expect("known values");
    builder
        .append_proto(&plan, &minimal(2).varint(16, 9).build())
        .expect("unknown enum number");
    let batch = builder.finish();
    assert_eq!(cell(&batch, "kind", 0), json!("SENSOR"));
    assert_eq!(cell(&batch, "code", 0), json!(2));
    assert_eq!(cell(&batch, "kind", 1), json!("9"));
}

#[test]
fn absent_singular_fields_are_null_and_absent_repeated_fields_are_empty() {
    let (_, plan, mut builder) = telemetry();
    builder
        .append_proto(&plan, &minimal(7).build())
        .expect("decodes");
    let batch = builder.finish();
    let row = &rows(&batch)[0];
    assert_eq!(row["id"], json!(7));
    for column in ["device", "ts", "loc", "v", "kind", "a", "b2"] {
        assert_eq!(row[column], json!(null), "{column}");
    }
    assert_eq!(row["tags"], json!([]));
    assert_eq!(row["attrs"], json!([]));
    assert_eq!(row["path"], json!([]));
}

#[test]
fn a_repeated_singular_scalar_keeps_the_last_value() {
    let (_, plan, mut builder) = telemetry();
    let record = minimal(1)
        .string(2, "first")
        .int(1, 2)
        .string(2, "second")
        .build();
    builder.append_proto(&plan, &record).expect("decodes");
    let batch = builder.finish();
    assert_eq!(cell(&batch, "device", 0), json!("second"));
    assert_eq!(cell(&batch, "id", 0), json!(2));
}

#[test]
fn a_repeated_singular_message_merges_its_occurrences() {
    let (_, plan, mut builder) = telemetry();
    let record = minimal(1)
        .message(7, Enc::new().double(1, 1.0))
        .message(7, Enc::new().double(2, 2.0))
        .message(7, Enc::new().double(1, 3.0))
        .build();
    builder.append_proto(&plan, &record).expect("decodes");
    let batch = builder.finish();
    assert_eq!(cell(&batch, "loc", 0), json!({"lat": 3.0, "lon": 2.0}));
}

#[test]
fn repeated_scalars_accept_packed_and_unpacked_encodings_mixed() {
    let (_, plan, mut builder) = telemetry();
    let packed = Enc::new().raw_varint(2).raw_varint(4).raw_varint(5).build(); // zigzag 1, 2, -3
    let record = minimal(1)
        .sint(15, 10)
        .bytes(15, &packed)
        .sint(15, -20)
        .bytes(15, &[])
        .build();
    builder.append_proto(&plan, &record).expect("decodes");
    let batch = builder.finish();
    assert_eq!(cell(&batch, "nums", 0), json!([10, 1, 2, -3, -20]));
}

#[test]
fn unknown_fields_of_every_wire_type_are_skipped_including_nested_groups() {
    let (_, plan, mut builder) = telemetry();
    let group = Enc::new()
        .tag(100, 3)
        .varint(1, 5)
        .tag(2, 3)
        .fixed32(3, 9)
        .tag(2, 4)
        .string(4, "inside")
        .tag(100, 4);
    let record = minimal(1)
        .varint(90, u64::MAX)
        .fixed64(91, 1)
        .string(92, "skipped")
        .fixed32(93, 1)
        .raw(&group.build())
        .varint(1_000_000, 1)
        .string(2, "kept")
        .build();
    builder.append_proto(&plan, &record).expect("decodes");
    let batch = builder.finish();
    assert_eq!(cell(&batch, "device", 0), json!("kept"));
}

#[test]
fn a_later_map_entry_replaces_the_value_of_an_earlier_one_with_the_same_key() {
    let (_, plan, mut builder) = telemetry();
    let entry = |k: &str, v: &str| Enc::new().string(1, k).string(2, v);
    let record = minimal(1)
        .message(6, entry("a", "1"))
        .message(6, entry("b", "2"))
        .message(6, entry("a", "3"))
        .build();
    builder.append_proto(&plan, &record).expect("decodes");
    let batch = builder.finish();
    assert_eq!(cell(&batch, "attrs", 0), json!([["a", "3"], ["b", "2"]]));
}

#[test]
fn many_distinct_map_keys_stay_in_one_pass_and_a_repeat_among_them_is_found() {
    let (_, plan, mut builder) = telemetry();
    let entry = |k: &str, v: &str| Enc::new().string(1, k).string(2, v);
    // 64 distinct keys, the most a row is checked in one pass: each is compared with the
    // prints of every earlier one.
    let keys: Vec<String> = (0..64).map(|i| format!("key-{i}")).collect();
    let mut distinct = minimal(1);
    for k in &keys {
        distinct = distinct.message(6, entry(k, "v"));
    }
    builder
        .append_proto(&plan, &distinct.build())
        .expect("decodes");
    assert_eq!(builder.proto_records_via_value_tree(), 0);
    let mut repeated = minimal(2);
    for k in &keys[..40] {
        repeated = repeated.message(6, entry(k, "v"));
    }
    repeated = repeated.message(6, entry("key-17", "last"));
    builder
        .append_proto(&plan, &repeated.build())
        .expect("decodes");
    assert_eq!(builder.proto_records_via_value_tree(), 1);
    let batch = builder.finish();
    let pairs = |row: usize| match cell(&batch, "attrs", row) {
        serde_json::Value::Array(pairs) => pairs,
        other => panic!("not a map: {other}"),
    };
    assert_eq!(pairs(0).len(), 64);
    assert_eq!(pairs(1).len(), 40);
    assert!(pairs(1).contains(&json!(["key-17", "last"])));
}

#[test]
fn a_map_entry_without_key_or_value_gets_zero_values() {
    let (_, plan, mut builder) = telemetry();
    let record = minimal(1)
        .message(6, Enc::new().string(2, "no key"))
        .message(6, Enc::new().string(1, "no value"))
        .build();
    builder.append_proto(&plan, &record).expect("decodes");
    let batch = builder.finish();
    assert_eq!(
        cell(&batch, "attrs", 0),
        json!([["", "no key"], ["no value", ""]])
    );
}

#[test]
fn a_map_value_message_without_its_not_null_field_is_rejected() {
    let (_, plan, mut builder) = telemetry();
    let record = minimal(1).message(22, Enc::new().int(1, 4)).build();
    let error = builder
        .append_proto(&plan, &record)
        .expect_err("lon is NOT NULL");
    assert_eq!(error.kind(), &DecodeErrorKind::NotNull);
    assert_eq!(error.path().to_string(), "places{4}.lon");
}

#[test]
fn only_the_last_set_oneof_member_is_non_null() {
    let (_, plan, mut builder) = telemetry();
    builder
        .append_proto(&plan, &minimal(1).string(19, "a").int(20, 5).build())
        .expect("decodes");
    builder
        .append_proto(&plan, &minimal(2).int(20, 5).string(19, "a").build())
        .expect("decodes");
    let batch = builder.finish();
    assert_eq!(cell(&batch, "a", 0), json!(null));
    assert_eq!(cell(&batch, "b2", 0), json!(5));
    assert_eq!(cell(&batch, "a", 1), json!("a"));
    assert_eq!(cell(&batch, "b2", 1), json!(null));
}

#[test]
fn field_numbers_beyond_the_dense_table_are_found() {
    let schema = TableSchema::parse("small INT, huge STRING").expect("parses");
    let root = crate::support::message(
        "Sparse",
        vec![
            crate::support::scalar("small", 1, prost_types::field_descriptor_proto::Type::Int32),
            crate::support::scalar(
                "huge",
                536_870_911,
                prost_types::field_descriptor_proto::Type::String,
            ),
        ],
    );
    let plan =
        sluice_zeroparser::ProtoPlan::compile(&prost::Message::encode_to_vec(&root), &schema)
            .expect("compiles");
    let mut builder = RecordBatchBuilder::new(&schema);
    let record = Enc::new()
        .string(536_870_911, "far")
        .varint(300, 1)
        .int(1, 3)
        .build();
    builder.append_proto(&plan, &record).expect("decodes");
    let batch = builder.finish();
    assert_eq!(rows(&batch)[0], json!({"small": 3, "huge": "far"}));
}

#[test]
fn finish_returns_only_rows_since_the_last_finish_and_resets_the_builder() {
    let (schema, plan, mut builder) = telemetry();
    for id in 0..3 {
        builder
            .append_proto(&plan, &minimal(id).string(5, "x").build())
            .expect("decodes");
    }
    assert_eq!(builder.len(), 3);
    let first = builder.finish();
    assert_eq!(first.num_rows(), 3);
    assert!(builder.is_empty());
    assert_eq!(first.schema(), schema.arrow_schema());
    assert_eq!(builder.arrow_schema(), schema.arrow_schema());
    builder
        .append_proto(&plan, &minimal(9).string(5, "y").build())
        .expect("decodes");
    let second = builder.finish();
    assert_eq!(second.num_rows(), 1);
    assert_eq!(cell(&second, "id", 0), json!(9));
    assert_eq!(cell(&second, "tags", 0), json!(["y"]));
    let empty = builder.finish();
    assert_eq!(empty.num_rows(), 0);
    assert_eq!(empty.schema(), schema.arrow_schema());
}

#[test]
fn a_plan_compiled_for_another_schema_is_rejected() {
    let (_, plan, _) = telemetry();
    let other = TableSchema::parse("id BIGINT").expect("parses");
    let mut builder = RecordBatchBuilder::new(&other);
    let error = builder
        .append_proto(&plan, &minimal(1).build())
        .expect_err("wrong plan");
    assert_eq!(error.kind(), &DecodeErrorKind::PlanSchemaMismatch);
}

#[test]
fn the_plan_is_send_and_sync_and_knows_its_message_name() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<sluice_zeroparser::ProtoPlan>();
    assert_send_sync::<RecordBatchBuilder>();
    let (_, plan, _) = telemetry();
    assert_eq!(plan.message_name(), "Telemetry");
}
