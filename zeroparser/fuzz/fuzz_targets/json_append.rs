//! Fuzz target for the JSON path: arbitrary text appended as a JSON record must never panic,
//! a rejected record must leave the builder as it was, and a scalar-only table (flat columns)
//! must hold exactly what the same table with one extra STRUCT column (Arrow builders fed
//! from the value tree) holds. The flat table with the `_rescued_data` column accepts every
//! record the flat table accepts (its rescued cell then null, its other cells equal) and
//! fails only records the flat table fails too. Each record alone in the nested table (one
//! pass straight into the column tree) holds exactly what the value-tree decode of the same
//! table with the `_rescued_data` column holds, when that rescues nothing; and in both tables
//! the one pass (its own scanner) gives the verdict, error and row serde_json's value-tree
//! decode gives.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use serde_json::Value as Json;
use sluice_zeroparser::{RecordBatchBuilder, TableSchema, RESCUED_DATA_COLUMN};

use common::rows;

const FLAT: &str = "id BIGINT NOT NULL, name STRING, t TINYINT, s SMALLINT, i INT, f FLOAT, \
    d DOUBLE, ok BOOLEAN, b BINARY, day DATE, ts TIMESTAMP, ntz TIMESTAMP_NTZ, v VARIANT";

fn without_extra(mut rows: Vec<Json>) -> Vec<Json> {
    for row in &mut rows {
        if let Json::Object(map) = row {
            map.remove("extra");
        }
    }
    rows
}

/// `record` alone: the one pass and the value tree (the rescuing builder) agree.
fn check_against_value_tree(schema: &TableSchema, record: &str) {
    let mut direct = RecordBatchBuilder::new(schema);
    let mut tree = RecordBatchBuilder::with_rescued_data(schema).expect("rescuable");
    let ours = direct.append_json(record);
    let theirs = tree.append_json(record);
    match (ours, theirs) {
        (Ok(()), Ok(())) => {
            let mut tree_rows = rows(&tree.finish());
            let rescued = tree_rows
                .first_mut()
                .and_then(Json::as_object_mut)
                .and_then(|row| row.remove(RESCUED_DATA_COLUMN))
                .unwrap_or(Json::Null);
            if rescued.is_null() {
                assert_eq!(rows(&direct.finish()), tree_rows, "one pass vs value tree: {record}");
            }
        }
        (Ok(()), Err(e)) => panic!("the value tree rejected what the one pass accepted: {e}"),
        (Err(_), _) => assert!(direct.is_empty()),
    }
}

/// `record` alone: the one pass (its own scanner) and the value-tree decode (serde_json) of
/// the same table give the same verdict, the same error and the same row.
fn check_scanner_against_serde(schema: &TableSchema, record: &str) {
    let mut direct = RecordBatchBuilder::new(schema);
    let mut tree = RecordBatchBuilder::new(schema);
    let ours = direct.append_json(record);
    let theirs = tree.append_json_via_value_tree(record);
    assert_eq!(ours, theirs, "one pass vs serde_json: {record}");
    assert_eq!(rows(&direct.finish()), rows(&tree.finish()), "{record}");
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let flat_schema = TableSchema::parse(FLAT).expect("flat schema");
    let nested_schema = TableSchema::parse(&format!(
        "{FLAT}, extra STRUCT<tags: ARRAY<STRING>, attrs: MAP<STRING, INT>>"
    ))
    .expect("nested schema");
    let mut flat = RecordBatchBuilder::new(&flat_schema);
    let mut nested = RecordBatchBuilder::new(&nested_schema);
    let mut rescuing = RecordBatchBuilder::with_rescued_data(&flat_schema).expect("rescuable");
    // A valid first row, then the input (also split into lines: several records).
    let first = r#"{"id": 1, "name": "a"}"#;
    flat.append_json(first).expect("first row");
    nested.append_json(first).expect("first row");
    rescuing.append_json(first).expect("first row");
    for record in std::iter::once(text).chain(text.lines()) {
        check_against_value_tree(&nested_schema, record);
        check_scanner_against_serde(&flat_schema, record);
        check_scanner_against_serde(&nested_schema, record);
        let before = (flat.len(), nested.len());
        let rescued_before = rescuing.len();
        let a = flat.append_json(record);
        match rescuing.append_json(record) {
            Ok(()) => assert_eq!(rescuing.len(), rescued_before + 1),
            Err(e) => {
                assert!(a.is_err(), "rescue rejected what the flat table accepted: {e}");
                assert_eq!(rescuing.len(), rescued_before);
            }
        }
        let b = nested.append_json(record);
        match (&a, &b) {
            (Ok(()), Ok(())) => {
                assert_eq!((flat.len(), nested.len()), (before.0 + 1, before.1 + 1))
            }
            (Err(x), Err(y)) => {
                // A record naming `extra` (any case, any escaping) can fail differently:
                // the flat table has no such column, the nested one parses on.
                if !x.to_string().contains("unknown field") {
                    assert_eq!(x.to_string(), y.to_string());
                }
                assert_eq!((flat.len(), nested.len()), before);
            }
            // The extra column may reject what the flat table ignores (it is present in
            // the nested table only).
            (Ok(()), Err(_)) => {
                flat.finish();
                nested.finish();
                return;
            }
            (Err(x), Ok(())) => panic!("flat rejected what nested accepted: {x}"),
        }
    }
    let flat_rows = rows(&flat.finish());
    // Rows the flat table accepted read the same with rescue, with nothing rescued.
    let rescued_rows = rows(&rescuing.finish());
    let plain: Vec<Json> = rescued_rows
        .into_iter()
        .filter_map(|mut row| {
            let cell = row.as_object_mut()?.remove(RESCUED_DATA_COLUMN)?;
            cell.is_null().then_some(row)
        })
        .collect();
    for row in &flat_rows {
        assert!(plain.contains(row), "row {row} missing with rescue");
    }
    let nested_rows = without_extra(rows(&nested.finish()));
    assert_eq!(flat_rows, nested_rows);
});
