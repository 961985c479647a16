//! A Flight stream's Arrow schema checked against its table once, and each of its batches
//! made into the table's batch shape: columns matched by name (exact, then ASCII
//! case-insensitive; any order), types that fit the column (below), nullability (a nullable
//! field cannot feed a NOT NULL column), a nullable column the stream lacks filled with
//! nulls. Columns whose type is already the table's are passed on as they are (no copy);
//! others are cast (`arrow-cast`, never lossy: a value that does not fit fails the batch).
//!
//! Types that fit, per table type: TINYINT Int8; SMALLINT Int8/16, UInt8; INT Int8/16/32,
//! UInt8/16; BIGINT Int8–64, UInt8–32; FLOAT Float16/32; DOUBLE Float16/32/64; STRING and
//! VARIANT Utf8, LargeUtf8, Utf8View (VARIANT: JSON text, checked per value); BOOLEAN;
//! BINARY Binary, LargeBinary, BinaryView, FixedSizeBinary; DATE Date32/64; TIMESTAMP
//! Timestamp(any unit, any time zone); TIMESTAMP_NTZ Timestamp(any unit, no time zone);
//! ARRAY List/LargeList/FixedSizeList; MAP Map; STRUCT Struct with the same fields in the
//! same order. Dictionary-encoded columns of a fitting value type are decoded.

use arrow_array::{new_null_array, Array, ArrayRef, RecordBatch, StringArray};
use arrow_buffer::NullBuffer;
use arrow_cast::{cast_with_options, CastOptions};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use sluice_zeroparser::{Column, ColumnType, TableSchema};

/// Where one table column's values come from.
#[derive(Debug)]
enum Source {
    /// The stream's column at this index, cast when its type differs.
    Column { index: usize, cast: bool },
    /// The stream has no such column: nulls.
    Null,
}

/// How a stream's batches become the table's.
#[derive(Debug)]
pub struct Conform {
    columns: Vec<Column>,
    sources: Vec<Source>,
    /// The shape of the batches made (the table's columns, then `_rescued_data` if kept).
    target: SchemaRef,
}

impl Conform {
    /// Checks the stream's `schema` against `table`; `target` is the shape the table's
    /// memtable takes (its columns first, then possibly `_rescued_data`, always null here).
    /// The error names the column and what does not fit.
    pub fn new(table: &TableSchema, schema: &Schema, target: SchemaRef) -> Result<Self, String> {
        for field in schema.fields() {
            if table.column_index(field.name()).is_none() {
                return Err(format!(
                    "field `{}` has no column in the table",
                    field.name()
                ));
            }
        }
        let mut sources = Vec::with_capacity(table.columns.len());
        for column in &table.columns {
            let index = schema
                .fields()
                .iter()
                .position(|f| f.name() == &column.name)
                .or_else(|| {
                    schema
                        .fields()
                        .iter()
                        .position(|f| f.name().eq_ignore_ascii_case(&column.name))
                });
            let source = match index {
                Some(index) => {
                    let field = schema.field(index);
                    fits(&column.name, field, &column.data_type, column.nullable)?;
                    Source::Column {
                        index,
                        cast: *field.data_type() != column.data_type.arrow_type(),
                    }
                }
                None if column.nullable => Source::Null,
                None => {
                    return Err(format!(
                        "column `{}` is NOT NULL and the Arrow schema has no field for it",
                        column.name
                    ))
                }
            };
            sources.push(source);
        }
        Ok(Conform {
            columns: table.columns.clone(),
            sources,
            target,
        })
    }

    /// The stream's `batch` as a batch of the table. The error names the column.
    pub fn apply(&self, batch: &RecordBatch) -> Result<RecordBatch, String> {
        let rows = batch.num_rows();
        let mut arrays: Vec<ArrayRef> = Vec::with_capacity(self.target.fields().len());
        let options = CastOptions {
            safe: false,
            ..CastOptions::default()
        };
        for (column, source) in self.columns.iter().zip(&self.sources) {
            let to = column.data_type.arrow_type();
            let array = match source {
                Source::Null => new_null_array(&to, rows),
                Source::Column { index, cast: false } => batch.column(*index).clone(),
                Source::Column { index, cast: true } => {
                    cast_with_options(batch.column(*index), &to, &options)
                        .map_err(|e| format!("column `{}`: {e}", column.name))?
                }
            };
            check_nulls(
                &column.name,
                &array,
                &column.data_type,
                column.nullable,
                None,
            )?;
            check_variant(&column.name, &array, &column.data_type)?;
            arrays.push(array);
        }
        for field in self.target.fields().iter().skip(arrays.len()) {
            arrays.push(new_null_array(field.data_type(), rows));
        }
        RecordBatch::try_new(self.target.clone(), arrays).map_err(|e| e.to_string())
    }
}

/// Whether `field` may feed a column of type `to` (nullable or not); the error says why not.
fn fits(path: &str, field: &Field, to: &ColumnType, nullable: bool) -> Result<(), String> {
    if field.is_nullable() && !nullable {
        return Err(format!(
            "column `{path}` is NOT NULL but the Arrow field is nullable"
        ));
    }
    fits_type(path, field.data_type(), to)
}

fn fits_type(path: &str, from: &DataType, to: &ColumnType) -> Result<(), String> {
    use DataType as D;
    let ok = match (to, from) {
        (_, D::Dictionary(_, values)) => return fits_type(path, values, to),
        (ColumnType::TinyInt, D::Int8) => true,
        (ColumnType::SmallInt, D::Int8 | D::Int16 | D::UInt8) => true,
        (ColumnType::Int, D::Int8 | D::Int16 | D::Int32 | D::UInt8 | D::UInt16) => true,
        (
            ColumnType::BigInt,
            D::Int8 | D::Int16 | D::Int32 | D::Int64 | D::UInt8 | D::UInt16 | D::UInt32,
        ) => true,
        (ColumnType::Float, D::Float16 | D::Float32) => true,
        (ColumnType::Double, D::Float16 | D::Float32 | D::Float64) => true,
        (ColumnType::String | ColumnType::Variant, D::Utf8 | D::LargeUtf8 | D::Utf8View) => true,
        (ColumnType::Boolean, D::Boolean) => true,
        (
            ColumnType::Binary,
            D::Binary | D::LargeBinary | D::BinaryView | D::FixedSizeBinary(_),
        ) => true,
        (ColumnType::Date, D::Date32 | D::Date64) => true,
        (ColumnType::Timestamp, D::Timestamp(_, Some(_))) => true,
        (ColumnType::TimestampNtz, D::Timestamp(_, None)) => true,
        (
            ColumnType::Array {
                element,
                contains_null,
            },
            D::List(f) | D::LargeList(f) | D::FixedSizeList(f, _),
        ) => return fits(&format!("{path}.element"), f, element, *contains_null),
        (
            ColumnType::Map {
                key,
                value,
                value_contains_null,
            },
            D::Map(entries, _),
        ) => {
            let D::Struct(kv) = entries.data_type() else {
                return Err(format!("column `{path}`: map entries are not a struct"));
            };
            if kv.len() != 2 {
                return Err(format!(
                    "column `{path}`: map entries need a key and a value"
                ));
            }
            fits(&format!("{path}.key"), &kv[0], key, false)?;
            return fits(
                &format!("{path}.value"),
                &kv[1],
                value,
                *value_contains_null,
            );
        }
        (ColumnType::Struct(columns), D::Struct(fields)) => {
            if columns.len() != fields.len() {
                return Err(format!(
                    "column `{path}`: the table's struct has {} fields, the Arrow one {}",
                    columns.len(),
                    fields.len()
                ));
            }
            for (column, field) in columns.iter().zip(fields.iter()) {
                if !column.name.eq_ignore_ascii_case(field.name()) {
                    return Err(format!(
                        "column `{path}`: struct field `{}` where the table has `{}`",
                        field.name(),
                        column.name
                    ));
                }
                fits(
                    &format!("{path}.{}", column.name),
                    field,
                    &column.data_type,
                    column.nullable,
                )?;
            }
            true
        }
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "column `{path}` is {} but the Arrow field is {from}",
            to.primitive_name()
                .map_or_else(|| format!("{to:?}"), str::to_string)
        ))
    }
}

/// No null where the table says NOT NULL, at any depth (`parent`: the nulls of the struct
/// holding `array`, whose null rows hide their fields' nulls).
fn check_nulls(
    path: &str,
    array: &ArrayRef,
    to: &ColumnType,
    nullable: bool,
    parent: Option<&NullBuffer>,
) -> Result<(), String> {
    if !nullable && array.null_count() > 0 {
        let hidden = parent.map_or(0, NullBuffer::null_count);
        let union = NullBuffer::union(parent, array.nulls());
        if union.map_or(0, |u| u.null_count()) > hidden {
            return Err(format!(
                "column `{path}` is NOT NULL but the batch holds a null"
            ));
        }
    }
    match to {
        ColumnType::Array {
            element,
            contains_null,
        } => {
            if let Some(list) = array.as_any().downcast_ref::<arrow_array::ListArray>() {
                let values = list.values();
                check_nulls(
                    &format!("{path}.element"),
                    values,
                    element,
                    *contains_null,
                    None,
                )?;
            }
        }
        ColumnType::Map {
            key,
            value,
            value_contains_null,
        } => {
            if let Some(map) = array.as_any().downcast_ref::<arrow_array::MapArray>() {
                check_nulls(&format!("{path}.key"), map.keys(), key, false, None)?;
                check_nulls(
                    &format!("{path}.value"),
                    map.values(),
                    value,
                    *value_contains_null,
                    None,
                )?;
            }
        }
        ColumnType::Struct(columns) => {
            if let Some(st) = array.as_any().downcast_ref::<arrow_array::StructArray>() {
                let nulls = NullBuffer::union(parent, st.nulls());
                for (column, child) in columns.iter().zip(st.columns()) {
                    check_nulls(
                        &format!("{path}.{}", column.name),
                        child,
                        &column.data_type,
                        column.nullable,
                        nulls.as_ref(),
                    )?;
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// A VARIANT column holds JSON text (top-level columns; nested VARIANTs are taken as text).
fn check_variant(path: &str, array: &ArrayRef, to: &ColumnType) -> Result<(), String> {
    if *to != ColumnType::Variant {
        return Ok(());
    }
    let Some(text) = array.as_any().downcast_ref::<StringArray>() else {
        return Ok(());
    };
    for (row, value) in text.iter().enumerate() {
        if let Some(value) = value {
            if serde_json::from_str::<serde::de::IgnoredAny>(value).is_err() {
                return Err(format!(
                    "column `{path}` is VARIANT but row {row} is not JSON text"
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Int32Array, Int64Array, LargeStringArray, StructArray};
    use arrow_schema::Fields;

    use super::*;

    fn table(text: &str) -> TableSchema {
        TableSchema::parse(text).expect("schema")
    }

    fn conform(table: &TableSchema, schema: &Schema) -> Result<Conform, String> {
        Conform::new(table, schema, table.arrow_schema())
    }

    #[test]
    fn schemas_that_do_not_fit_are_refused_naming_the_column() {
        let t = table("id BIGINT NOT NULL, name STRING, pos STRUCT<x: INT NOT NULL>");
        let refused = |fields: Vec<Field>| conform(&t, &Schema::new(fields)).expect_err("refused");
        let id = Field::new("id", DataType::Int64, false);
        assert!(refused(vec![Field::new("id", DataType::Utf8, false)])
            .contains("column `id` is BIGINT but the Arrow field is Utf8"));
        assert!(refused(vec![Field::new("id", DataType::Int64, true)])
            .contains("column `id` is NOT NULL but the Arrow field is nullable"));
        assert!(refused(vec![Field::new("name", DataType::Utf8, true)])
            .contains("column `id` is NOT NULL and the Arrow schema has no field"));
        assert!(
            refused(vec![id.clone(), Field::new("extra", DataType::Utf8, true)])
                .contains("field `extra` has no column")
        );
        let loose_x = DataType::Struct(Fields::from(vec![Field::new("x", DataType::Int32, true)]));
        assert!(refused(vec![id.clone(), Field::new("pos", loose_x, true)])
            .contains("column `pos.x` is NOT NULL"));
        // Wider integers into BIGINT, LargeUtf8 into STRING, any column order: fits.
        let fits = Schema::new(vec![
            Field::new("NAME", DataType::LargeUtf8, true),
            Field::new("id", DataType::Int32, false),
        ]);
        assert!(conform(&t, &fits).is_ok());
    }

    #[test]
    fn batches_are_cast_where_needed_and_missing_nullable_columns_are_null() {
        let t = table("id BIGINT NOT NULL, name STRING, n INT");
        let schema = Arc::new(Schema::new(vec![
            Field::new("name", DataType::LargeUtf8, true),
            Field::new("id", DataType::Int64, false),
        ]));
        let c = conform(&t, &schema).expect("fits");
        let id: ArrayRef = Arc::new(Int64Array::from(vec![1, 2]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(LargeStringArray::from(vec![Some("a"), None])),
                id.clone(),
            ],
        )
        .expect("batch");
        let out = c.apply(&batch).expect("applies");
        assert_eq!(out.schema(), t.arrow_schema());
        assert!(
            Arc::ptr_eq(out.column(0), &id),
            "a column of the table's type is not copied"
        );
        assert_eq!(out.column(1).null_count(), 1);
        assert_eq!(
            out.column(2).null_count(),
            2,
            "missing nullable column is null"
        );
    }

    #[test]
    fn nulls_under_not_null_are_refused_unless_a_null_parent_hides_them() {
        let t = table("pos STRUCT<x: INT NOT NULL>");
        let fields = Fields::from(vec![Field::new("x", DataType::Int32, false)]);
        let schema = Arc::new(Schema::new(vec![Field::new(
            "pos",
            DataType::Struct(fields.clone()),
            true,
        )]));
        let c = conform(&t, &schema).expect("fits");
        let x: ArrayRef = Arc::new(Int32Array::from(vec![Some(1), None]));
        let make = |parent: Option<NullBuffer>| {
            // As an IPC reader may build it: `try_new` would refuse the unmasked null.
            // SAFETY: one child of the field's type and of the parent's length.
            let data =
                unsafe { StructArray::new_unchecked(fields.clone(), vec![x.clone()], parent) };
            RecordBatch::try_new(schema.clone(), vec![Arc::new(data)]).expect("batch")
        };
        let hidden = make(Some(NullBuffer::from(vec![true, false])));
        assert!(c.apply(&hidden).is_ok(), "the null x sits under a null pos");
        let shown = make(None);
        assert!(c
            .apply(&shown)
            .is_err_and(|e| e.contains("column `pos.x` is NOT NULL")));
    }

    #[test]
    fn variant_values_must_be_json_text() {
        let t = table("v VARIANT");
        let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Utf8, true)]));
        let c = conform(&t, &schema).expect("fits");
        let batch = |text: &str| {
            RecordBatch::try_new(
                schema.clone(),
                vec![Arc::new(StringArray::from(vec![text]))],
            )
            .expect("batch")
        };
        assert!(c.apply(&batch(r#"{"a":[1,2]}"#)).is_ok());
        assert!(c
            .apply(&batch("{nope"))
            .is_err_and(|e| e.contains("not JSON text")));
    }
}
