//! Compiling a descriptor against a table schema into a [`ProtoPlan`], once per stream.
//!
//! Compilation checks that every descriptor field has a column of a compatible type (see
//! `proto::scalar` for the scalar table), that every NOT NULL column has a field, and that
//! repeated fields meet ARRAY / MAP columns. The plan follows the table schema, so
//! recursive message types are followed only as deep as the schema goes.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, FieldDescriptorProto};

use super::descriptor::{decode_descriptor, TypeRegistry};
use super::fast::FastEntry;
use super::kind::ProtoKind;
use super::plan::{
    lookup_tables, schema_id, FieldPlan, FieldShape, MapPlan, MapValuePlan, MessagePlan, ProtoPlan,
};
use super::scalar::{EnumNames, ScalarPlan};
use super::wire::MAX_FIELD_NUMBER;
use crate::error::SchemaError;
use crate::path::{FieldPath, Segment};
use crate::schema::{find_column, Column, ColumnType, TableSchema, MAX_DEPTH};

impl ProtoPlan {
    /// Compiles an encoded `google.protobuf.DescriptorProto` against `schema`.
    pub fn compile(
        descriptor_proto: &[u8],
        schema: &TableSchema,
    ) -> Result<ProtoPlan, SchemaError> {
        schema.validate()?;
        let root = decode_descriptor(descriptor_proto)?;
        let registry = TypeRegistry::new(&root);
        let mut compiler = Compiler {
            registry: &registry,
            stack: Vec::new(),
            amplification: 1,
        };
        let plan = compiler.message(root.name(), &root, &schema.columns, &FieldPath::root(), 0)?;
        Ok(ProtoPlan {
            message_name: root.name().to_owned(),
            root: plan,
            schema_id: schema_id(schema),
            amplification: compiler.amplification,
        })
    }
}

struct Compiler<'r, 'd> {
    registry: &'r TypeRegistry<'d>,
    /// Registry names of the messages being compiled, outermost first.
    stack: Vec<String>,
    amplification: usize,
}

/// What a descriptor field's type resolves to.
enum Resolved<'d> {
    Scalar(ProtoKind, Option<Arc<EnumNames>>),
    Message(String, &'d DescriptorProto),
}

impl<'d> Compiler<'_, 'd> {
    fn message(
        &mut self,
        name: &str,
        message: &'d DescriptorProto,
        columns: &[Column],
        path: &FieldPath,
        depth: usize,
    ) -> Result<MessagePlan, SchemaError> {
        if depth > MAX_DEPTH {
            return Err(SchemaError::DepthExceeded {
                path: path.clone(),
                limit: MAX_DEPTH,
            });
        }
        self.stack.push(name.to_owned());
        let mut fields = Vec::new();
        let mut numbers: Vec<(u32, u32)> = Vec::new();
        let mut seen_numbers: HashSet<u32> = HashSet::with_capacity(message.field.len());
        let mut filled_by: Vec<Option<&str>> = vec![None; columns.len()];
        let mut oneof_members: Vec<(i32, usize)> = Vec::new();
        for field in &message.field {
            let field_path = path.child(Segment::Field(field.name().to_owned()));
            let number = field.number();
            if !(1..=MAX_FIELD_NUMBER as i32).contains(&number) {
                return Err(unsupported(
                    &field_path,
                    format!("invalid field number {number}"),
                ));
            }
            let number = number as u32;
            if !seen_numbers.insert(number) {
                return Err(unsupported(
                    &field_path,
                    format!("duplicate field number {number}"),
                ));
            }
            let resolved = self.resolve(field, &field_path)?;
            let Some(slot) = find_column(columns, field.name()) else {
                if let Resolved::Message(type_name, _) = &resolved {
                    if self.stack.contains(type_name) {
                        // A recursive reference beyond the depth the table schema covers:
                        // decoded as an unknown field.
                        continue;
                    }
                }
                return Err(SchemaError::NoColumnForField {
                    path: field_path,
                    proto_type: describe(field, &resolved),
                });
            };
            let Some(column) = columns.get(slot) else {
                continue;
            };
            if let Some(Some(first)) = filled_by.get(slot) {
                return Err(SchemaError::DuplicateFieldMapping {
                    path: path.child(Segment::Field(column.name.clone())),
                    first: (*first).to_owned(),
                    second: field.name().to_owned(),
                });
            }
            if let Some(entry) = filled_by.get_mut(slot) {
                *entry = Some(field.name());
            }
            let shape = self.shape(field, resolved, column, &field_path, depth)?;
            if let Some(oneof) = field.oneof_index {
                oneof_members.push((oneof, slot));
            }
            numbers.push((number, fields.len() as u32));
            fields.push(FieldPlan {
                slot,
                name: column.name.clone(),
                oneof: field.oneof_index.map(|i| i as usize),
                shape,
            });
        }
        for (column, filled) in columns.iter().zip(&filled_by) {
            if !column.nullable && filled.is_none() {
                return Err(SchemaError::MissingNotNullField {
                    path: path.child(Segment::Field(column.name.clone())),
                });
            }
        }
        self.stack.pop();
        let oneofs = group_oneofs(&mut fields, &oneof_members);
        let repeated_slots = fields
            .iter()
            .filter_map(|f| match f.shape {
                FieldShape::RepeatedScalar(_) | FieldShape::RepeatedMessage(_) => {
                    Some((f.slot, false))
                }
                FieldShape::Map(_) => Some((f.slot, true)),
                FieldShape::Scalar(_) | FieldShape::Message(_) => None,
            })
            .collect();
        let (dense, sparse) = lookup_tables(&numbers);
        let mut fast = vec![FastEntry::NONE; dense.len()];
        for (number, index) in &numbers {
            if let (Some(entry), Some(field)) =
                (fast.get_mut(*number as usize), fields.get(*index as usize))
            {
                *entry = match &field.shape {
                    FieldShape::Scalar(scalar) if field.oneof.is_none() => {
                        FastEntry::of(scalar, field.slot)
                    }
                    FieldShape::RepeatedScalar(scalar) => FastEntry::repeated(scalar, field.slot),
                    FieldShape::Message(_) if field.oneof.is_none() => {
                        FastEntry::message(*index as usize, false)
                    }
                    FieldShape::RepeatedMessage(_) => FastEntry::message(*index as usize, true),
                    _ => FastEntry::NONE,
                };
            }
        }
        Ok(MessagePlan {
            fast,
            fields,
            slot_count: columns.len(),
            oneofs,
            repeated_slots,
            dense,
            sparse,
        })
    }

    fn resolve(
        &self,
        field: &FieldDescriptorProto,
        path: &FieldPath,
    ) -> Result<Resolved<'d>, SchemaError> {
        let declared = field.r#type.and_then(|t| Type::try_from(t).ok());
        let unresolved = || SchemaError::UnresolvedType {
            path: path.clone(),
            type_name: field.type_name().to_owned(),
        };
        let kind = match declared {
            Some(t) => ProtoKind::from_type(t),
            // No type: protoc leaves it out only for references it could not resolve.
            None if self.registry.message(field.type_name()).is_some() => ProtoKind::Message,
            None if self.registry.enumeration(field.type_name()).is_some() => ProtoKind::Enum,
            None => return Err(unresolved()),
        };
        match kind {
            ProtoKind::Message | ProtoKind::Group => {
                let (name, message) = self
                    .registry
                    .message(field.type_name())
                    .ok_or_else(unresolved)?;
                if kind == ProtoKind::Group {
                    return Err(unsupported(path, "groups are not supported".into()));
                }
                Ok(Resolved::Message(name.to_owned(), message))
            }
            ProtoKind::Enum => {
                let enumeration = self
                    .registry
                    .enumeration(field.type_name())
                    .ok_or_else(unresolved)?;
                let names = EnumNames::new(
                    enumeration
                        .value
                        .iter()
                        .map(|v| (v.number(), v.name().to_owned())),
                );
                Ok(Resolved::Scalar(ProtoKind::Enum, Some(Arc::new(names))))
            }
            kind => Ok(Resolved::Scalar(kind, None)),
        }
    }

    fn shape(
        &mut self,
        field: &FieldDescriptorProto,
        resolved: Resolved<'d>,
        column: &Column,
        path: &FieldPath,
        depth: usize,
    ) -> Result<FieldShape, SchemaError> {
        let repeated = field.label == Some(Label::Repeated as i32);
        let incompatible = |resolved: &Resolved<'_>| SchemaError::IncompatibleType {
            path: path.clone(),
            proto_type: describe(field, resolved),
            column_type: column.data_type.sql(),
        };
        match (&column.data_type, repeated, &resolved) {
            (
                ColumnType::Map {
                    key,
                    value,
                    value_contains_null: _,
                },
                true,
                Resolved::Message(_, entry),
            ) if map_entry_fields(entry).is_some() => {
                let Some((key_field, value_field)) = map_entry_fields(entry) else {
                    return Err(incompatible(&resolved));
                };
                let key_resolved = self.resolve(key_field, path)?;
                let key_plan = match &key_resolved {
                    Resolved::Scalar(kind, names) => self.scalar(*kind, names, key),
                    Resolved::Message(..) => None,
                };
                let value_resolved = self.resolve(value_field, path)?;
                let value_plan = if value_field.label == Some(Label::Repeated as i32) {
                    None
                } else {
                    match (&value_resolved, value.as_ref()) {
                        (Resolved::Scalar(kind, names), value) => {
                            self.scalar(*kind, names, value).map(MapValuePlan::Scalar)
                        }
                        (Resolved::Message(name, message), ColumnType::Struct(columns)) => {
                            Some(MapValuePlan::Message(self.message(
                                name,
                                message,
                                columns,
                                &path.child(Segment::MapValue),
                                depth + 1,
                            )?))
                        }
                        _ => None,
                    }
                };
                match (key_plan, value_plan) {
                    (Some(key), Some(value)) => {
                        Ok(FieldShape::Map(Box::new(MapPlan { key, value })))
                    }
                    _ => Err(incompatible(&resolved)),
                }
            }
            (ColumnType::Array { element, .. }, true, _) if !is_declared_map_entry(&resolved) => {
                match (&resolved, element.as_ref()) {
                    (Resolved::Scalar(kind, names), element) => self
                        .scalar(*kind, names, element)
                        .map(FieldShape::RepeatedScalar)
                        .ok_or_else(|| incompatible(&resolved)),
                    (Resolved::Message(name, message), ColumnType::Struct(columns)) => {
                        let plan = self.message(
                            name,
                            message,
                            columns,
                            &path.child(Segment::Element),
                            depth + 1,
                        )?;
                        Ok(FieldShape::RepeatedMessage(Box::new(plan)))
                    }
                    _ => Err(incompatible(&resolved)),
                }
            }
            (ColumnType::Struct(columns), false, Resolved::Message(name, message)) => {
                let plan = self.message(name, message, columns, path, depth + 1)?;
                Ok(FieldShape::Message(Box::new(plan)))
            }
            (data_type, false, Resolved::Scalar(kind, names)) => self
                .scalar(*kind, names, data_type)
                .map(FieldShape::Scalar)
                .ok_or_else(|| incompatible(&resolved)),
            _ => Err(incompatible(&resolved)),
        }
    }

    /// The plan of a scalar field filling `data_type`, if compatible.
    fn scalar(
        &mut self,
        kind: ProtoKind,
        names: &Option<Arc<EnumNames>>,
        data_type: &ColumnType,
    ) -> Option<ScalarPlan> {
        if !kind.can_fill(data_type) {
            return None;
        }
        let enum_names = if kind == ProtoKind::Enum && *data_type == ColumnType::String {
            let names = names.clone().unwrap_or_default();
            self.amplification = self.amplification.max(names.longest()).max(1);
            Some(names)
        } else {
            None
        };
        Some(ScalarPlan {
            kind,
            target: data_type.clone(),
            enum_names,
        })
    }
}

fn unsupported(path: &FieldPath, reason: String) -> SchemaError {
    SchemaError::UnsupportedField {
        path: path.clone(),
        reason,
    }
}

fn is_declared_map_entry(resolved: &Resolved<'_>) -> bool {
    matches!(resolved, Resolved::Message(_, message)
        if message.options.as_ref().and_then(|o| o.map_entry) == Some(true))
}

/// The key (1) and value (2) fields of a map entry message: one with `map_entry` set, or any
/// message with exactly the fields `key = 1` and `value = 2`.
fn map_entry_fields(
    entry: &DescriptorProto,
) -> Option<(&FieldDescriptorProto, &FieldDescriptorProto)> {
    let declared = entry.options.as_ref().and_then(|o| o.map_entry) == Some(true);
    if entry.field.len() != 2 {
        return None;
    }
    let key = entry.field.iter().find(|f| f.number() == 1)?;
    let value = entry.field.iter().find(|f| f.number() == 2)?;
    if declared || (key.name() == "key" && value.name() == "value") {
        Some((key, value))
    } else {
        None
    }
}

/// The field's type as `.proto` text, for messages: `repeated int32`, `map<string, int64>`.
fn describe(field: &FieldDescriptorProto, resolved: &Resolved<'_>) -> String {
    let repeated = field.label == Some(Label::Repeated as i32);
    let base = match resolved {
        Resolved::Scalar(ProtoKind::Enum, _) => format!("enum {}", field.type_name()),
        Resolved::Scalar(kind, _) => kind.name().to_owned(),
        Resolved::Message(name, message) => {
            if repeated && is_declared_map_entry(resolved) {
                if let Some((key, value)) = map_entry_fields(message) {
                    let part = |f: &FieldDescriptorProto| match f
                        .r#type
                        .and_then(|t| Type::try_from(t).ok())
                    {
                        Some(Type::Message) | Some(Type::Enum) | None => {
                            f.type_name().trim_start_matches('.').to_owned()
                        }
                        Some(t) => ProtoKind::from_type(t).name().to_owned(),
                    };
                    return format!("map<{}, {}>", part(key), part(value));
                }
            }
            format!("message {name}")
        }
    };
    if repeated {
        format!("repeated {base}")
    } else {
        base
    }
}

/// Keeps only oneofs with two or more mapped members and renumbers the fields' references.
fn group_oneofs(fields: &mut [FieldPlan], members: &[(i32, usize)]) -> Vec<Vec<usize>> {
    let mut by_oneof: HashMap<usize, Vec<usize>> = HashMap::new();
    for (oneof, slot) in members {
        by_oneof.entry(*oneof as usize).or_default().push(*slot);
    }
    let mut position: HashMap<usize, usize> = HashMap::new();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for field in fields.iter_mut() {
        field.oneof = field.oneof.and_then(|oneof| {
            if let Some(at) = position.get(&oneof) {
                return Some(*at);
            }
            let slots = by_oneof.remove(&oneof).filter(|slots| slots.len() > 1)?;
            position.insert(oneof, groups.len());
            groups.push(slots);
            Some(groups.len() - 1)
        });
    }
    groups
}
