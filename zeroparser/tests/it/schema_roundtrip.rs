//! Property: any schema survives `to_sql` → `parse` unchanged, and yields an Arrow schema
//! and an (empty) batch of that schema.

use proptest::prelude::*;
use sluice_zeroparser::{Column, ColumnType, RecordBatchBuilder, TableSchema};

fn name() -> impl Strategy<Value = String> {
    prop_oneof!["[a-zA-Z_][a-zA-Z0-9_]{0,7}", "[a-z0-9 ,:<>`.é-]{1,6}",]
}

fn primitive() -> impl Strategy<Value = ColumnType> {
    prop_oneof![
        Just(ColumnType::TinyInt),
        Just(ColumnType::SmallInt),
        Just(ColumnType::Int),
        Just(ColumnType::BigInt),
        Just(ColumnType::Float),
        Just(ColumnType::Double),
        Just(ColumnType::String),
        Just(ColumnType::Boolean),
        Just(ColumnType::Binary),
        Just(ColumnType::Date),
        Just(ColumnType::Timestamp),
        Just(ColumnType::TimestampNtz),
        Just(ColumnType::Variant),
    ]
}

fn map_key() -> impl Strategy<Value = ColumnType> {
    prop_oneof![
        Just(ColumnType::TinyInt),
        Just(ColumnType::SmallInt),
        Just(ColumnType::Int),
        Just(ColumnType::BigInt),
        Just(ColumnType::String),
        Just(ColumnType::Boolean),
    ]
}

/// Columns with names unique ignoring case.
fn columns(data_type: impl Strategy<Value = ColumnType>) -> impl Strategy<Value = Vec<Column>> {
    prop::collection::vec((name(), data_type, any::<bool>()), 1..5).prop_map(|raw| {
        let mut columns: Vec<Column> = Vec::new();
        for (name, data_type, nullable) in raw {
            if !columns.iter().any(|c| c.name.eq_ignore_ascii_case(&name)) {
                columns.push(Column {
                    name,
                    data_type,
                    nullable,
                });
            }
        }
        columns
    })
}

fn column_type() -> impl Strategy<Value = ColumnType> {
    primitive().prop_recursive(4, 40, 4, |inner| {
        prop_oneof![
            (inner.clone(), any::<bool>()).prop_map(|(element, contains_null)| ColumnType::Array {
                element: Box::new(element),
                contains_null,
            }),
            (map_key(), inner.clone(), any::<bool>()).prop_map(
                |(key, value, value_contains_null)| {
                    ColumnType::Map {
                        key: Box::new(key),
                        value: Box::new(value),
                        value_contains_null,
                    }
                }
            ),
            columns(inner).prop_map(ColumnType::Struct),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_schema_survives_to_sql_and_parse(columns in columns(column_type())) {
        let schema = TableSchema { columns };
        let text = schema.to_sql();
        prop_assert_eq!(TableSchema::parse(&text), Ok(schema.clone()), "text: {}", text);
        for column in &schema.columns {
            let single = format!("c {}", column.data_type.sql());
            let parsed = TableSchema::parse(&single).expect("one column parses");
            prop_assert_eq!(&parsed.columns[0].data_type, &column.data_type);
        }
        let batch = RecordBatchBuilder::new(&schema).finish();
        prop_assert_eq!(batch.schema(), schema.arrow_schema());
        prop_assert_eq!(batch.num_rows(), 0);
    }

    #[test]
    fn arbitrary_text_never_panics_the_schema_parser(text in "\\PC{0,60}") {
        let _ = TableSchema::parse(&text);
    }
}
