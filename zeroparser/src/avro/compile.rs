//! Compiling an Avro writer schema against a table schema into an [`AvroPlan`], once per
//! stream, before any record: the datum must be a record; each writer field meets the
//! column of its name (exact, then ASCII case-insensitive) with a type that fits it (table
//! below); every NOT NULL column must have a writer field whose type cannot be null.
//! Anything else is a [`SchemaError`] naming the field.
//!
//! Column type ← Avro type: BOOLEAN ← boolean; TINYINT, SMALLINT, INT ← int (range-checked
//! per value), INT ← time-millis; BIGINT ← int, long, time-millis, time-micros; FLOAT ←
//! float; DOUBLE ← float, double, decimal; STRING ← string, uuid (string or fixed), enum
//! (the symbol), decimal (exact text); VARIANT ← string holding JSON; BINARY ← bytes,
//! fixed; DATE ← date; TIMESTAMP ← timestamp-millis, timestamp-micros; TIMESTAMP_NTZ ←
//! local-timestamp-millis, local-timestamp-micros; ARRAY ← array; MAP<STRING, V> ← map;
//! STRUCT ← record (fields by name, the same rules). A union fits when each branch does;
//! a `null` branch needs a nullable column (element, map value, field). Not decoded:
//! timestamp-nanos, local-timestamp-nanos, duration, uuid on bytes, and arrays whose
//! items can encode to zero bytes (`null`, empty records).

use super::plan::{AvroPlan, FieldOp, IntOp, Op, RecordOp, StrCheck};
use super::types::{IntLogical, LongLogical, Raw, Types};
use crate::error::SchemaError;
use crate::path::{FieldPath, Segment};
use crate::proto::schema_id;
use crate::schema::{find_column, Column, ColumnType, TableSchema, MAX_DEPTH};

impl AvroPlan {
    /// Compiles the Avro schema `json` against `schema`. `rescued_data`: the builder keeps
    /// `_rescued_data`, so top-level writer fields with no column are rescued there instead
    /// of failing the compile.
    pub fn compile(
        json: &str,
        schema: &TableSchema,
        rescued_data: bool,
    ) -> Result<AvroPlan, SchemaError> {
        schema.validate()?;
        let types = Types::parse(json)?;
        let Raw::Record { name, fields } = types.get(types.root).clone() else {
            return Err(SchemaError::AvroNotRecord {
                found: types.describe(types.root),
            });
        };
        let mut compiler = Compiler {
            types: &types,
            rescued_data,
            amplification: 1,
        };
        let root = compiler.record(&fields, &schema.columns, &FieldPath::root(), 0)?;
        let amplification = compiler.amplification;
        Ok(AvroPlan {
            types,
            root,
            schema_id: schema_id(schema),
            rescues: rescued_data,
            amplification,
            record_name: name,
        })
    }
}

struct Compiler<'t> {
    types: &'t Types,
    rescued_data: bool,
    amplification: usize,
}

fn field_error(path: &FieldPath, reason: impl Into<String>) -> SchemaError {
    SchemaError::AvroField {
        path: path.clone(),
        reason: reason.into(),
    }
}

impl Compiler<'_> {
    fn record(
        &mut self,
        fields: &[(String, usize)],
        columns: &[Column],
        path: &FieldPath,
        depth: usize,
    ) -> Result<RecordOp, SchemaError> {
        if depth > MAX_DEPTH {
            return Err(SchemaError::DepthExceeded {
                path: path.clone(),
                limit: MAX_DEPTH,
            });
        }
        let mut ops = Vec::with_capacity(fields.len());
        let mut filled_by: Vec<Option<&str>> = vec![None; columns.len()];
        for (name, raw) in fields {
            let field_path = path.child(Segment::Field(name.clone()));
            let Some((index, column)) =
                find_column(columns, name).and_then(|i| columns.get(i).map(|c| (i, c)))
            else {
                if depth == 0 && self.rescued_data {
                    self.check_renderable(*raw, &field_path, 0)?;
                    ops.push(FieldOp::Rescue {
                        name: name.clone(),
                        raw: *raw,
                    });
                    continue;
                }
                return Err(field_error(
                    &field_path,
                    format!("{} has no column in the table", self.types.describe(*raw)),
                ));
            };
            match filled_by.get_mut(index) {
                Some(Some(first)) => {
                    return Err(field_error(
                        &field_path,
                        format!(
                            "`{first}` and `{name}` both map to column `{}`",
                            column.name
                        ),
                    ))
                }
                Some(slot) => *slot = Some(name),
                None => {}
            }
            let op = self.value(*raw, &column.data_type, column.nullable, &field_path, depth)?;
            ops.push(FieldOp::Column {
                index,
                name: name.clone(),
                op,
            });
        }
        for (column, filled) in columns.iter().zip(&filled_by) {
            if !column.nullable && filled.is_none() {
                return Err(field_error(
                    &path.child(Segment::Field(column.name.clone())),
                    "NOT NULL column has no field in the Avro schema",
                ));
            }
        }
        Ok(RecordOp { fields: ops })
    }

    /// The op for writer type `raw` into `target` (`nullable`: the slot may be NULL).
    fn value(
        &mut self,
        raw: usize,
        target: &ColumnType,
        nullable: bool,
        path: &FieldPath,
        depth: usize,
    ) -> Result<Op, SchemaError> {
        let misfit = || {
            field_error(
                path,
                format!(
                    "{} cannot fill column type {}",
                    self.types.describe(raw),
                    target.sql()
                ),
            )
        };
        let op = match (self.types.get(raw), target) {
            (Raw::Null, _) => {
                if !nullable {
                    return Err(field_error(
                        path,
                        format!(
                            "{} can be null but the column is NOT NULL",
                            self.types.describe(raw)
                        ),
                    ));
                }
                Op::Null
            }
            (Raw::Union(branches), _) => {
                let mut ops = Vec::with_capacity(branches.len());
                for branch in branches.clone() {
                    let op = self.value(branch, target, nullable, path, depth)?;
                    ops.push(op);
                }
                Op::Union(ops)
            }
            (Raw::Boolean, ColumnType::Boolean) => Op::Bool,
            (Raw::Int(logical), _) => {
                let ok = match logical {
                    IntLogical::None => matches!(
                        target,
                        ColumnType::TinyInt
                            | ColumnType::SmallInt
                            | ColumnType::Int
                            | ColumnType::BigInt
                    ),
                    IntLogical::Date => *target == ColumnType::Date,
                    IntLogical::TimeMillis => {
                        matches!(target, ColumnType::Int | ColumnType::BigInt)
                    }
                };
                if !ok {
                    return Err(misfit());
                }
                Op::Int(int_op(false, 1, target))
            }
            (Raw::Long(logical), _) => {
                let mul = match (logical, target) {
                    (LongLogical::None | LongLogical::TimeMicros, ColumnType::BigInt) => 1,
                    (LongLogical::TimestampMicros, ColumnType::Timestamp)
                    | (LongLogical::LocalTimestampMicros, ColumnType::TimestampNtz) => 1,
                    (LongLogical::TimestampMillis, ColumnType::Timestamp)
                    | (LongLogical::LocalTimestampMillis, ColumnType::TimestampNtz) => 1000,
                    _ => return Err(misfit()),
                };
                Op::Int(int_op(true, mul, target))
            }
            (Raw::Float, ColumnType::Float) => Op::Float { to_double: false },
            (Raw::Float, ColumnType::Double) => Op::Float { to_double: true },
            (Raw::Double, ColumnType::Double) => Op::Double,
            (Raw::String, ColumnType::String) => Op::Str(StrCheck::Text),
            (Raw::String, ColumnType::Variant) => Op::Str(StrCheck::Json),
            (Raw::UuidString, ColumnType::String) => Op::Str(StrCheck::Uuid),
            (Raw::UuidFixed, ColumnType::String) => {
                self.amplification = self.amplification.max(3);
                Op::UuidFixed
            }
            (Raw::Bytes, ColumnType::Binary) => Op::Bytes,
            (Raw::Fixed(n), ColumnType::Binary) => Op::Fixed(*n),
            (Raw::Decimal { fixed, scale }, ColumnType::String | ColumnType::Double) => {
                if *target == ColumnType::String {
                    // "-0.000…0" plus up to 39 digits, from as little as one byte.
                    self.amplification = self.amplification.max(scale.saturating_add(42));
                }
                Op::Decimal {
                    fixed: *fixed,
                    scale: *scale,
                    to_double: *target == ColumnType::Double,
                }
            }
            (Raw::Enum(symbols), ColumnType::String) => {
                let longest = symbols.iter().map(String::len).max().unwrap_or(0);
                self.amplification = self.amplification.max(longest);
                Op::Enum(symbols.clone())
            }
            (
                Raw::Array(items),
                ColumnType::Array {
                    element,
                    contains_null,
                },
            ) => {
                let items = *items;
                if self.types.min_size(items, &mut Vec::new()) == 0 {
                    return Err(field_error(
                        path,
                        format!(
                            "array items of type {} encode to zero bytes; Sluice does not \
                             decode such arrays",
                            self.types.describe(items)
                        ),
                    ));
                }
                let op = self.value(
                    items,
                    element,
                    *contains_null,
                    &path.child(Segment::Element),
                    depth + 1,
                )?;
                Op::Array(Box::new(op))
            }
            (
                Raw::Map(values),
                ColumnType::Map {
                    key,
                    value,
                    value_contains_null,
                },
            ) if **key == ColumnType::String => {
                let op = self.value(
                    *values,
                    value,
                    *value_contains_null,
                    &path.child(Segment::MapValue),
                    depth + 1,
                )?;
                Op::Map(Box::new(op))
            }
            (Raw::Record { fields, .. }, ColumnType::Struct(columns)) => {
                let fields = fields.clone();
                Op::Record(self.record(&fields, columns, path, depth + 1)?)
            }
            (Raw::Unsupported(what), _) => {
                return Err(field_error(
                    path,
                    format!("Avro type {what} is not supported by Sluice"),
                ))
            }
            _ => return Err(misfit()),
        };
        Ok(op)
    }

    /// Checks that a rescued field's type can be rendered (no zero-size array items, no
    /// unsupported types), following named types once.
    fn check_renderable(
        &self,
        raw: usize,
        path: &FieldPath,
        depth: usize,
    ) -> Result<(), SchemaError> {
        if depth > MAX_DEPTH {
            return Ok(()); // a recursive type: its nodes were checked on the way down
        }
        match self.types.get(raw) {
            Raw::Unsupported(what) => Err(field_error(
                path,
                format!("Avro type {what} is not supported by Sluice"),
            )),
            Raw::Array(items) => {
                if self.types.min_size(*items, &mut Vec::new()) == 0 {
                    return Err(field_error(
                        path,
                        "array items encode to zero bytes; Sluice does not decode such arrays",
                    ));
                }
                self.check_renderable(*items, path, depth + 1)
            }
            Raw::Map(values) => self.check_renderable(*values, path, depth + 1),
            Raw::Union(branches) => branches
                .iter()
                .try_for_each(|b| self.check_renderable(*b, path, depth + 1)),
            Raw::Record { fields, .. } => fields
                .iter()
                .try_for_each(|(_, t)| self.check_renderable(*t, path, depth + 1)),
            _ => Ok(()),
        }
    }
}

/// An integer op into `target` (an integer-valued column).
fn int_op(long: bool, mul: i64, target: &ColumnType) -> IntOp {
    let (min, max) = target.int_range().unwrap_or((i64::MIN, i64::MAX));
    IntOp {
        long,
        mul,
        min,
        max,
        target: target.primitive_name().unwrap_or("integer"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> TableSchema {
        TableSchema::parse(text).expect("schema")
    }

    fn compile(json: &str, text: &str) -> Result<AvroPlan, SchemaError> {
        AvroPlan::compile(json, &table(text), false)
    }

    #[test]
    fn a_schema_that_is_not_a_record_is_refused() {
        let error = compile(r#""long""#, "id BIGINT").expect_err("not a record");
        assert_eq!(
            error.to_string(),
            "Avro schema must be a record (its fields are the table's columns), found long"
        );
    }

    #[test]
    fn a_field_of_the_wrong_type_is_named() {
        let error = compile(
            r#"{"type":"record","name":"R","fields":[{"name":"id","type":"long"},
                {"name":"p","type":{"type":"record","name":"P","fields":[{"name":"x","type":"string"}]}}]}"#,
            "id BIGINT, p STRUCT<x: INT>",
        )
        .expect_err("misfit");
        assert_eq!(
            error.to_string(),
            "Avro field `p.x`: string cannot fill column type INT"
        );
    }

    #[test]
    fn unknown_fields_fail_without_rescue_and_are_rescued_with_it() {
        let json = r#"{"type":"record","name":"R","fields":[{"name":"id","type":"long"},
            {"name":"extra","type":["null","string"]}]}"#;
        let error = compile(json, "id BIGINT").expect_err("unknown");
        assert_eq!(
            error.to_string(),
            "Avro field `extra`: union [null, string] has no column in the table"
        );
        let plan = AvroPlan::compile(json, &table("id BIGINT"), true).expect("rescue");
        assert!(matches!(plan.root.fields[1], FieldOp::Rescue { .. }));
    }

    #[test]
    fn nullability_is_checked_both_ways() {
        let error = compile(
            r#"{"type":"record","name":"R","fields":[{"name":"id","type":["null","long"]}]}"#,
            "id BIGINT NOT NULL",
        )
        .expect_err("nullable into NOT NULL");
        assert_eq!(
            error.to_string(),
            "Avro field `id`: null can be null but the column is NOT NULL"
        );
        let error = compile(
            r#"{"type":"record","name":"R","fields":[{"name":"a","type":"long"}]}"#,
            "a BIGINT, id BIGINT NOT NULL",
        )
        .expect_err("missing NOT NULL");
        assert_eq!(
            error.to_string(),
            "Avro field `id`: NOT NULL column has no field in the Avro schema"
        );
    }

    #[test]
    fn logical_types_meet_their_columns() {
        let json = r#"{"type":"record","name":"R","fields":[
            {"name":"d","type":{"type":"int","logicalType":"date"}},
            {"name":"t","type":{"type":"long","logicalType":"timestamp-millis"}},
            {"name":"n","type":{"type":"long","logicalType":"local-timestamp-micros"}},
            {"name":"u","type":{"type":"string","logicalType":"uuid"}},
            {"name":"m","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
            {"name":"tm","type":{"type":"int","logicalType":"time-millis"}}]}"#;
        compile(
            json,
            "d DATE, t TIMESTAMP, n TIMESTAMP_NTZ, u STRING, m STRING, tm INT",
        )
        .expect("fits");
        let error = compile(
            json,
            "d DATE, t TIMESTAMP_NTZ, n TIMESTAMP_NTZ, u STRING, m STRING, tm INT",
        )
        .expect_err("zone");
        assert_eq!(
            error.to_string(),
            "Avro field `t`: long (timestamp-millis) cannot fill column type TIMESTAMP_NTZ"
        );
    }

    #[test]
    fn arrays_of_zero_size_items_are_refused() {
        let error = compile(
            r#"{"type":"record","name":"R","fields":[{"name":"a","type":{"type":"array","items":"null"}}]}"#,
            "a ARRAY<STRING>",
        )
        .expect_err("zero-size items");
        assert!(
            error.to_string().contains("encode to zero bytes"),
            "{error}"
        );
    }
}
