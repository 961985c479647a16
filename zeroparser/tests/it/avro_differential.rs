//! Avro datums decoded by zeroparser against the `apache-avro` crate: random values of a
//! writer schema that covers every type the compile maps (nullable unions, logical types,
//! enums, fixed, decimals, uuids, arrays, maps, nested records) are encoded by apache-avro
//! and must decode to the same values; the same datums with bytes changed, cut or appended
//! must be accepted or refused as apache-avro accepts (decodes, the value validates, every
//! byte used) or refuses them, and when both accept the values agree.
//!
//! Intended differences, where only zeroparser refuses: a datum apache-avro decodes only by
//! reading a missing union index or boolean as `null` at the end of the input (zeroparser:
//! truncated), a map key that repeats (apache-avro keeps the last), a `uuid` string not in
//! the 8-4-4-4-12 form, a decimal wider than 128 bits, and a value outside its column's
//! range (a `timestamp-millis` whose microseconds overflow 64 bits).

// apache-avro 0.22 marks its datum functions deprecated in favour of its datum reader and
// writer types; the functions are the same encoding and keep the oracle short.
#![allow(deprecated)]

use std::collections::HashMap;

use apache_avro::types::Value as Avro;
use apache_avro::{Decimal, Schema, Uuid};
use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Float32Type, Float64Type, Int32Type, Int64Type, TimestampMicrosecondType,
};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::DataType;
use proptest::prelude::*;
use sluice_zeroparser::{AvroPlan, DecodeErrorKind, RecordBatchBuilder, TableSchema};

const TABLE: &str = "id BIGINT NOT NULL, i INT, flag BOOLEAN, f FLOAT, fd DOUBLE, d DOUBLE, \
    s STRING, u STRING, uf STRING, e STRING, dec STRING, decf DOUBLE, b BINARY, fx BINARY, \
    day DATE, ts TIMESTAMP, tsm TIMESTAMP, lts TIMESTAMP_NTZ, tm BIGINT, \
    tags ARRAY<STRING>, nums ARRAY<BIGINT NOT NULL>, attrs MAP<STRING, BIGINT>, \
    pt STRUCT<x: DOUBLE, y: DOUBLE, label: STRING>, \
    pts ARRAY<STRUCT<x: DOUBLE, tags: ARRAY<STRING>>>";

const SCHEMA: &str = r#"{"type":"record","name":"Row","namespace":"t","fields":[
  {"name":"id","type":"long"},
  {"name":"i","type":["null","int"]},
  {"name":"flag","type":["boolean","null"]},
  {"name":"f","type":"float"},
  {"name":"fd","type":"float"},
  {"name":"d","type":["null","double"]},
  {"name":"s","type":["null","string"]},
  {"name":"u","type":{"type":"string","logicalType":"uuid"}},
  {"name":"uf","type":["null",{"type":"fixed","name":"U16","size":16,"logicalType":"uuid"}]},
  {"name":"e","type":{"type":"enum","name":"Color","symbols":["RED","GREEN","BLUE"]}},
  {"name":"dec","type":{"type":"bytes","logicalType":"decimal","precision":20,"scale":3}},
  {"name":"decf","type":{"type":"fixed","name":"D8","size":8,"logicalType":"decimal","precision":18,"scale":2}},
  {"name":"b","type":"bytes"},
  {"name":"fx","type":{"type":"fixed","name":"F3","size":3}},
  {"name":"day","type":{"type":"int","logicalType":"date"}},
  {"name":"ts","type":["null",{"type":"long","logicalType":"timestamp-micros"}]},
  {"name":"tsm","type":{"type":"long","logicalType":"timestamp-millis"}},
  {"name":"lts","type":{"type":"long","logicalType":"local-timestamp-micros"}},
  {"name":"tm","type":{"type":"long","logicalType":"time-micros"}},
  {"name":"tags","type":["null",{"type":"array","items":["null","string"]}]},
  {"name":"nums","type":{"type":"array","items":"long"}},
  {"name":"attrs","type":["null",{"type":"map","values":["null","long"]}]},
  {"name":"pt","type":["null",{"type":"record","name":"Point","fields":[
      {"name":"x","type":"double"},{"name":"y","type":"double"},
      {"name":"label","type":["null","string"]}]}]},
  {"name":"pts","type":{"type":"array","items":{"type":"record","name":"P2","fields":[
      {"name":"x","type":"double"},{"name":"tags","type":{"type":"array","items":"string"}}]}}}
]}"#;

/// A value in a form both sides map to: floats by bits, maps sorted by key.
#[derive(Debug, Clone, PartialEq)]
enum V {
    Null,
    Bool(bool),
    Int(i64),
    Float(u64),
    Str(String),
    Bytes(Vec<u8>),
    List(Vec<V>),
    Map(Vec<(String, V)>),
    Record(Vec<V>),
}

fn float(v: f64) -> V {
    V::Float(if v.is_nan() {
        f64::NAN.to_bits()
    } else {
        v.to_bits()
    })
}

fn decimal_text(bytes: &[u8], scale: usize) -> Option<String> {
    if bytes.len() > 16 {
        return None;
    }
    let negative = bytes.first().is_some_and(|b| b & 0x80 != 0);
    let mut wide = [if negative { 0xFF } else { 0 }; 16];
    wide[16 - bytes.len()..].copy_from_slice(bytes);
    let value = i128::from_be_bytes(wide);
    let scaled = 10i128.pow(scale as u32);
    let (int, frac) = (value / scaled, (value % scaled).unsigned_abs());
    let sign = if value < 0 && int == 0 { "-" } else { "" };
    Some(format!("{sign}{int}.{frac:0width$}", width = scale))
}

/// What apache-avro's value of column `name` must become.
fn expected(name: &str, value: &Avro) -> V {
    match value {
        Avro::Null => V::Null,
        Avro::Union(_, inner) => expected(name, inner),
        Avro::Boolean(b) => V::Bool(*b),
        Avro::Int(i) | Avro::Date(i) => V::Int((*i).into()),
        Avro::Long(l)
        | Avro::TimestampMicros(l)
        | Avro::LocalTimestampMicros(l)
        | Avro::TimeMicros(l) => V::Int(*l),
        Avro::TimestampMillis(l) => V::Int(l * 1000),
        Avro::Float(f) => float(f64::from(*f)),
        Avro::Double(d) => float(*d),
        Avro::String(s) | Avro::Enum(_, s) => V::Str(s.clone()),
        Avro::Uuid(u) => V::Str(u.hyphenated().to_string()),
        Avro::Bytes(b) | Avro::Fixed(_, b) => V::Bytes(b.clone()),
        Avro::Decimal(d) => {
            let bytes = <Vec<u8>>::try_from(d).expect("decimal bytes");
            let (scale, double) = if name == "dec" { (3, false) } else { (2, true) };
            let text = decimal_text(&bytes, scale).expect("decimal within 128 bits");
            if double {
                float(text.parse::<f64>().expect("number"))
            } else {
                V::Str(text)
            }
        }
        Avro::Array(items) => V::List(items.iter().map(|v| expected(name, v)).collect()),
        Avro::Map(entries) => {
            let mut entries: Vec<(String, V)> = entries
                .iter()
                .map(|(k, v)| (k.clone(), expected(name, v)))
                .collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            V::Map(entries)
        }
        Avro::Record(fields) => V::Record(fields.iter().map(|(n, v)| expected(n, v)).collect()),
        other => panic!("value {other:?} not in the test schema"),
    }
}

/// Row `row` of `array` as a [`V`].
fn actual(array: &ArrayRef, row: usize) -> V {
    if array.is_null(row) {
        return V::Null;
    }
    match array.data_type() {
        DataType::Boolean => V::Bool(array.as_boolean().value(row)),
        DataType::Int32 => V::Int(array.as_primitive::<Int32Type>().value(row).into()),
        DataType::Int64 => V::Int(array.as_primitive::<Int64Type>().value(row)),
        DataType::Date32 => V::Int(array.as_primitive::<Date32Type>().value(row).into()),
        DataType::Timestamp(..) => {
            V::Int(array.as_primitive::<TimestampMicrosecondType>().value(row))
        }
        DataType::Float32 => float(f64::from(array.as_primitive::<Float32Type>().value(row))),
        DataType::Float64 => float(array.as_primitive::<Float64Type>().value(row)),
        DataType::Utf8 => V::Str(array.as_string::<i32>().value(row).to_owned()),
        DataType::Binary => V::Bytes(array.as_binary::<i32>().value(row).to_vec()),
        DataType::List(_) => {
            let items = array.as_list::<i32>().value(row);
            V::List((0..items.len()).map(|i| actual(&items, i)).collect())
        }
        DataType::Map(..) => {
            let entries = array.as_map().value(row);
            let keys = entries.column(0).clone();
            let values = entries.column(1).clone();
            let mut out: Vec<(String, V)> = (0..entries.len())
                .map(|i| match actual(&keys, i) {
                    V::Str(k) => (k, actual(&values, i)),
                    other => panic!("map key {other:?}"),
                })
                .collect();
            out.sort_by(|a, b| a.0.cmp(&b.0));
            V::Map(out)
        }
        DataType::Struct(_) => {
            let fields = array.as_struct();
            V::Record(fields.columns().iter().map(|c| actual(c, row)).collect())
        }
        other => panic!("column type {other} not in the test table"),
    }
}

fn row(batch: &RecordBatch, index: usize) -> Vec<V> {
    batch.columns().iter().map(|c| actual(c, index)).collect()
}

/// apache-avro's verdict: the value when it decodes, validates and uses every byte.
fn apache(schema: &Schema, datum: &[u8]) -> Option<Avro> {
    let mut reader = datum;
    let value = apache_avro::from_avro_datum(schema, &mut reader, None).ok()?;
    (reader.is_empty() && value.validate(schema)).then_some(value)
}

/// The table's columns of apache-avro's record value, in writer order (= column order).
fn expected_row(value: &Avro) -> Vec<V> {
    match value {
        Avro::Record(fields) => fields.iter().map(|(n, v)| expected(n, v)).collect(),
        other => panic!("not a record: {other:?}"),
    }
}

fn nullable<S: Strategy<Value = Avro> + 'static>(
    inner: S,
    null_first: bool,
) -> BoxedStrategy<Avro> {
    let (null, value) = if null_first { (0, 1) } else { (1, 0) };
    prop_oneof![
        1 => Just(Avro::Union(null, Box::new(Avro::Null))),
        3 => inner.prop_map(move |v| Avro::Union(value, Box::new(v))),
    ]
    .boxed()
}

fn text() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 é✓]{0,12}"
}

fn decimal(len: std::ops::RangeInclusive<usize>) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), len)
}

fn record() -> impl Strategy<Value = Avro> {
    let finite = -1e12f64..1e12;
    let scalars = (
        any::<i64>(),
        nullable(any::<i32>().prop_map(Avro::Int), true),
        nullable(any::<bool>().prop_map(Avro::Boolean), false),
        -1e6f32..1e6,
        -1e6f32..1e6,
        nullable(finite.clone().prop_map(Avro::Double), true),
        nullable(text().prop_map(Avro::String), true),
        any::<u128>(),
        nullable(
            any::<[u8; 16]>().prop_map(|b| Avro::Fixed(16, b.to_vec())),
            true,
        ),
        0u32..3,
        decimal(1..=9),
        any::<i64>(),
    );
    let more = (
        prop::collection::vec(any::<u8>(), 0..8),
        any::<[u8; 3]>(),
        any::<i32>(),
        nullable(any::<i64>().prop_map(Avro::TimestampMicros), true),
        -(i64::MAX / 1000)..(i64::MAX / 1000),
        any::<i64>(),
        any::<i64>(),
    );
    let nested = (
        nullable(
            prop::collection::vec(nullable(text().prop_map(Avro::String), true), 0..4)
                .prop_map(Avro::Array),
            true,
        ),
        prop::collection::vec(any::<i64>().prop_map(Avro::Long), 0..5).prop_map(Avro::Array),
        nullable(
            prop::collection::hash_map(
                "[a-z]{1,4}",
                nullable(any::<i64>().prop_map(Avro::Long), true),
                0..4,
            )
            .prop_map(Avro::Map),
            true,
        ),
        nullable(
            (
                finite.clone(),
                finite.clone(),
                nullable(text().prop_map(Avro::String), true),
            )
                .prop_map(|(x, y, label)| {
                    Avro::Record(vec![
                        ("x".into(), Avro::Double(x)),
                        ("y".into(), Avro::Double(y)),
                        ("label".into(), label),
                    ])
                }),
            true,
        ),
        prop::collection::vec(
            (finite, prop::collection::vec(text(), 0..3)).prop_map(|(x, tags)| {
                Avro::Record(vec![
                    ("x".into(), Avro::Double(x)),
                    (
                        "tags".into(),
                        Avro::Array(tags.into_iter().map(Avro::String).collect()),
                    ),
                ])
            }),
            0..3,
        )
        .prop_map(Avro::Array),
    );
    (scalars, more, nested).prop_map(|(a, b, c)| {
        let symbols = ["RED", "GREEN", "BLUE"];
        let fields: Vec<(&str, Avro)> = vec![
            ("id", Avro::Long(a.0)),
            ("i", a.1),
            ("flag", a.2),
            ("f", Avro::Float(a.3)),
            ("fd", Avro::Float(a.4)),
            ("d", a.5),
            ("s", a.6),
            ("u", Avro::Uuid(Uuid::from_u128(a.7))),
            ("uf", a.8),
            ("e", Avro::Enum(a.9, symbols[a.9 as usize].into())),
            ("dec", Avro::Decimal(Decimal::from(a.10))),
            ("decf", Avro::Decimal(Decimal::from(a.11.to_be_bytes()))),
            ("b", Avro::Bytes(b.0)),
            ("fx", Avro::Fixed(3, b.1.to_vec())),
            ("day", Avro::Date(b.2)),
            ("ts", b.3),
            ("tsm", Avro::TimestampMillis(b.4)),
            ("lts", Avro::LocalTimestampMicros(b.5)),
            ("tm", Avro::TimeMicros(b.6)),
            ("tags", c.0),
            ("nums", c.1),
            ("attrs", c.2),
            ("pt", c.3),
            ("pts", c.4),
        ];
        Avro::Record(fields.into_iter().map(|(n, v)| (n.to_owned(), v)).collect())
    })
}

/// A change to a valid datum.
#[derive(Debug, Clone)]
enum Change {
    Set(usize, u8),
    Cut(usize),
    Append(u8),
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(at, b)| Change::Set(at, b)),
        any::<usize>().prop_map(Change::Cut),
        any::<u8>().prop_map(Change::Append),
    ]
}

fn apply(datum: &[u8], change: &Change) -> Vec<u8> {
    let mut out = datum.to_vec();
    match change {
        Change::Set(at, b) => {
            if !out.is_empty() {
                let at = at % out.len();
                out[at] = *b;
            }
        }
        Change::Cut(at) => out.truncate(at % datum.len().max(1)),
        Change::Append(b) => out.push(*b),
    }
    out
}

struct Setup {
    schema: Schema,
    plan: AvroPlan,
    table: TableSchema,
}

fn setup() -> Setup {
    let table = TableSchema::parse(TABLE).expect("table");
    Setup {
        schema: Schema::parse_str(SCHEMA).expect("avro schema"),
        plan: AvroPlan::compile(SCHEMA, &table, false).expect("plan"),
        table,
    }
}

/// Kinds only zeroparser refuses (see the module doc).
fn intended_difference(kind: &DecodeErrorKind) -> bool {
    matches!(
        kind,
        DecodeErrorKind::Truncated
            | DecodeErrorKind::RepeatedMapKey { .. }
            | DecodeErrorKind::InvalidUuid { .. }
            | DecodeErrorKind::DecimalTooWide { .. }
            | DecodeErrorKind::OutOfRange { .. }
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn apache_avro_datums_decode_to_the_same_values(records in prop::collection::vec(record(), 1..6)) {
        let s = setup();
        let mut builder = RecordBatchBuilder::new(&s.table);
        let mut expected_rows = Vec::new();
        for value in &records {
            let datum = apache_avro::to_avro_datum(&s.schema, value.clone()).expect("encode");
            let decoded = apache(&s.schema, &datum).expect("apache-avro reads its own datum");
            expected_rows.push(expected_row(&decoded));
            builder.append_avro(&s.plan, &datum).expect("zeroparser reads the datum");
        }
        let batch = builder.finish();
        prop_assert_eq!(batch.num_rows(), records.len());
        for (i, want) in expected_rows.iter().enumerate() {
            prop_assert_eq!(&row(&batch, i), want);
        }
    }

    #[test]
    fn changed_datums_are_accepted_and_refused_alike(
        value in record(),
        changes in prop::collection::vec(change(), 1..4),
    ) {
        let s = setup();
        let mut datum = apache_avro::to_avro_datum(&s.schema, value).expect("encode");
        for c in &changes {
            datum = apply(&datum, c);
        }
        let mut builder = RecordBatchBuilder::new(&s.table);
        let ours = builder.append_avro(&s.plan, &datum);
        match (apache(&s.schema, &datum), ours) {
            (Some(value), Ok(())) => {
                // A changed byte can turn a uuid string's hex digit upper case: both store
                // it lower case.
                prop_assert_eq!(row(&builder.finish(), 0), expected_row(&value));
            }
            (None, Ok(())) => prop_assert!(false, "zeroparser accepted a datum apache-avro refuses"),
            (Some(_), Err(e)) => prop_assert!(intended_difference(e.kind()), "only zeroparser refused: {e}"),
            (None, Err(_)) => prop_assert_eq!(builder.finish().num_rows(), 0),
        }
    }
}

#[test]
fn a_union_index_out_of_range_and_a_truncated_datum_are_refused_by_both() {
    let s = setup();
    let mut builder = RecordBatchBuilder::new(&s.table);
    // id = 1, then union index 5 for `i` (zig-zag 10).
    let datum = [2u8, 10];
    assert!(apache(&s.schema, &datum).is_none());
    let error = builder.append_avro(&s.plan, &datum).expect_err("index 5");
    assert_eq!(
        error.to_string(),
        "field `i` at byte 1: union branch index 5 is out of range (the union has 2 branches)"
    );
    let error = builder.append_avro(&s.plan, &[2u8]).expect_err("truncated");
    assert_eq!(
        error.to_string(),
        "field `i` at byte 1: record is truncated"
    );
    assert_eq!(builder.finish().num_rows(), 0);
}

#[test]
fn a_repeated_map_key_is_refused_and_the_columns_are_untouched() {
    let table = TableSchema::parse("m MAP<STRING, BIGINT>").expect("table");
    let json = r#"{"type":"record","name":"R","fields":[{"name":"m","type":{"type":"map","values":"long"}}]}"#;
    let plan = AvroPlan::compile(json, &table, false).expect("plan");
    let mut builder = RecordBatchBuilder::new(&table);
    // One block of 2 entries: "a" → 1, "a" → 2, then the end.
    let datum = [4u8, 2, b'a', 2, 2, b'a', 4, 0];
    let error = builder.append_avro(&plan, &datum).expect_err("repeat");
    assert_eq!(
        error.to_string(),
        "field `m` at byte 4: map key \"a\" repeats"
    );
    let good = [4u8, 2, b'a', 2, 2, b'b', 4, 0];
    builder.append_avro(&plan, &good).expect("distinct keys");
    let batch = builder.finish();
    assert_eq!(batch.num_rows(), 1);
    assert_eq!(
        actual(batch.column(0), 0),
        V::Map(vec![("a".into(), V::Int(1)), ("b".into(), V::Int(2))])
    );
}

#[test]
fn a_uuid_is_stored_lower_case_whichever_case_and_form_it_came_in() {
    let table = TableSchema::parse("u STRING, f STRING").expect("table");
    let json = r#"{"type":"record","name":"R","fields":[
        {"name":"u","type":{"type":"string","logicalType":"uuid"}},
        {"name":"f","type":{"type":"fixed","name":"U16","size":16,"logicalType":"uuid"}}]}"#;
    let plan = AvroPlan::compile(json, &table, false).expect("plan");
    let mut builder = RecordBatchBuilder::new(&table);
    let upper = "0000000B-ABCD-4EF0-8000-00000000000A";
    // A string of 36 bytes (zig-zag length 72), then the same uuid as 16 bytes.
    let mut datum = vec![72u8];
    datum.extend_from_slice(upper.as_bytes());
    datum.extend_from_slice(&0x0000_000B_ABCD_4EF0_8000_0000_0000_000Au128.to_be_bytes());
    builder
        .append_avro(&plan, &datum)
        .expect("a uuid in upper case is a uuid");
    let batch = builder.finish();
    let lower = upper.to_ascii_lowercase();
    assert_eq!(actual(batch.column(0), 0), V::Str(lower.clone()));
    assert_eq!(actual(batch.column(1), 0), V::Str(lower));
}

#[test]
fn narrow_integer_columns_are_range_checked() {
    let table = TableSchema::parse("t TINYINT, s SMALLINT").expect("table");
    let json = r#"{"type":"record","name":"R","fields":[{"name":"t","type":"int"},{"name":"s","type":"int"}]}"#;
    let plan = AvroPlan::compile(json, &table, false).expect("plan");
    let mut builder = RecordBatchBuilder::new(&table);
    let value = Avro::Record(vec![
        ("t".into(), Avro::Int(300)),
        ("s".into(), Avro::Int(3)),
    ]);
    let schema = Schema::parse_str(json).expect("schema");
    let datum = apache_avro::to_avro_datum(&schema, value).expect("encode");
    let error = builder.append_avro(&plan, &datum).expect_err("range");
    assert_eq!(
        error.to_string(),
        "field `t` at byte 0: value 300 is out of range for TINYINT"
    );
}

#[test]
fn rescued_fields_keep_their_values_as_json() {
    let table = TableSchema::parse("id BIGINT").expect("table");
    let json = r#"{"type":"record","name":"R","fields":[
        {"name":"id","type":"long"},
        {"name":"extra","type":{"type":"record","name":"X","fields":[
            {"name":"n","type":["null","int"]},{"name":"b","type":"bytes"},
            {"name":"m","type":{"type":"map","values":"string"}}]}}]}"#;
    let schema = Schema::parse_str(json).expect("schema");
    let plan = AvroPlan::compile(json, &table, true).expect("plan");
    let mut builder = RecordBatchBuilder::with_rescued_data(&table).expect("builder");
    let value = Avro::Record(vec![
        ("id".into(), Avro::Long(4)),
        (
            "extra".into(),
            Avro::Record(vec![
                ("n".into(), Avro::Union(1, Box::new(Avro::Int(-3)))),
                ("b".into(), Avro::Bytes(vec![1, 2, 3])),
                (
                    "m".into(),
                    Avro::Map(HashMap::from([(
                        "k".to_string(),
                        Avro::String("v\"".into()),
                    )])),
                ),
            ]),
        ),
    ]);
    let datum = apache_avro::to_avro_datum(&schema, value).expect("encode");
    builder.append_avro(&plan, &datum).expect("append");
    let batch = builder.finish();
    assert_eq!(actual(batch.column(0), 0), V::Int(4));
    assert_eq!(
        actual(batch.column(1), 0),
        V::Str(r#"{"extra":{"n":-3,"b":"AQID","m":{"k":"v\""}}}"#.into())
    );
    // The same plan needs the rescued-data column.
    let error = RecordBatchBuilder::new(&table)
        .append_avro(&plan, &datum)
        .expect_err("no rescue column");
    assert_eq!(error.kind(), &DecodeErrorKind::PlanSchemaMismatch);
}
