//! Helpers: descriptor construction, a tiny protobuf encoder, and reading Arrow cells back
//! as JSON values for comparison.

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type,
    TimestampMicrosecondType,
};
use arrow_array::{Array, RecordBatch};
use arrow_schema::DataType;
use base64::Engine;
use prost::Message;
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{
    DescriptorProto, EnumDescriptorProto, EnumValueDescriptorProto, FieldDescriptorProto,
    FieldOptions, MessageOptions,
};
use serde_json::{json, Value as Json};
use sluice_zeroparser::{ProtoPlan, RecordBatchBuilder, TableSchema};

pub fn scalar(name: &str, number: i32, ty: Type) -> FieldDescriptorProto {
    FieldDescriptorProto {
        name: Some(name.into()),
        number: Some(number),
        label: Some(Label::Optional as i32),
        r#type: Some(ty as i32),
        ..Default::default()
    }
}

pub fn repeated(name: &str, number: i32, ty: Type) -> FieldDescriptorProto {
    FieldDescriptorProto {
        label: Some(Label::Repeated as i32),
        ..scalar(name, number, ty)
    }
}

/// `field` with `[packed = true]`.
pub fn packed(field: FieldDescriptorProto) -> FieldDescriptorProto {
    FieldDescriptorProto {
        options: Some(FieldOptions {
            packed: Some(true),
            ..Default::default()
        }),
        ..field
    }
}

pub fn typed(name: &str, number: i32, ty: Type, type_name: &str) -> FieldDescriptorProto {
    FieldDescriptorProto {
        type_name: Some(type_name.into()),
        ..scalar(name, number, ty)
    }
}

pub fn typed_repeated(name: &str, number: i32, ty: Type, type_name: &str) -> FieldDescriptorProto {
    FieldDescriptorProto {
        label: Some(Label::Repeated as i32),
        ..typed(name, number, ty, type_name)
    }
}

pub fn in_oneof(field: FieldDescriptorProto, index: i32) -> FieldDescriptorProto {
    FieldDescriptorProto {
        oneof_index: Some(index),
        ..field
    }
}

pub fn message(name: &str, fields: Vec<FieldDescriptorProto>) -> DescriptorProto {
    DescriptorProto {
        name: Some(name.into()),
        field: fields,
        ..Default::default()
    }
}

pub fn map_entry(
    name: &str,
    key: FieldDescriptorProto,
    value: FieldDescriptorProto,
) -> DescriptorProto {
    DescriptorProto {
        options: Some(MessageOptions {
            map_entry: Some(true),
            ..Default::default()
        }),
        ..message(name, vec![key, value])
    }
}

pub fn enumeration(name: &str, values: &[(&str, i32)]) -> EnumDescriptorProto {
    EnumDescriptorProto {
        name: Some(name.into()),
        value: values
            .iter()
            .map(|(n, v)| EnumValueDescriptorProto {
                name: Some((*n).into()),
                number: Some(*v),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// The telemetry message used by most tests, and its table.
pub const TELEMETRY_SCHEMA: &str = "id BIGINT NOT NULL, device STRING, ts TIMESTAMP, temp DOUBLE, \
    tags ARRAY<STRING>, attrs MAP<STRING,STRING>, loc STRUCT<lat: DOUBLE, lon: DOUBLE NOT NULL>, \
    d DATE, b BINARY, v VARIANT, n TIMESTAMP_NTZ, t TINYINT, s SMALLINT, i INT, \
    nums ARRAY<BIGINT>, kind STRING, ok BOOLEAN, f FLOAT, a STRING, b2 BIGINT, \
    path ARRAY<STRUCT<lat: DOUBLE, lon: DOUBLE NOT NULL>>, \
    places MAP<INT, STRUCT<lat: DOUBLE, lon: DOUBLE NOT NULL>>, big BIGINT, code INT";

pub fn telemetry_descriptor() -> DescriptorProto {
    let mut root = message(
        "Telemetry",
        vec![
            scalar("id", 1, Type::Int64),
            scalar("device", 2, Type::String),
            scalar("ts", 3, Type::Int64),
            scalar("temp", 4, Type::Double),
            repeated("tags", 5, Type::String),
            typed_repeated("attrs", 6, Type::Message, ".sluice.Telemetry.AttrsEntry"),
            typed("loc", 7, Type::Message, ".sluice.Telemetry.Loc"),
            scalar("d", 8, Type::Int32),
            scalar("b", 9, Type::Bytes),
            scalar("v", 10, Type::String),
            scalar("n", 11, Type::Int64),
            scalar("t", 12, Type::Int32),
            scalar("s", 13, Type::Sint32),
            scalar("i", 14, Type::Uint32),
            repeated("nums", 15, Type::Sint64),
            typed("kind", 16, Type::Enum, ".sluice.Telemetry.Kind"),
            scalar("ok", 17, Type::Bool),
            scalar("f", 18, Type::Float),
            in_oneof(scalar("a", 19, Type::String), 0),
            in_oneof(scalar("b2", 20, Type::Int64), 0),
            typed_repeated("path", 21, Type::Message, "Telemetry.Loc"),
            typed_repeated("places", 22, Type::Message, ".sluice.Telemetry.PlacesEntry"),
            scalar("big", 23, Type::Fixed64),
            typed("code", 24, Type::Enum, ".sluice.Telemetry.Kind"),
        ],
    );
    root.nested_type = vec![
        map_entry(
            "AttrsEntry",
            scalar("key", 1, Type::String),
            scalar("value", 2, Type::String),
        ),
        message(
            "Loc",
            vec![
                scalar("lat", 1, Type::Double),
                scalar("lon", 2, Type::Double),
            ],
        ),
        map_entry(
            "PlacesEntry",
            scalar("key", 1, Type::Int32),
            typed("value", 2, Type::Message, ".sluice.Telemetry.Loc"),
        ),
    ];
    root.enum_type = vec![enumeration(
        "Kind",
        &[("KIND_UNSPECIFIED", 0), ("SENSOR", 1), ("GATEWAY", 2)],
    )];
    root.oneof_decl = vec![prost_types::OneofDescriptorProto {
        name: Some("choice".into()),
        ..Default::default()
    }];
    root
}

pub fn telemetry() -> (TableSchema, ProtoPlan, RecordBatchBuilder) {
    let schema = TableSchema::parse(TELEMETRY_SCHEMA).expect("schema parses");
    let plan = ProtoPlan::compile(&telemetry_descriptor().encode_to_vec(), &schema)
        .expect("descriptor compiles");
    let builder = RecordBatchBuilder::new(&schema);
    (schema, plan, builder)
}

/// Compiles `root` against `schema_text`.
pub fn compile(
    root: &DescriptorProto,
    schema_text: &str,
) -> Result<ProtoPlan, sluice_zeroparser::SchemaError> {
    let schema = TableSchema::parse(schema_text).expect("schema parses");
    ProtoPlan::compile(&root.encode_to_vec(), &schema)
}

/// A protobuf encoder for hand-made records.
#[derive(Default, Clone)]
pub struct Enc(pub Vec<u8>);

impl Enc {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn raw_varint(mut self, mut value: u64) -> Self {
        loop {
            let byte = (value & 0x7f) as u8;
            value >>= 7;
            if value == 0 {
                self.0.push(byte);
                return self;
            }
            self.0.push(byte | 0x80);
        }
    }

    pub fn tag(self, number: u32, wire: u8) -> Self {
        self.raw_varint(u64::from(number) << 3 | u64::from(wire))
    }

    pub fn varint(self, number: u32, value: u64) -> Self {
        self.tag(number, 0).raw_varint(value)
    }

    pub fn int(self, number: u32, value: i64) -> Self {
        self.varint(number, value as u64)
    }

    pub fn sint(self, number: u32, value: i64) -> Self {
        self.varint(number, ((value << 1) ^ (value >> 63)) as u64)
    }

    pub fn fixed64(mut self, number: u32, value: u64) -> Self {
        self = self.tag(number, 1);
        self.0.extend_from_slice(&value.to_le_bytes());
        self
    }

    pub fn double(self, number: u32, value: f64) -> Self {
        self.fixed64(number, value.to_bits())
    }

    pub fn fixed32(mut self, number: u32, value: u32) -> Self {
        self = self.tag(number, 5);
        self.0.extend_from_slice(&value.to_le_bytes());
        self
    }

    pub fn float(self, number: u32, value: f32) -> Self {
        self.fixed32(number, value.to_bits())
    }

    pub fn bytes(mut self, number: u32, value: &[u8]) -> Self {
        self = self.tag(number, 2).raw_varint(value.len() as u64);
        self.0.extend_from_slice(value);
        self
    }

    pub fn string(self, number: u32, value: &str) -> Self {
        self.bytes(number, value.as_bytes())
    }

    pub fn message(self, number: u32, inner: Enc) -> Self {
        self.bytes(number, &inner.0)
    }

    pub fn raw(mut self, bytes: &[u8]) -> Self {
        self.0.extend_from_slice(bytes);
        self
    }

    pub fn build(self) -> Vec<u8> {
        self.0
    }
}

/// A record with just the NOT NULL telemetry column set.
pub fn minimal(id: i64) -> Enc {
    Enc::new().int(1, id)
}

/// The cell at `row` of column `name`, as JSON: numbers, strings, base64 for binary, arrays
/// for lists, `[[key, value], ...]` for maps, objects for structs, `"NaN"` etc. for
/// non-finite floats.
pub fn cell(batch: &RecordBatch, name: &str, row: usize) -> Json {
    let column = batch
        .column_by_name(name)
        .unwrap_or_else(|| panic!("no column {name}"));
    array_cell(column.as_ref(), row)
}

fn float(value: f64) -> Json {
    if value.is_finite() {
        json!(value)
    } else {
        json!(value.to_string())
    }
}

pub fn array_cell(array: &dyn Array, row: usize) -> Json {
    if array.is_null(row) {
        return Json::Null;
    }
    match array.data_type() {
        DataType::Int8 => json!(array.as_primitive::<Int8Type>().value(row)),
        DataType::Int16 => json!(array.as_primitive::<Int16Type>().value(row)),
        DataType::Int32 => json!(array.as_primitive::<Int32Type>().value(row)),
        DataType::Int64 => json!(array.as_primitive::<Int64Type>().value(row)),
        DataType::Date32 => json!(array.as_primitive::<Date32Type>().value(row)),
        DataType::Timestamp(..) => {
            json!(array.as_primitive::<TimestampMicrosecondType>().value(row))
        }
        DataType::Float32 => float(f64::from(array.as_primitive::<Float32Type>().value(row))),
        DataType::Float64 => float(array.as_primitive::<Float64Type>().value(row)),
        DataType::Utf8 => json!(array.as_string::<i32>().value(row)),
        DataType::Boolean => json!(array.as_boolean().value(row)),
        DataType::Binary => {
            json!(base64::engine::general_purpose::STANDARD
                .encode(array.as_binary::<i32>().value(row)))
        }
        DataType::List(_) => {
            let items = array.as_list::<i32>().value(row);
            Json::Array(
                (0..items.len())
                    .map(|i| array_cell(items.as_ref(), i))
                    .collect(),
            )
        }
        DataType::Map(..) => {
            let entries = array.as_map().value(row);
            let keys = entries.column(0);
            let values = entries.column(1);
            Json::Array(
                (0..entries.len())
                    .map(|i| json!([array_cell(keys.as_ref(), i), array_cell(values.as_ref(), i)]))
                    .collect(),
            )
        }
        DataType::Struct(fields) => {
            let array = array.as_struct();
            Json::Object(
                fields
                    .iter()
                    .enumerate()
                    .map(|(i, f)| (f.name().clone(), array_cell(array.column(i).as_ref(), row)))
                    .collect(),
            )
        }
        other => panic!("unexpected type {other}"),
    }
}

/// Every row of a batch as a JSON object keyed by column name.
pub fn rows(batch: &RecordBatch) -> Vec<Json> {
    (0..batch.num_rows())
        .map(|row| {
            Json::Object(
                batch
                    .schema()
                    .fields()
                    .iter()
                    .map(|f| (f.name().clone(), cell(batch, f.name(), row)))
                    .collect(),
            )
        })
        .collect()
}
