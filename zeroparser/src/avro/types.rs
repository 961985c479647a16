//! The Avro writer schema as an arena of [`Raw`] types: parsed once from the stream's
//! `avro_schema_json` by the `apache-avro` crate (names, namespaces, logical types), then
//! flattened here so that named types referenced again (recursive records included) are
//! indices, not copies. The plan compiler and the rescue renderer both walk this arena.

use std::collections::HashMap;

use apache_avro::schema::{InnerDecimalSchema, Name, UuidSchema};
use apache_avro::Schema;

use crate::error::SchemaError;

/// One writer type. Children are indices into [`Types::nodes`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Raw {
    /// `null`: no bytes.
    Null,
    /// `boolean`: one byte, 0 or 1.
    Boolean,
    /// `int` and the logical types over it.
    Int(IntLogical),
    /// `long` and the logical types over it.
    Long(LongLogical),
    /// `float`: 4 bytes little-endian.
    Float,
    /// `double`: 8 bytes little-endian.
    Double,
    /// `bytes`.
    Bytes,
    /// `string`.
    String,
    /// `string` with logical type `uuid`.
    UuidString,
    /// `fixed` of this size.
    Fixed(usize),
    /// `fixed(16)` with logical type `uuid`.
    UuidFixed,
    /// `decimal` over `bytes` (`fixed: None`) or `fixed` of the given size.
    Decimal {
        /// The size of the fixed it lies on, or `None` for bytes.
        fixed: Option<usize>,
        /// Digits after the decimal point.
        scale: usize,
    },
    /// An enum's symbols.
    Enum(Vec<String>),
    /// An array of items.
    Array(usize),
    /// A map from strings to values.
    Map(usize),
    /// A record: (field name, type), in writer order.
    Record {
        /// Full name, for messages.
        name: String,
        /// Fields.
        fields: Vec<(String, usize)>,
    },
    /// A union's branches.
    Union(Vec<usize>),
    /// A type Sluice does not decode (named in the error).
    Unsupported(&'static str),
}

/// Logical types over `int`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IntLogical {
    /// Plain `int`.
    None,
    /// `date`: days since the epoch.
    Date,
    /// `time-millis`: milliseconds after midnight.
    TimeMillis,
}

/// Logical types over `long`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LongLogical {
    /// Plain `long`.
    None,
    /// `time-micros`.
    TimeMicros,
    /// `timestamp-millis`.
    TimestampMillis,
    /// `timestamp-micros`.
    TimestampMicros,
    /// `local-timestamp-millis`.
    LocalTimestampMillis,
    /// `local-timestamp-micros`.
    LocalTimestampMicros,
}

/// The writer schema's types; `root` is the datum's type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Types {
    pub(crate) nodes: Vec<Raw>,
    pub(crate) root: usize,
}

impl Types {
    /// Parses `json` (an Avro schema) into the arena.
    pub(crate) fn parse(json: &str) -> Result<Types, SchemaError> {
        let schema = Schema::parse_str(json).map_err(|e| SchemaError::InvalidAvroSchema {
            reason: e.to_string(),
        })?;
        let mut types = Types {
            nodes: Vec::new(),
            root: 0,
        };
        let mut names = HashMap::new();
        types.root = types.add(&schema, &mut names)?;
        Ok(types)
    }

    /// The type at `index` (an index this arena handed out).
    pub(crate) fn get(&self, index: usize) -> &Raw {
        self.nodes.get(index).unwrap_or(&Raw::Null)
    }

    fn push(&mut self, raw: Raw) -> usize {
        self.nodes.push(raw);
        self.nodes.len() - 1
    }

    fn set(&mut self, index: usize, raw: Raw) {
        if let Some(slot) = self.nodes.get_mut(index) {
            *slot = raw;
        }
    }

    fn add(
        &mut self,
        schema: &Schema,
        names: &mut HashMap<Name, usize>,
    ) -> Result<usize, SchemaError> {
        let raw = match schema {
            Schema::Null => Raw::Null,
            Schema::Boolean => Raw::Boolean,
            Schema::Int => Raw::Int(IntLogical::None),
            Schema::Date => Raw::Int(IntLogical::Date),
            Schema::TimeMillis => Raw::Int(IntLogical::TimeMillis),
            Schema::Long => Raw::Long(LongLogical::None),
            Schema::TimeMicros => Raw::Long(LongLogical::TimeMicros),
            Schema::TimestampMillis => Raw::Long(LongLogical::TimestampMillis),
            Schema::TimestampMicros => Raw::Long(LongLogical::TimestampMicros),
            Schema::LocalTimestampMillis => Raw::Long(LongLogical::LocalTimestampMillis),
            Schema::LocalTimestampMicros => Raw::Long(LongLogical::LocalTimestampMicros),
            Schema::TimestampNanos => Raw::Unsupported("timestamp-nanos"),
            Schema::LocalTimestampNanos => Raw::Unsupported("local-timestamp-nanos"),
            Schema::BigDecimal => Raw::Unsupported("big-decimal"),
            Schema::Duration(_) => Raw::Unsupported("duration"),
            Schema::Float => Raw::Float,
            Schema::Double => Raw::Double,
            Schema::Bytes => Raw::Bytes,
            Schema::String => Raw::String,
            Schema::Uuid(UuidSchema::String) => Raw::UuidString,
            Schema::Uuid(UuidSchema::Fixed(fixed)) => {
                let index = self.push(Raw::UuidFixed);
                names.insert(fixed.name.clone(), index);
                return Ok(index);
            }
            Schema::Uuid(UuidSchema::Bytes) => Raw::Unsupported("uuid on bytes"),
            Schema::Fixed(fixed) => {
                let index = self.push(Raw::Fixed(fixed.size));
                names.insert(fixed.name.clone(), index);
                return Ok(index);
            }
            Schema::Decimal(decimal) => match &decimal.inner {
                InnerDecimalSchema::Bytes => Raw::Decimal {
                    fixed: None,
                    scale: decimal.scale,
                },
                InnerDecimalSchema::Fixed(fixed) => {
                    let index = self.push(Raw::Decimal {
                        fixed: Some(fixed.size),
                        scale: decimal.scale,
                    });
                    names.insert(fixed.name.clone(), index);
                    return Ok(index);
                }
            },
            Schema::Enum(e) => {
                let index = self.push(Raw::Enum(e.symbols.clone()));
                names.insert(e.name.clone(), index);
                return Ok(index);
            }
            Schema::Array(array) => {
                let items = self.add(&array.items, names)?;
                Raw::Array(items)
            }
            Schema::Map(map) => {
                let values = self.add(&map.types, names)?;
                Raw::Map(values)
            }
            Schema::Union(union) => {
                let mut branches = Vec::with_capacity(union.variants().len());
                for variant in union.variants() {
                    branches.push(self.add(variant, names)?);
                }
                Raw::Union(branches)
            }
            Schema::Record(record) => {
                // Registered before its fields, so a field may refer back to it.
                let index = self.push(Raw::Null);
                names.insert(record.name.clone(), index);
                let mut fields = Vec::with_capacity(record.fields.len());
                for field in &record.fields {
                    fields.push((field.name.clone(), self.add(&field.schema, names)?));
                }
                self.set(
                    index,
                    Raw::Record {
                        name: record.name.to_string(),
                        fields,
                    },
                );
                return Ok(index);
            }
            Schema::Ref { name } => {
                return names
                    .get(name)
                    .copied()
                    .ok_or_else(|| SchemaError::InvalidAvroSchema {
                        reason: format!("unresolved type reference `{name}`"),
                    })
            }
        };
        Ok(self.push(raw))
    }

    /// The fewest bytes a value of type `index` takes (0 for `null`, an empty record, a
    /// zero-size fixed). `visiting` guards recursive records (a record that contains itself
    /// without a union in between has no finite value; counted as 1).
    pub(crate) fn min_size(&self, index: usize, visiting: &mut Vec<usize>) -> usize {
        if visiting.contains(&index) {
            return 1;
        }
        match self.get(index) {
            Raw::Null | Raw::Unsupported(_) => 0,
            Raw::Fixed(n) => *n,
            Raw::UuidFixed => 16,
            Raw::Decimal { fixed: Some(n), .. } => *n,
            Raw::Float => 4,
            Raw::Double => 8,
            Raw::Record { fields, .. } => {
                visiting.push(index);
                let size = fields
                    .iter()
                    .map(|(_, t)| self.min_size(*t, visiting))
                    .fold(0usize, usize::saturating_add);
                visiting.pop();
                size
            }
            _ => 1,
        }
    }

    /// A short name of type `index` for messages: `int`, `array<string>`, `record Point`.
    pub(crate) fn describe(&self, index: usize) -> String {
        self.describe_depth(index, 0)
    }

    fn describe_depth(&self, index: usize, depth: usize) -> String {
        if depth > 4 {
            return "…".into();
        }
        match self.get(index) {
            Raw::Null => "null".into(),
            Raw::Boolean => "boolean".into(),
            Raw::Int(IntLogical::None) => "int".into(),
            Raw::Int(IntLogical::Date) => "int (date)".into(),
            Raw::Int(IntLogical::TimeMillis) => "int (time-millis)".into(),
            Raw::Long(logical) => match logical {
                LongLogical::None => "long".into(),
                LongLogical::TimeMicros => "long (time-micros)".into(),
                LongLogical::TimestampMillis => "long (timestamp-millis)".into(),
                LongLogical::TimestampMicros => "long (timestamp-micros)".into(),
                LongLogical::LocalTimestampMillis => "long (local-timestamp-millis)".into(),
                LongLogical::LocalTimestampMicros => "long (local-timestamp-micros)".into(),
            },
            Raw::Float => "float".into(),
            Raw::Double => "double".into(),
            Raw::Bytes => "bytes".into(),
            Raw::String => "string".into(),
            Raw::UuidString => "string (uuid)".into(),
            Raw::Fixed(n) => format!("fixed({n})"),
            Raw::UuidFixed => "fixed(16) (uuid)".into(),
            Raw::Decimal { fixed: None, scale } => format!("bytes (decimal, scale {scale})"),
            Raw::Decimal {
                fixed: Some(n),
                scale,
            } => format!("fixed({n}) (decimal, scale {scale})"),
            Raw::Enum(_) => "enum".into(),
            Raw::Array(items) => format!("array<{}>", self.describe_depth(*items, depth + 1)),
            Raw::Map(values) => format!("map<{}>", self.describe_depth(*values, depth + 1)),
            Raw::Record { name, .. } => format!("record {name}"),
            Raw::Union(branches) => {
                let names: Vec<String> = branches
                    .iter()
                    .map(|b| self.describe_depth(*b, depth + 1))
                    .collect();
                format!("union [{}]", names.join(", "))
            }
            Raw::Unsupported(what) => (*what).into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_types_are_shared_and_recursion_resolves() {
        let types = Types::parse(
            r#"{"type":"record","name":"Node","fields":[
                {"name":"v","type":"long"},
                {"name":"next","type":["null","Node"]},
                {"name":"f","type":{"type":"fixed","name":"F","size":3}},
                {"name":"g","type":"F"}]}"#,
        )
        .expect("schema");
        let Raw::Record { fields, .. } = types.get(types.root) else {
            panic!("not a record");
        };
        let Raw::Union(branches) = types.get(fields[1].1) else {
            panic!("not a union");
        };
        assert_eq!(branches[1], types.root);
        assert_eq!(fields[2].1, fields[3].1);
        assert_eq!(types.describe(fields[1].1), "union [null, record Node]");
        assert_eq!(types.min_size(types.root, &mut Vec::new()), 1 + 1 + 3 + 3);
    }

    #[test]
    fn schema_json_that_is_not_avro_is_refused() {
        let error = Types::parse(r#"{"type":"recrd"}"#).expect_err("bad");
        assert!(
            error.to_string().starts_with("Avro schema is not valid: "),
            "{error}"
        );
    }
}
