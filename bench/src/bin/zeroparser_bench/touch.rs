//! Mode (a), "parse and touch every field once": each decoder parses a record and every
//! field value (every element of repeated fields and maps) is read once into a checksum.

use std::hint::black_box;

use databricks_zerobus_ingest_sdk::zeroparser::parser::ParsedMessage;
use databricks_zerobus_ingest_sdk::zeroparser::types::{FieldValueRef, MapKeyRef, ParsedMapValue};
use databricks_zerobus_ingest_sdk::zeroparser::MessageRegistry;
use prost_reflect::{DynamicMessage, Kind, MapKey, MessageDescriptor, Value};
use sluice_zeroparser::{ProtoPlan, Scalar, Visitor};

use crate::prost_types_gen::{
    AirQuality, AllTypes, NeowiseRow, TelemetryList, TelemetryMap, TelemetryNested, WideRecord,
};
use crate::workloads::Message;

/// A value folded into a checksum.
pub trait Touch {
    fn touch(&self) -> u64;
}

macro_rules! touch_as_u64 {
    ($($t:ty),*) => {$(impl Touch for $t {
        fn touch(&self) -> u64 { *self as u64 }
    })*};
}
touch_as_u64!(i32, i64, u32, u64, bool);

impl Touch for f32 {
    fn touch(&self) -> u64 {
        u64::from(self.to_bits())
    }
}
impl Touch for f64 {
    fn touch(&self) -> u64 {
        self.to_bits()
    }
}
impl Touch for String {
    fn touch(&self) -> u64 {
        self.len() as u64
    }
}
impl Touch for Vec<u8> {
    fn touch(&self) -> u64 {
        self.len() as u64
    }
}
impl<T: Touch> Touch for Option<T> {
    fn touch(&self) -> u64 {
        self.as_ref().map_or(0, Touch::touch)
    }
}
impl<T: Touch> Touch for Vec<T> {
    fn touch(&self) -> u64 {
        self.iter().fold(0u64, |h, v| h.wrapping_add(v.touch()))
    }
}

/// prost (generated code): decode, touch every struct field.
pub fn prost(message: Message, records: &[Vec<u8>]) -> u64 {
    fn run<M: prost::Message + Default + Touch>(records: &[Vec<u8>]) -> u64 {
        records
            .iter()
            .fold(0u64, |h, bytes| match M::decode(bytes.as_slice()) {
                Ok(m) => h.wrapping_add(black_box(m.touch())),
                Err(_) => h,
            })
    }
    match message {
        Message::AirQuality => run::<AirQuality>(records),
        Message::AllTypes => run::<AllTypes>(records),
        Message::WideRecord => run::<WideRecord>(records),
        Message::NeowiseRow => run::<NeowiseRow>(records),
        Message::TelemetryList => run::<TelemetryList>(records),
        Message::TelemetryNested => run::<TelemetryNested>(records),
        Message::TelemetryMap => run::<TelemetryMap>(records),
    }
}

/// prost-reflect: `DynamicMessage::decode`, then every field of the descriptor.
pub fn prost_reflect(descriptor: &MessageDescriptor, records: &[Vec<u8>]) -> u64 {
    let fields: Vec<_> = descriptor.fields().collect();
    records.iter().fold(0u64, |mut h, bytes| {
        if let Ok(m) = DynamicMessage::decode(descriptor.clone(), bytes.as_slice()) {
            for field in &fields {
                h = h.wrapping_add(black_box(reflect_value(&m.get_field(field))));
            }
        }
        h
    })
}

fn reflect_value(value: &Value) -> u64 {
    match value {
        Value::Bool(v) => v.touch(),
        Value::I32(v) => v.touch(),
        Value::I64(v) => v.touch(),
        Value::U32(v) => v.touch(),
        Value::U64(v) => v.touch(),
        Value::F32(v) => v.touch(),
        Value::F64(v) => v.touch(),
        Value::String(v) => v.len() as u64,
        Value::Bytes(v) => v.len() as u64,
        Value::EnumNumber(v) => v.touch(),
        Value::Message(m) => m
            .fields()
            .fold(0u64, |h, (_, v)| h.wrapping_add(reflect_value(v))),
        Value::List(items) => items
            .iter()
            .fold(0u64, |h, v| h.wrapping_add(reflect_value(v))),
        Value::Map(entries) => entries.iter().fold(0u64, |h, (k, v)| {
            let key = match k {
                MapKey::String(s) => s.len() as u64,
                MapKey::I32(i) => i.touch(),
                MapKey::I64(i) => i.touch(),
                MapKey::U32(i) => i.touch(),
                MapKey::U64(i) => i.touch(),
                MapKey::Bool(b) => b.touch(),
            };
            h.wrapping_add(key).wrapping_add(reflect_value(v))
        }),
    }
}

/// How the official walk reads one field of a parsed message.
pub enum OfficialField {
    Scalar(i32),
    Repeated(i32),
    Map(i32),
    Message(i32, Vec<OfficialField>),
}

/// The walk plan of a message for the official parser's accessors.
pub fn official_fields(descriptor: &MessageDescriptor) -> Vec<OfficialField> {
    descriptor
        .fields()
        .map(|field| {
            let number = field.number() as i32;
            if field.is_map() {
                OfficialField::Map(number)
            } else if field.is_list() {
                OfficialField::Repeated(number)
            } else if let Kind::Message(m) = field.kind() {
                OfficialField::Message(number, official_fields(&m))
            } else {
                OfficialField::Scalar(number)
            }
        })
        .collect()
}

/// The official zeroparser: `ParsedMessage::parse`, then every field through its accessors.
pub fn official(registry: &MessageRegistry, fields: &[OfficialField], records: &[Vec<u8>]) -> u64 {
    records.iter().fold(0u64, |h, bytes| {
        match ParsedMessage::parse(bytes.as_slice(), registry) {
            Ok(m) => h.wrapping_add(black_box(official_walk(&m, fields))),
            Err(_) => h,
        }
    })
}

fn official_walk(m: &ParsedMessage<'_>, fields: &[OfficialField]) -> u64 {
    let mut h = 0u64;
    for field in fields {
        let v = match field {
            OfficialField::Scalar(n) => m.get_scalar(*n).map_or(0, official_value),
            OfficialField::Repeated(n) => m
                .get_repeated_scalars(*n)
                .iter()
                .fold(0u64, |h, v| h.wrapping_add(official_value(v))),
            OfficialField::Map(n) => m.get_map_entries(*n).fold(0u64, |h, (k, v)| {
                let key = official_value(&MapKeyRef::to_field_value(k));
                let value = match v {
                    ParsedMapValue::Scalar(v) => official_value(v),
                    ParsedMapValue::Message(_) => 1,
                };
                h.wrapping_add(key).wrapping_add(value)
            }),
            OfficialField::Message(n, sub) => {
                m.get_message(*n).map_or(0, |m| official_walk(m, sub))
            }
        };
        h = h.wrapping_add(v);
    }
    h
}

fn official_value(value: &FieldValueRef<'_>) -> u64 {
    match value {
        FieldValueRef::String(s) => s.len() as u64,
        FieldValueRef::Bytes(b) => b.len() as u64,
        FieldValueRef::Int32(v) => v.touch(),
        FieldValueRef::Int64(v) => v.touch(),
        FieldValueRef::UInt32(v) => v.touch(),
        FieldValueRef::UInt64(v) => v.touch(),
        FieldValueRef::Bool(v) => v.touch(),
        FieldValueRef::Float(v) => v.touch(),
        FieldValueRef::Double(v) => v.touch(),
    }
}

/// Sluice: `ProtoPlan::visit`, which decodes, converts and validates each value (UTF-8,
/// ranges, enum names) exactly as the Arrow path does and hands it to the visitor.
pub fn sluice(plan: &ProtoPlan, records: &[Vec<u8>]) -> u64 {
    let mut toucher = Toucher(0);
    for bytes in records {
        if plan.visit(bytes, &mut toucher).is_err() {
            toucher.0 = toucher.0.wrapping_add(1);
        }
    }
    black_box(toucher.0)
}

struct Toucher(u64);

fn scalar_value(value: &Scalar<'_>) -> u64 {
    match value {
        Scalar::Bool(v) => v.touch(),
        Scalar::Int(v) => v.touch(),
        Scalar::Float(v) => v.touch(),
        Scalar::Double(v) => v.touch(),
        Scalar::Str(s) => s.len() as u64,
        Scalar::Bytes(b) => b.len() as u64,
    }
}

impl<'a> Visitor<'a> for Toucher {
    fn scalar(&mut self, slot: usize, value: Scalar<'a>) {
        self.0 = self
            .0
            .wrapping_add(black_box(scalar_value(&value)) ^ slot as u64);
    }
    fn clear(&mut self, slot: usize) {
        self.0 = self.0.wrapping_add(slot as u64);
    }
    fn element(&mut self, slot: usize, value: Scalar<'a>) {
        self.scalar(slot, value);
    }
    fn map_entry(&mut self, slot: usize, key: Scalar<'a>, value: Scalar<'a>) {
        self.scalar(slot, key);
        self.scalar(slot, value);
    }
    fn begin_message(&mut self, slot: usize) {
        self.0 = self.0.wrapping_add(slot as u64);
    }
    fn begin_element(&mut self, slot: usize) {
        self.0 = self.0.wrapping_add(slot as u64);
    }
    fn begin_map_value(&mut self, slot: usize, key: Scalar<'a>) {
        self.scalar(slot, key);
    }
    fn end_message(&mut self) {}
}
