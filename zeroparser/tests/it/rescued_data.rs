//! The `_rescued_data` column (`RecordBatchBuilder::with_rescued_data`): what JSON and
//! protobuf records keep there, what still fails, that a rejected record leaves the column
//! untouched, and (property tests) that random extra JSON members and random unknown
//! protobuf fields come back exactly while the other columns equal a builder without rescue.

use std::collections::BTreeMap;

use base64::Engine;
use proptest::prelude::*;
use prost::Message;
use prost_types::field_descriptor_proto::Type;
use serde_json::{json, Value as Json};
use sluice_zeroparser::{
    ProtoPlan, RecordBatchBuilder, SchemaError, TableSchema, RESCUED_DATA_COLUMN,
};

use crate::support::{cell, message, minimal, rows, scalar, telemetry, Enc};

const JSON_SCHEMA: &str = "id BIGINT NOT NULL, device STRING, temp DOUBLE, t TINYINT, \
    i INT, tags ARRAY<INT NOT NULL>, loc STRUCT<lat: DOUBLE, lon: DOUBLE NOT NULL>, b BINARY";

fn schema(text: &str) -> TableSchema {
    TableSchema::parse(text).expect("schema parses")
}

fn rescuing(text: &str) -> RecordBatchBuilder {
    RecordBatchBuilder::with_rescued_data(&schema(text)).expect("schema can rescue")
}

/// The rows of `builder` without `_rescued_data`, and the rescued texts.
fn split(builder: &mut RecordBatchBuilder) -> (Vec<Json>, Vec<Option<String>>) {
    let batch = builder.finish();
    let rescued = (0..batch.num_rows())
        .map(|row| match cell(&batch, RESCUED_DATA_COLUMN, row) {
            Json::String(text) => Some(text),
            Json::Null => None,
            other => panic!("rescued cell {other}"),
        })
        .collect();
    let mut plain = rows(&batch);
    for row in &mut plain {
        if let Json::Object(map) = row {
            map.remove(RESCUED_DATA_COLUMN);
        }
    }
    (plain, rescued)
}

#[test]
fn the_rescued_column_comes_last_and_is_a_nullable_string() {
    let builder = rescuing(JSON_SCHEMA);
    let schema = builder.arrow_schema();
    let last = schema.fields().last().expect("fields");
    assert_eq!(last.name(), RESCUED_DATA_COLUMN);
    assert_eq!(last.data_type(), &arrow_schema::DataType::Utf8);
    assert!(last.is_nullable());
    assert_eq!(schema.fields().len(), 9);
}

#[test]
fn a_schema_with_its_own_rescued_data_column_is_refused() {
    let error = RecordBatchBuilder::with_rescued_data(&schema("id BIGINT, _RESCUED_data STRING"))
        .expect_err("reserved name");
    assert!(
        matches!(error, SchemaError::ReservedColumn { .. }),
        "{error}"
    );
    // Without the option the name is an ordinary column.
    let mut plain = RecordBatchBuilder::new(&schema("id BIGINT, _rescued_data STRING"));
    plain
        .append_json(r#"{"id": 1, "_rescued_data": "mine"}"#)
        .expect("ordinary column");
}

#[test]
fn unknown_json_members_are_kept_as_written_and_other_rows_get_null() {
    let mut builder = rescuing(JSON_SCHEMA);
    builder
        .append_json(
            r#"{"id": 1, "extra": {"a": [1, 2.50, "x y"], "b": null}, "device": "d",
               "N": 12345678901234567890123, "_rescued_data": "s"}"#,
        )
        .expect("record");
    builder
        .append_json(r#"{"id": 2, "temp": 1.5}"#)
        .expect("record");
    let batch = builder.finish();
    assert_eq!(
        cell(&batch, RESCUED_DATA_COLUMN, 0),
        json!(
            r#"{"extra":{"a":[1,2.50,"x y"],"b":null},"N":12345678901234567890123,"_rescued_data":"s"}"#
        )
    );
    assert_eq!(cell(&batch, "device", 0), json!("d"));
    assert_eq!(cell(&batch, RESCUED_DATA_COLUMN, 1), Json::Null);
    assert_eq!(cell(&batch, "temp", 1), json!(1.5));
}

#[test]
fn values_that_do_not_fit_nullable_columns_become_null_and_are_kept_whole() {
    let mut builder = rescuing(JSON_SCHEMA);
    builder
        .append_json(
            r#"{"id": 7, "device": 42, "t": 300, "i": "twelve", "temp": "warm",
               "tags": [1, null, 3], "loc": {"lat": 1, "lon": 2, "alt": 3}, "b": "not base64!"}"#,
        )
        .expect("record");
    let batch = builder.finish();
    for column in ["device", "t", "i", "temp", "tags", "loc", "b"] {
        assert_eq!(cell(&batch, column, 0), Json::Null, "{column}");
    }
    assert_eq!(cell(&batch, "id", 0), json!(7));
    assert_eq!(
        cell(&batch, RESCUED_DATA_COLUMN, 0),
        json!(
            r#"{"device":42,"t":300,"i":"twelve","temp":"warm","tags":[1,null,3],"loc":{"lat":1,"lon":2,"alt":3},"b":"not base64!"}"#
        )
    );
}

#[test]
fn a_not_null_column_that_does_not_fit_fails_with_the_error_it_has_without_rescue() {
    for record in [
        r#"{"id": "seven", "extra": 1}"#,
        r#"{"device": "d"}"#,
        r#"{"id": 1.5}"#,
        r#"{"id": null}"#,
        r#"[1]"#,
        r#"{"id": 1,"#,
    ] {
        let mut with = rescuing(JSON_SCHEMA);
        let mut without = RecordBatchBuilder::new(&schema(JSON_SCHEMA));
        let a = with.append_json(record).expect_err("rejected with rescue");
        // The record without its unknown member fails the same way without rescue.
        let b = without
            .append_json(&record.replace(r#", "extra": 1"#, ""))
            .expect_err("rejected without rescue");
        assert_eq!(a, b, "{record}");
        assert!(with.is_empty());
        assert_eq!(with.finish().num_rows(), 0);
    }
}

#[test]
fn the_last_duplicate_member_wins_for_rescue_too() {
    let mut builder = rescuing(JSON_SCHEMA);
    builder
        .append_json(r#"{"id": 1, "i": "x", "i": 5, "u": 1, "u": 2}"#)
        .expect("record");
    let batch = builder.finish();
    assert_eq!(cell(&batch, "i", 0), json!(5));
    assert_eq!(cell(&batch, RESCUED_DATA_COLUMN, 0), json!(r#"{"u":2}"#));

    let mut builder = rescuing(JSON_SCHEMA);
    builder
        .append_json(r#"{"id": 1, "i": 5, "I": "x"}"#)
        .expect("record");
    let batch = builder.finish();
    assert_eq!(cell(&batch, "i", 0), Json::Null);
    assert_eq!(cell(&batch, RESCUED_DATA_COLUMN, 0), json!(r#"{"I":"x"}"#));
}

#[test]
fn without_rescue_an_unknown_json_member_still_fails_the_record() {
    let mut builder = RecordBatchBuilder::new(&schema(JSON_SCHEMA));
    let error = builder
        .append_json(r#"{"id": 1, "extra": 2}"#)
        .expect_err("unknown field");
    assert_eq!(error.to_string(), "record: unknown field `extra`");
    assert_eq!(builder.arrow_schema().fields().len(), 8);
}

/// `Flat { id = 1, device = 2 }`: a flat table (single-pass path).
fn flat_plan(schema: &TableSchema) -> ProtoPlan {
    let descriptor = message(
        "Flat",
        vec![
            scalar("id", 1, Type::Int64),
            scalar("device", 2, Type::String),
        ],
    );
    ProtoPlan::compile(&descriptor.encode_to_vec(), schema).expect("compiles")
}

const FLAT_SCHEMA: &str = "id BIGINT NOT NULL, device STRING";

/// Unknown fields 30 (varint, twice), 31 (fixed64), 32 (fixed32), 33 (bytes), a group 34.
fn with_unknown_fields(known: Enc) -> Enc {
    known
        .varint(30, u64::MAX)
        .fixed64(31, 7)
        .tag(34, 3)
        .varint(1, 5)
        .tag(34, 4)
        .fixed32(32, 4_000_000_000)
        .bytes(33, b"\x00\xffhi")
        .varint(30, 2)
}

const UNKNOWN_TEXT: &str =
    r#"{"30":[18446744073709551615,2],"31":7,"32":4000000000,"33":"AP9oaQ=="}"#;

#[test]
fn unknown_proto_fields_are_kept_by_number_on_the_flat_path() {
    let schema = schema(FLAT_SCHEMA);
    let plan = flat_plan(&schema);
    let mut builder = RecordBatchBuilder::with_rescued_data(&schema).expect("rescue");
    builder
        .append_proto(
            &plan,
            &with_unknown_fields(minimal(1).string(2, "d")).build(),
        )
        .expect("record");
    builder
        .append_proto(&plan, &minimal(2).build())
        .expect("record");
    let batch = builder.finish();
    assert_eq!(cell(&batch, "id", 0), json!(1));
    assert_eq!(cell(&batch, "device", 0), json!("d"));
    assert_eq!(cell(&batch, RESCUED_DATA_COLUMN, 0), json!(UNKNOWN_TEXT));
    assert_eq!(cell(&batch, RESCUED_DATA_COLUMN, 1), Json::Null);
}

#[test]
fn unknown_proto_fields_are_kept_by_number_on_the_value_tree_path() {
    let (schema, plan, _) = telemetry();
    let mut builder = RecordBatchBuilder::with_rescued_data(&schema).expect("rescue");
    // Field 9 inside `loc` (field 7) is unknown there: skipped, not rescued.
    let loc = Enc::new().double(1, 1.5).double(2, 2.5).varint(9, 1);
    let record = with_unknown_fields(minimal(3).message(7, loc)).build();
    builder.append_proto(&plan, &record).expect("record");
    let batch = builder.finish();
    assert_eq!(cell(&batch, "loc", 0), json!({"lat": 1.5, "lon": 2.5}));
    assert_eq!(cell(&batch, RESCUED_DATA_COLUMN, 0), json!(UNKNOWN_TEXT));
}

#[test]
fn a_rejected_proto_record_leaves_the_rescued_column_untouched() {
    let schema = schema(FLAT_SCHEMA);
    let plan = flat_plan(&schema);
    let (tree_schema, tree_plan, _) = telemetry();
    for (schema, plan) in [(&schema, &plan), (&tree_schema, &tree_plan)] {
        let mut builder = RecordBatchBuilder::with_rescued_data(schema).expect("rescue");
        let mut truncated = with_unknown_fields(minimal(1)).build();
        truncated.pop();
        builder
            .append_proto(plan, &truncated)
            .expect_err("truncated");
        // NOT NULL id missing, unknown fields present.
        builder
            .append_proto(plan, &with_unknown_fields(Enc::new()).build())
            .expect_err("id is NOT NULL");
        assert!(builder.is_empty());
        builder
            .append_proto(plan, &minimal(4).varint(40, 1).build())
            .expect("record");
        let batch = builder.finish();
        assert_eq!(batch.num_rows(), 1);
        assert_eq!(cell(&batch, RESCUED_DATA_COLUMN, 0), json!(r#"{"40":1}"#));
    }
}

#[test]
fn proto_records_without_rescue_skip_unknown_fields_as_before() {
    let schema = schema(FLAT_SCHEMA);
    let plan = flat_plan(&schema);
    let mut builder = RecordBatchBuilder::new(&schema);
    builder
        .append_proto(&plan, &with_unknown_fields(minimal(1)).build())
        .expect("record");
    let batch = builder.finish();
    assert_eq!(batch.num_columns(), 2);
    assert_eq!(rows(&batch), vec![json!({"id": 1, "device": null})]);
}

// ---- property tests ----

/// Any JSON value, nested a little.
fn json_value() -> impl Strategy<Value = Json> {
    let leaf = prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::from),
        any::<i64>().prop_map(Json::from),
        any::<u64>().prop_map(Json::from),
        (-1e12f64..1e12).prop_map(Json::from),
        "[ -~]{0,8}|\\PC{0,4}".prop_map(Json::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Json::Array),
            prop::collection::btree_map("[a-z]{1,4}", inner, 0..4)
                .prop_map(|m| Json::Object(m.into_iter().collect())),
        ]
    })
}

/// Member names that are no column of `JSON_SCHEMA` (the prefix `x_` keeps them apart).
fn extra_members() -> impl Strategy<Value = BTreeMap<String, Json>> {
    prop::collection::btree_map("x_[a-zA-Z0-9 é\"\\\\]{0,6}", json_value(), 0..5)
}

/// A record that fits `JSON_SCHEMA`.
fn fitting_record() -> impl Strategy<Value = serde_json::Map<String, Json>> {
    (
        any::<i64>(),
        prop::option::of("[ -~]{0,6}"),
        prop::option::of(any::<i8>()),
        prop::option::of(prop::collection::vec(any::<i32>(), 0..3)),
    )
        .prop_map(|(id, device, t, tags)| {
            let mut record = serde_json::Map::new();
            record.insert("id".into(), json!(id));
            if let Some(device) = device {
                record.insert("device".into(), json!(device));
            }
            if let Some(t) = t {
                record.insert("t".into(), json!(t));
            }
            if let Some(tags) = tags {
                record.insert("tags".into(), json!(tags));
            }
            record
        })
}

/// Unknown field numbers (the telemetry plan maps 1-24) and values of each wire type.
#[derive(Debug, Clone)]
enum Unknown {
    Varint(u32, u64),
    Fixed64(u32, u64),
    Fixed32(u32, u32),
    Bytes(u32, Vec<u8>),
}

fn unknown_field() -> impl Strategy<Value = Unknown> {
    let number = prop_oneof![25u32..40, 100u32..300, 5000u32..(1 << 29)];
    prop_oneof![
        (number.clone(), any::<u64>()).prop_map(|(n, v)| Unknown::Varint(n, v)),
        (number.clone(), any::<u64>()).prop_map(|(n, v)| Unknown::Fixed64(n, v)),
        (number.clone(), any::<u32>()).prop_map(|(n, v)| Unknown::Fixed32(n, v)),
        (number, prop::collection::vec(any::<u8>(), 0..12)).prop_map(|(n, v)| Unknown::Bytes(n, v)),
    ]
}

impl Unknown {
    fn encode(&self, enc: Enc) -> Enc {
        match self {
            Unknown::Varint(n, v) => enc.varint(*n, *v),
            Unknown::Fixed64(n, v) => enc.fixed64(*n, *v),
            Unknown::Fixed32(n, v) => enc.fixed32(*n, *v),
            Unknown::Bytes(n, v) => enc.bytes(*n, v),
        }
    }

    fn number_and_json(&self) -> (u32, Json) {
        match self {
            Unknown::Varint(n, v) | Unknown::Fixed64(n, v) => (*n, json!(v)),
            Unknown::Fixed32(n, v) => (*n, json!(v)),
            Unknown::Bytes(n, v) => (
                *n,
                json!(base64::engine::general_purpose::STANDARD.encode(v)),
            ),
        }
    }
}

/// The rescued object the fields should give: by number, arrays for repeats in wire order.
fn expected_object(fields: &[Unknown]) -> Option<Json> {
    let mut by_number: BTreeMap<String, Vec<Json>> = BTreeMap::new();
    for field in fields {
        let (number, value) = field.number_and_json();
        by_number.entry(number.to_string()).or_default().push(value);
    }
    if by_number.is_empty() {
        return None;
    }
    Some(Json::Object(
        by_number
            .into_iter()
            .map(|(k, mut v)| {
                (
                    k,
                    if v.len() == 1 {
                        v.remove(0)
                    } else {
                        Json::Array(v)
                    },
                )
            })
            .collect(),
    ))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_extra_json_members_come_back_exactly_and_columns_are_unchanged(
        base in fitting_record(),
        extra in extra_members(),
        extras_first in any::<bool>(),
    ) {
        let mut members: Vec<(String, Json)> = base.clone().into_iter().collect();
        let extras: Vec<(String, Json)> = extra.clone().into_iter().collect();
        if extras_first {
            members.splice(0..0, extras);
        } else {
            members.extend(extras);
        }
        // Written by hand: a serde_json map would sort the members.
        let record = format!(
            "{{{}}}",
            members
                .iter()
                .map(|(k, v)| format!("{}: {v}", Json::from(k.as_str())))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let mut with = rescuing(JSON_SCHEMA);
        with.append_json(&record).expect("record with extras is rescued");
        let mut without = RecordBatchBuilder::new(&schema(JSON_SCHEMA));
        without
            .append_json(&Json::Object(base).to_string())
            .expect("record without extras");
        let (plain, rescued) = split(&mut with);
        prop_assert_eq!(plain, rows(&without.finish()));
        // Exactly the members as written (the record is compact already), in record order.
        let expected = (!extra.is_empty()).then(|| {
            let members: Vec<String> = extra
                .iter()
                .map(|(k, v)| format!("{}:{v}", Json::from(k.as_str())))
                .collect();
            format!("{{{}}}", members.join(","))
        });
        prop_assert_eq!(rescued, vec![expected]);
    }

    #[test]
    fn random_unknown_proto_fields_come_back_by_number_and_columns_are_unchanged(
        records in prop::collection::vec(
            (any::<i64>(), prop::collection::vec(unknown_field(), 0..6), any::<bool>()),
            1..5,
        ),
    ) {
        let (schema, plan, mut without) = telemetry();
        let mut with = RecordBatchBuilder::with_rescued_data(&schema).expect("rescue");
        let flat_schema = self::schema(FLAT_SCHEMA);
        let flat = flat_plan(&flat_schema);
        let mut flat_with = RecordBatchBuilder::with_rescued_data(&flat_schema).expect("rescue");
        let mut flat_without = RecordBatchBuilder::new(&flat_schema);
        let mut expected = Vec::new();
        for (id, unknown, known_last) in &records {
            let mut enc = Enc::new();
            if !known_last {
                enc = enc.int(1, *id).string(2, "dev");
            }
            for field in unknown {
                enc = field.encode(enc);
            }
            if *known_last {
                enc = enc.int(1, *id).string(2, "dev");
            }
            let bytes = enc.build();
            with.append_proto(&plan, &bytes).expect("tree path");
            without.append_proto(&plan, &bytes).expect("tree path without rescue");
            flat_with.append_proto(&flat, &bytes).expect("flat path");
            flat_without.append_proto(&flat, &bytes).expect("flat path without rescue");
            expected.push(expected_object(unknown));
        }
        let parsed = |texts: Vec<Option<String>>| -> Vec<Option<Json>> {
            texts
                .iter()
                .map(|t| t.as_ref().map(|t| serde_json::from_str(t).expect("rescued text is JSON")))
                .collect()
        };
        let (plain, rescued) = split(&mut with);
        prop_assert_eq!(plain, rows(&without.finish()));
        prop_assert_eq!(parsed(rescued), expected.clone());
        let (plain, rescued) = split(&mut flat_with);
        prop_assert_eq!(plain, rows(&flat_without.finish()));
        prop_assert_eq!(parsed(rescued), expected);
    }
}
