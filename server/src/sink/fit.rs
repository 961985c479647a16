//! Memtable batches made into the shape of the table's current Delta schema
//! before they are written: after `sluice table alter` added columns (top
//! level or inside a STRUCT), a stream opened before the change still builds
//! rows of the old shape, and rows of both shapes may wait in one memtable.
//! Fields are matched by name; a field the batch lacks is filled with nulls
//! (only nullable fields can be added, so this never makes a NOT NULL column
//! null); STRUCT and ARRAY<STRUCT> values are fitted field by field; any other
//! difference is a cast (`arrow-cast`, not lossy: a value that does not fit
//! fails the flush, which keeps the rows; so a widened column's old values
//! are cast up). A column the table dropped is left out. A top-level column
//! a rewriting alter renamed is found under its old names, which the Delta
//! table's configuration keeps ([`RENAMES_PROPERTY`]), so rows of the old
//! shape keep their values.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow_array::{new_null_array, Array, ArrayRef, ListArray, RecordBatch, StructArray};
use arrow_cast::{cast_with_options, CastOptions};
use arrow_schema::{DataType, FieldRef, Fields, SchemaRef};

use crate::error::{Result, ServerError};

/// The Delta table property listing renamed columns: a JSON object from a
/// column's name to its earlier names, newest first.
pub const RENAMES_PROPERTY: &str = "sluice.renamedColumns";

/// Each renamed column's earlier names, newest first.
pub type Renames = BTreeMap<String, Vec<String>>;

/// The renames a Delta table's configuration records (none when absent or
/// unreadable: a rename is then only lost for rows of the old shape).
pub fn renames(configuration: &HashMap<String, String>) -> Renames {
    configuration
        .get(RENAMES_PROPERTY)
        .and_then(|v| serde_json::from_str(v).ok())
        .unwrap_or_default()
}

/// `renames` after renaming `old` to `new` (the earlier names of `old` move
/// to `new`).
pub fn renamed(mut renames: Renames, old: &str, new: &str) -> Renames {
    let mut earlier = vec![old.to_string()];
    earlier.extend(renames.remove(old).unwrap_or_default());
    renames.insert(new.to_string(), earlier);
    renames
}

/// Whether every batch already has one schema that matches `target` up to
/// nullability and field metadata (the normal case: nothing to do).
pub fn all_fit(batches: &[&RecordBatch], target: &SchemaRef) -> bool {
    let Some(first) = batches.first() else {
        return true;
    };
    let schema = first.schema();
    batches.iter().all(|b| b.schema() == schema)
        && schema.fields().len() == target.fields().len()
        && schema
            .fields()
            .iter()
            .zip(target.fields())
            .all(|(a, b)| a.name() == b.name() && a.data_type().equals_datatype(b.data_type()))
}

/// `batch` with exactly the fields of `target`: columns by name, missing ones
/// null, nested STRUCT fields likewise, other type differences cast. A target
/// column the batch lacks is looked up under its earlier names (`renames`);
/// a batch column taken that way is of the old meaning, so it never also
/// fills a newer column that reuses its name (a batch always has every column
/// of the schema it was built for, so one lacking the new name predates the
/// rename).
pub fn fit_batch(
    batch: &RecordBatch,
    target: &SchemaRef,
    renames: &Renames,
) -> Result<RecordBatch> {
    let rows = batch.num_rows();
    let renamed_from = |name: &String| {
        if batch.column_by_name(name).is_some() {
            return None;
        }
        renames
            .get(name)?
            .iter()
            .find(|old| batch.column_by_name(old).is_some())
    };
    let taken: Vec<&String> = target
        .fields()
        .iter()
        .filter_map(|f| renamed_from(f.name()))
        .collect();
    let columns = target
        .fields()
        .iter()
        .map(|field| {
            let source = match renamed_from(field.name()) {
                Some(old) => batch.column_by_name(old),
                None if taken.contains(&field.name()) => None,
                None => batch.column_by_name(field.name()),
            };
            match source {
                Some(column) => fit_array(field.name(), column, field.data_type()),
                None => Ok(new_null_array(field.data_type(), rows)),
            }
        })
        .collect::<Result<Vec<_>>>()?;
    RecordBatch::try_new(target.clone(), columns)
        .map_err(|e| ServerError::Internal(format!("fitting rows to the table's schema: {e}")))
}

fn fit_array(path: &str, array: &ArrayRef, to: &DataType) -> Result<ArrayRef> {
    if array.data_type() == to {
        return Ok(array.clone());
    }
    match (array.data_type(), to) {
        (DataType::Struct(_), DataType::Struct(fields)) => {
            let Some(from) = array.as_any().downcast_ref::<StructArray>() else {
                return Err(mismatch(path, array, to));
            };
            fit_struct(path, from, fields)
        }
        (DataType::List(_), DataType::List(element)) => {
            let Some(from) = array.as_any().downcast_ref::<ListArray>() else {
                return Err(mismatch(path, array, to));
            };
            let values = fit_array(path, from.values(), element.data_type())?;
            let list = ListArray::try_new(
                element.clone(),
                from.offsets().clone(),
                values,
                from.nulls().cloned(),
            )
            .map_err(|e| ServerError::Internal(format!("column `{path}`: {e}")))?;
            Ok(Arc::new(list))
        }
        _ => cast_with_options(
            array,
            to,
            &CastOptions {
                safe: false,
                ..CastOptions::default()
            },
        )
        .map_err(|e| ServerError::Internal(format!("column `{path}`: {e}"))),
    }
}

fn fit_struct(path: &str, from: &StructArray, fields: &Fields) -> Result<ArrayRef> {
    let rows = from.len();
    let children = fields
        .iter()
        .map(|field: &FieldRef| {
            let child_path = format!("{path}.{}", field.name());
            match from.column_by_name(field.name()) {
                Some(child) => fit_array(&child_path, child, field.data_type()),
                None => Ok(new_null_array(field.data_type(), rows)),
            }
        })
        .collect::<Result<Vec<_>>>()?;
    let fitted = StructArray::try_new(fields.clone(), children, from.nulls().cloned())
        .map_err(|e| ServerError::Internal(format!("column `{path}`: {e}")))?;
    Ok(Arc::new(fitted))
}

fn mismatch(path: &str, array: &ArrayRef, to: &DataType) -> ServerError {
    ServerError::Internal(format!(
        "column `{path}`: cannot fit {} to {to}",
        array.data_type()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Float32Array, Int64Array, StringArray};
    use arrow_schema::{Field, Schema};

    fn struct_type(fields: Vec<Field>) -> DataType {
        DataType::Struct(Fields::from(fields))
    }

    #[test]
    fn added_columns_and_nested_fields_are_null_and_old_values_stay() {
        let site_old = vec![Field::new("name", DataType::Utf8, true)];
        let old = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("site", struct_type(site_old.clone()), true),
        ]));
        let site = StructArray::try_new(
            Fields::from(site_old),
            vec![Arc::new(StringArray::from(vec![Some("a"), None])) as ArrayRef],
            None,
        )
        .expect("struct");
        let batch = RecordBatch::try_new(
            old,
            vec![Arc::new(Int64Array::from(vec![1, 2])), Arc::new(site)],
        )
        .expect("batch");
        let site_new = vec![
            Field::new("name", DataType::Utf8, true),
            Field::new("elevation", DataType::Float64, true),
        ];
        let target = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("site", struct_type(site_new), true),
            Field::new("humidity", DataType::Float64, true),
        ]));
        assert!(!all_fit(&[&batch], &target));
        let out = fit_batch(&batch, &target, &Renames::new()).expect("fit");
        assert_eq!(out.schema(), target);
        assert_eq!(out.column(2).null_count(), 2);
        let site = out
            .column(1)
            .as_any()
            .downcast_ref::<StructArray>()
            .expect("struct");
        assert_eq!(site.column(1).null_count(), 2);
        let names = site
            .column(0)
            .as_any()
            .downcast_ref::<StringArray>()
            .expect("names");
        assert_eq!(names.value(0), "a");
        assert!(names.is_null(1));
        assert!(all_fit(&[&out], &target));
    }

    #[test]
    fn a_widened_column_is_cast_without_loss() {
        let batch = RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new("t", DataType::Float32, true)])),
            vec![Arc::new(Float32Array::from(vec![1.5]))],
        )
        .expect("batch");
        let target = Arc::new(Schema::new(vec![Field::new("t", DataType::Float64, true)]));
        let out = fit_batch(&batch, &target, &Renames::new()).expect("fit");
        assert_eq!(out.column(0).data_type(), &DataType::Float64);
    }

    #[test]
    fn renamed_columns_are_found_under_their_old_names_dropped_ones_left_out_widened_ones_cast() {
        let old = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("device", DataType::Utf8, true),
            Field::new("temp", DataType::Float32, true),
            Field::new("note", DataType::Utf8, true),
        ]));
        let batch = RecordBatch::try_new(
            old,
            vec![
                Arc::new(Int64Array::from(vec![1, 2])),
                Arc::new(StringArray::from(vec![Some("a"), None])),
                Arc::new(Float32Array::from(vec![Some(1.5), None])),
                Arc::new(StringArray::from(vec!["x", "y"])),
            ],
        )
        .expect("batch");
        let target = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("site", DataType::Utf8, true),
            Field::new("temp", DataType::Float64, true),
        ]));
        // device → sensor → site: the oldest name is still found.
        let renames = renamed(
            renamed(Renames::new(), "device", "sensor"),
            "sensor",
            "site",
        );
        assert_eq!(renames["site"], ["sensor", "device"]);
        let config: HashMap<String, String> = [(
            RENAMES_PROPERTY.to_string(),
            serde_json::to_string(&renames).expect("json"),
        )]
        .into();
        assert_eq!(super::renames(&config), renames);
        let out = fit_batch(&batch, &target, &renames).expect("fit");
        assert_eq!(out.schema(), target);
        let site = out
            .column(1)
            .as_any()
            .downcast_ref::<StringArray>()
            .expect("site");
        assert_eq!(site.iter().collect::<Vec<_>>(), [Some("a"), None]);
        let temp = out
            .column(2)
            .as_any()
            .downcast_ref::<arrow_array::Float64Array>()
            .expect("temp");
        assert_eq!(temp.iter().collect::<Vec<_>>(), [Some(1.5), None]);
        // Without the renames the values would be lost: NULL.
        let lost = fit_batch(&batch, &target, &Renames::new()).expect("fit");
        assert_eq!(lost.column(1).null_count(), 2);
        // A column added later under the old name gets nothing from rows of the old shape.
        let mut fields: Vec<Field> = target.fields().iter().map(|f| f.as_ref().clone()).collect();
        fields.push(Field::new("device", DataType::Utf8, true));
        let reused = Arc::new(Schema::new(fields));
        let out = fit_batch(&batch, &reused, &renames).expect("fit");
        assert_eq!(out.column(1).null_count(), 1, "site keeps the old values");
        assert_eq!(out.column(3).null_count(), 2, "the new `device` is NULL");
    }
}
