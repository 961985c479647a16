//! JSON records: every column type, the accepted text forms, and every JSON error kind.

use serde_json::{json, Value as Json};
use sluice_zeroparser::{DecodeError, DecodeErrorKind, RecordBatchBuilder, TableSchema};

use crate::support::rows;

const SCHEMA: &str = "id BIGINT NOT NULL, device STRING, ts TIMESTAMP, temp DOUBLE, \
    tags ARRAY<STRING>, attrs MAP<STRING,STRING>, loc STRUCT<lat: DOUBLE, lon: DOUBLE NOT NULL>, \
    d DATE, b BINARY, v VARIANT, n TIMESTAMP_NTZ, t TINYINT, s SMALLINT, i INT, f FLOAT, \
    ok BOOLEAN, strict ARRAY<INT NOT NULL>, ids MAP<BIGINT, BOOLEAN NOT NULL>, flags MAP<BOOLEAN, INT>";

fn builder() -> RecordBatchBuilder {
    RecordBatchBuilder::new(&TableSchema::parse(SCHEMA).expect("schema parses"))
}

/// Decodes one record and returns its row.
fn row(record: &str) -> Json {
    let mut builder = builder();
    builder.append_json(record).expect("record decodes");
    rows(&builder.finish()).remove(0)
}

/// Decodes one record that must fail, and checks the builder stayed empty.
fn error(record: &str) -> DecodeError {
    let mut builder = builder();
    let error = builder.append_json(record).expect_err("record is bad");
    assert!(builder.is_empty());
    error
}

#[test]
fn a_json_record_fills_every_column_type() {
    let row = row(r#"{
        "id": 1, "device": "dev-é", "ts": "2024-01-01T00:00:00.000001Z", "temp": 21.5,
        "tags": ["a", null, "c\n"], "attrs": {"k": "v"}, "loc": {"lat": 1.5, "lon": -2},
        "d": "1970-01-11", "b": "AAH/", "v": {"nested": [1, {"x": null}], "s": " a b "},
        "n": "1970-01-01 00:00:01.5", "t": -128, "s": 32767, "i": "-5", "f": 0.5, "ok": true,
        "strict": [1, 2], "ids": {"10": true, "-3": false}, "flags": {"true": 1}
    }"#);
    assert_eq!(
        row,
        json!({
            "id": 1, "device": "dev-é", "ts": 1_704_067_200_000_001i64, "temp": 21.5,
            "tags": ["a", null, "c\n"], "attrs": [["k", "v"]], "loc": {"lat": 1.5, "lon": -2.0},
            "d": 10, "b": "AAH/", "v": "{\"nested\":[1,{\"x\":null}],\"s\":\" a b \"}",
            "n": 1_500_000, "t": -128, "s": 32767, "i": -5, "f": 0.5, "ok": true,
            "strict": [1, 2], "ids": [[10, true], [-3, false]], "flags": [[true, 1]]
        })
    );
}

#[test]
fn absent_keys_and_nulls_are_null() {
    let row = row(r#"{"id": 1, "device": null, "loc": null, "tags": null}"#);
    assert_eq!(row["device"], Json::Null);
    assert_eq!(row["loc"], Json::Null);
    assert_eq!(row["tags"], Json::Null);
    assert_eq!(row["attrs"], Json::Null);
    assert_eq!(row["v"], Json::Null);
}

#[test]
fn keys_match_columns_exactly_or_ignoring_case() {
    let row = row(r#"{"ID": 5, "Device": "x", "LOC": {"LAT": 1, "lon": 2}}"#);
    assert_eq!(row["id"], json!(5));
    assert_eq!(row["device"], json!("x"));
    assert_eq!(row["loc"], json!({"lat": 1.0, "lon": 2.0}));
}

#[test]
fn a_repeated_key_keeps_the_last_value() {
    assert_eq!(row(r#"{"id": 1, "id": 2}"#)["id"], json!(2));
    assert_eq!(
        row(r#"{"id": 1, "attrs": {"a": "1", "b": "2", "a": "3"}}"#)["attrs"],
        json!([["a", "3"], ["b", "2"]])
    );
}

#[test]
fn a_negative_decimal_with_more_digits_than_a_u64_holds_keeps_its_sign() {
    // More than 19 significant digits: the one-pass scanner hands such a decimal to
    // serde_json's own parse, which once got the sign as well and negated it twice.
    let mut builder = builder();
    for record in [
        r#"{"id": 1, "temp": -3.14159265358979323846}"#,
        r#"{"id": 2, "temp": -0.20000000000000000000, "f": -1.00000000000000000001}"#,
    ] {
        builder.append_json(record).expect("record decodes");
    }
    assert_eq!(builder.json_records_via_value_tree(), 0, "one pass");
    let rows = rows(&builder.finish());
    assert_eq!(rows[0]["temp"], json!(-std::f64::consts::PI));
    assert_eq!(rows[1]["temp"], json!(-0.2));
    assert_eq!(rows[1]["f"], json!(-1.0));
}

#[test]
fn map_keys_that_print_alike_but_differ_are_both_kept_and_a_repeat_of_one_is_found() {
    // The two keys differ in one bit of their first 8 bytes and the one bit of their last 8
    // that the key print folds onto it: one print, two keys (arrow/leaf.rs tests it).
    let (a, b) = ("abcdefghijklmnop", "aBcdefghijklmnnp");
    let mut builder = builder();
    let distinct = format!(r#"{{"id": 1, "attrs": {{"{a}": "1", "{b}": "2"}}}}"#);
    builder.append_json(&distinct).expect("record decodes");
    assert_eq!(builder.json_records_via_value_tree(), 0, "one pass");
    let repeated = format!(r#"{{"id": 2, "attrs": {{"{a}": "1", "{b}": "2", "{a}": "3"}}}}"#);
    builder.append_json(&repeated).expect("record decodes");
    assert_eq!(
        builder.json_records_via_value_tree(),
        1,
        "the repeat is found"
    );
    let rows = rows(&builder.finish());
    assert_eq!(rows[0]["attrs"], json!([[a, "1"], [b, "2"]]));
    assert_eq!(rows[1]["attrs"], json!([[a, "3"], [b, "2"]]));
}

#[test]
fn a_repeated_array_or_object_member_replaces_the_earlier_one_in_one_pass() {
    let mut builder = builder();
    let records = [
        r#"{"id": 1, "tags": ["a", "b"], "tags": ["c"], "attrs": {"k": "1"}, "attrs": {}}"#,
        r#"{"id": 2, "tags": [], "tags": null, "attrs": {"k": "1", "j": "2"}, "attrs": null}"#,
        r#"{"id": 3, "tags": null, "tags": ["d"], "attrs": null, "attrs": {"m": "3"}}"#,
        r#"{"id": 4, "loc": {"lat": 1, "lon": 2}, "loc": {"lon": 3}, "strict": [1], "strict": []}"#,
    ];
    for record in records {
        builder.append_json(record).expect("record decodes");
    }
    assert_eq!(builder.json_records_via_value_tree(), 0, "one pass");
    let rows = rows(&builder.finish());
    let pick = |row: &Json, key: &str| row[key].clone();
    assert_eq!(pick(&rows[0], "tags"), json!(["c"]));
    assert_eq!(pick(&rows[0], "attrs"), json!([]));
    assert_eq!(pick(&rows[1], "tags"), Json::Null);
    assert_eq!(pick(&rows[1], "attrs"), Json::Null);
    assert_eq!(pick(&rows[2], "tags"), json!(["d"]));
    assert_eq!(pick(&rows[2], "attrs"), json!([["m", "3"]]));
    assert_eq!(pick(&rows[3], "loc"), json!({"lat": null, "lon": 3.0}));
    assert_eq!(pick(&rows[3], "strict"), json!([]));
}

#[test]
fn integers_may_be_strings_or_integral_numbers_and_are_range_checked() {
    assert_eq!(
        row(r#"{"id": "9223372036854775807"}"#)["id"],
        json!(i64::MAX)
    );
    assert_eq!(row(r#"{"id": 1, "t": 3.0, "i": 1e3}"#)["i"], json!(1000));
    let error = error(r#"{"id": 1, "t": 300}"#);
    assert_eq!(
        error.kind(),
        &DecodeErrorKind::OutOfRange {
            value: "300".into(),
            target: "TINYINT"
        }
    );
    assert_eq!(
        error.to_string(),
        "field `t`: value 300 is out of range for TINYINT"
    );
    let error = self::error(r#"{"id": 18446744073709551615}"#);
    assert!(matches!(
        error.kind(),
        DecodeErrorKind::OutOfRange {
            target: "BIGINT",
            ..
        }
    ));
    let error = self::error(r#"{"id": "12a"}"#);
    assert!(matches!(
        error.kind(),
        DecodeErrorKind::JsonWrongType {
            expected: "integer",
            ..
        }
    ));
    let error = self::error(r#"{"id": 1.5}"#);
    assert!(matches!(
        error.kind(),
        DecodeErrorKind::JsonWrongType {
            expected: "integer",
            ..
        }
    ));
}

#[test]
fn floats_accept_numbers_numeric_strings_nan_and_infinity() {
    let row = row(r#"{"id": 1, "temp": "NaN", "f": "-Infinity"}"#);
    assert_eq!(row["temp"], json!("NaN"));
    assert_eq!(row["f"], json!("-inf"));
    assert_eq!(
        self::row(r#"{"id": 1, "temp": "Infinity"}"#)["temp"],
        json!("inf")
    );
    assert_eq!(self::row(r#"{"id": 1, "temp": "2.5"}"#)["temp"], json!(2.5));
    assert_eq!(self::row(r#"{"id": 1, "temp": 7}"#)["temp"], json!(7.0));
    let error = error(r#"{"id": 1, "f": 1e300}"#);
    assert!(matches!(
        error.kind(),
        DecodeErrorKind::OutOfRange {
            target: "FLOAT",
            ..
        }
    ));
    let error = self::error(r#"{"id": 1, "temp": "inf"}"#);
    assert!(matches!(
        error.kind(),
        DecodeErrorKind::JsonWrongType { .. }
    ));
}

#[test]
fn binary_accepts_standard_and_url_safe_base64_padded_or_not() {
    for text in ["+/8=", "+/8", "-_8=", "-_8"] {
        let record = format!(r#"{{"id": 1, "b": "{text}"}}"#);
        assert_eq!(row(&record)["b"], json!("+/8="), "{text}");
    }
    let error = error(r#"{"id": 1, "b": "a*b"}"#);
    assert!(matches!(
        error.kind(),
        DecodeErrorKind::InvalidBase64 { .. }
    ));
    assert_eq!(error.path().to_string(), "b");
}

#[test]
fn dates_and_timestamps_accept_numbers_and_text() {
    let row = row(r#"{"id": 1, "d": -1, "ts": 5, "n": "1970-01-01T00:00:00.000007"}"#);
    assert_eq!(row["d"], json!(-1));
    assert_eq!(row["ts"], json!(5));
    assert_eq!(row["n"], json!(7));
    assert_eq!(
        self::row(r#"{"id": 1, "ts": "1970-01-01T01:00:00+01:00"}"#)["ts"],
        json!(0)
    );
    let error = error(r#"{"id": 1, "d": "01/02/2024"}"#);
    assert!(matches!(error.kind(), DecodeErrorKind::InvalidDate { .. }));
    let error = self::error(r#"{"id": 1, "ts": "2024-01-01 00:00:00"}"#);
    assert!(matches!(
        error.kind(),
        DecodeErrorKind::InvalidTimestamp { .. }
    ));
    let error = self::error(r#"{"id": 1, "n": "2024-01-01T00:00:00Z"}"#);
    assert!(matches!(
        error.kind(),
        DecodeErrorKind::InvalidTimestamp { .. }
    ));
    let error = self::error(r#"{"id": 1, "d": 3000000000}"#);
    assert!(matches!(
        error.kind(),
        DecodeErrorKind::OutOfRange { target: "DATE", .. }
    ));
}

#[test]
fn variant_takes_any_json_value_as_compact_text() {
    for (input, stored) in [
        ("1.50", "1.50"),
        ("\"text\"", "\"text\""),
        ("[ true , false ]", "[true,false]"),
        ("{ \"a\" : { \"b\" : \"c d\" } }", "{\"a\":{\"b\":\"c d\"}}"),
    ] {
        let record = format!(r#"{{"id": 1, "v": {input}}}"#);
        assert_eq!(row(&record)["v"], json!(stored), "{input}");
    }
}

#[test]
fn array_elements_may_be_null_only_when_the_array_contains_null() {
    assert_eq!(row(r#"{"id": 1, "tags": [null]}"#)["tags"], json!([null]));
    let error = error(r#"{"id": 1, "strict": [1, null]}"#);
    assert_eq!(error.kind(), &DecodeErrorKind::NotNull);
    assert_eq!(error.path().to_string(), "strict[1]");
}

#[test]
fn map_keys_are_converted_to_the_key_type() {
    let error = error(r#"{"id": 1, "ids": {"ten": true}}"#);
    assert!(matches!(
        error.kind(),
        DecodeErrorKind::JsonWrongType { .. }
    ));
    assert_eq!(error.path().to_string(), "ids{ten}");
    let error = self::error(r#"{"id": 1, "flags": {"yes": 1}}"#);
    assert!(matches!(
        error.kind(),
        DecodeErrorKind::JsonWrongType { .. }
    ));
    let error = self::error(r#"{"id": 1, "ids": {"1": null}}"#);
    assert_eq!(error.kind(), &DecodeErrorKind::NotNull);
    assert_eq!(error.path().to_string(), "ids{1}");
    assert_eq!(
        row(r#"{"id": 1, "ids": {"01": true, "1": false}}"#)["ids"],
        json!([[1, false]])
    );
}

#[test]
fn integer_map_keys_and_double_values_take_the_one_pass_with_the_value_trees_results() {
    let schema = TableSchema::parse(
        "id BIGINT NOT NULL, m MAP<TINYINT, DOUBLE>, l ARRAY<DOUBLE>, \
         s MAP<STRING, DOUBLE NOT NULL>, d DOUBLE",
    )
    .expect("schema parses");
    let mut builder = RecordBatchBuilder::new(&schema);
    builder
        .append_json(
            r#"{"id": 1, "m": {"-128": 1, "127": -2.5, "+5": 18446744073709551615},
                "l": [0, 1e3, -9007199254740993, null], "s": {"a": 1, "b": -1}, "d": 4}"#,
        )
        .expect("record decodes");
    assert_eq!(builder.json_records_via_value_tree(), 0, "one pass");
    // Out of TINYINT's range: the value-tree decode names it, and the builder is unchanged.
    let error = builder
        .append_json(r#"{"id": 2, "m": {"128": 1.0}}"#)
        .expect_err("128 is not a TINYINT");
    assert!(matches!(
        error.kind(),
        DecodeErrorKind::OutOfRange {
            target: "TINYINT",
            ..
        }
    ));
    assert_eq!(error.path().to_string(), "m{128}");
    // The same key twice (as text or as number): the value tree keeps the last value.
    builder
        .append_json(r#"{"id": 3, "m": {"7": 1, "07": 2}, "s": {"a": 1, "a": 2}}"#)
        .expect("repeated keys decode");
    assert_eq!(builder.json_records_via_value_tree(), 2);
    let rows = rows(&builder.finish());
    assert_eq!(rows.len(), 2);
    assert_eq!(
        rows[0]["m"],
        json!([[-128, 1.0], [127, -2.5], [5, 18446744073709551615.0]])
    );
    assert_eq!(
        rows[0]["l"],
        json!([0.0, 1000.0, -9007199254740992.0, null])
    );
    assert_eq!(rows[0]["s"], json!([["a", 1.0], ["b", -1.0]]));
    assert_eq!(rows[0]["d"], json!(4.0));
    assert_eq!(rows[1]["m"], json!([[7, 2.0]]));
    assert_eq!(rows[1]["s"], json!([["a", 2.0]]));
}

#[test]
fn a_null_or_absent_not_null_column_is_rejected() {
    let error = error(r#"{"device": "x"}"#);
    assert_eq!(error.kind(), &DecodeErrorKind::NotNull);
    assert_eq!(error.path().to_string(), "id");
    let error = self::error(r#"{"id": null}"#);
    assert_eq!(error.kind(), &DecodeErrorKind::NotNull);
    let error = self::error(r#"{"id": 1, "loc": {"lat": 1}}"#);
    assert_eq!(error.path().to_string(), "loc.lon");
    assert_eq!(error.offset(), None);
}

#[test]
fn unknown_keys_are_rejected_at_every_level() {
    let error = error(r#"{"id": 1, "extra": 2}"#);
    assert_eq!(
        error.kind(),
        &DecodeErrorKind::JsonUnknownField {
            name: "extra".into()
        }
    );
    let error = self::error(r#"{"id": 1, "loc": {"lat": 1, "lon": 2, "alt": 3}}"#);
    assert_eq!(error.to_string(), "field `loc`: unknown field `alt`");
}

#[test]
fn a_record_that_is_not_an_object_is_rejected() {
    for (record, found) in [
        ("[1]", "array"),
        ("1", "number"),
        ("\"x\"", "string"),
        ("null", "null"),
        ("true", "bool"),
    ] {
        assert_eq!(
            error(record).kind(),
            &DecodeErrorKind::JsonNotObject { found },
            "{record}"
        );
    }
}

#[test]
fn text_that_is_not_json_is_rejected() {
    for record in [
        "{",
        "{\"id\": 1,}",
        "{\"id\": 1} trailing",
        "",
        "{\"id\": 01}",
    ] {
        assert!(
            matches!(error(record).kind(), DecodeErrorKind::InvalidJson { .. }),
            "{record}"
        );
    }
}

#[test]
fn values_of_the_wrong_json_type_name_what_was_expected_and_found() {
    let error = error(r#"{"id": 1, "device": 5}"#);
    assert_eq!(
        error.kind(),
        &DecodeErrorKind::JsonWrongType {
            expected: "string",
            found: "number"
        }
    );
    assert_eq!(
        error.to_string(),
        "field `device`: expected string, found number"
    );
    let error = self::error(r#"{"id": 1, "tags": ["a", {"b": 1}]}"#);
    assert_eq!(error.path().to_string(), "tags[1]");
    assert_eq!(
        error.kind(),
        &DecodeErrorKind::JsonWrongType {
            expected: "string",
            found: "object"
        }
    );
    let error = self::error(r#"{"id": 1, "ok": "true"}"#);
    assert!(matches!(
        error.kind(),
        DecodeErrorKind::JsonWrongType {
            expected: "bool",
            ..
        }
    ));
    let error = self::error(r#"{"id": 1, "loc": [1, 2]}"#);
    assert!(matches!(
        error.kind(),
        DecodeErrorKind::JsonWrongType {
            expected: "object",
            found: "array"
        }
    ));
    let error = self::error(r#"{"id": 1, "tags": "a"}"#);
    assert!(matches!(
        error.kind(),
        DecodeErrorKind::JsonWrongType {
            expected: "array",
            found: "string"
        }
    ));
}

#[test]
fn a_failed_json_append_leaves_earlier_rows_untouched() {
    let mut builder = builder();
    builder
        .append_json(r#"{"id": 1, "tags": ["a"], "attrs": {"k": "v"}}"#)
        .expect("good");
    assert!(builder
        .append_json(r#"{"id": 2, "tags": ["b"], "attrs": {"k": "v"}, "t": 999}"#)
        .is_err());
    builder.append_json(r#"{"id": 3}"#).expect("good");
    let rows = rows(&builder.finish());
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["tags"], json!(["a"]));
    assert_eq!(rows[1]["id"], json!(3));
    assert_eq!(rows[1]["tags"], Json::Null);
}

#[test]
fn deeply_nested_json_neither_overflows_the_stack_nor_escapes_the_schema() {
    let deep = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
    // VARIANT: valid JSON however deep, skipped iteratively and stored as text.
    let record = format!(r#"{{"id": 1, "v": {deep}}}"#);
    assert_eq!(row(&record)["v"], json!(deep));
    // Typed columns stop at the first level the schema does not allow.
    let record = format!(r#"{{"id": 1, "tags": {deep}}}"#);
    assert!(matches!(
        error(&record).kind(),
        DecodeErrorKind::JsonWrongType {
            expected: "string",
            found: "array"
        }
    ));
}
