//! The Sluice table schema (SQL text) that matches a benchmark message descriptor, following
//! the type mapping in ARCHITECTURE.md: every column nullable, named after its field.

use prost_reflect::{FieldDescriptor, Kind, MessageDescriptor};

/// `name TYPE, ...` for every field of `message`.
pub fn table_sql(message: &MessageDescriptor) -> String {
    message
        .fields()
        .map(|field| format!("{} {}", field.name(), field_sql(&field)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn field_sql(field: &FieldDescriptor) -> String {
    if field.is_map() {
        if let Kind::Message(entry) = field.kind() {
            let key = entry.map_entry_key_field();
            let value = entry.map_entry_value_field();
            return format!(
                "MAP<{}, {}>",
                kind_sql(&key.kind()),
                kind_sql(&value.kind())
            );
        }
    }
    if field.is_list() {
        return format!("ARRAY<{}>", kind_sql(&field.kind()));
    }
    kind_sql(&field.kind())
}

fn kind_sql(kind: &Kind) -> String {
    match kind {
        Kind::Double => "DOUBLE".into(),
        Kind::Float => "FLOAT".into(),
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => "INT".into(),
        Kind::Int64
        | Kind::Sint64
        | Kind::Sfixed64
        | Kind::Uint32
        | Kind::Fixed32
        | Kind::Uint64
        | Kind::Fixed64 => "BIGINT".into(),
        Kind::Bool => "BOOLEAN".into(),
        Kind::String | Kind::Enum(_) => "STRING".into(),
        Kind::Bytes => "BINARY".into(),
        Kind::Message(message) => format!("STRUCT<{}>", struct_fields(message)),
    }
}

fn struct_fields(message: &MessageDescriptor) -> String {
    message
        .fields()
        .map(|field| format!("{}: {}", field.name(), field_sql(&field)))
        .collect::<Vec<_>>()
        .join(", ")
}
