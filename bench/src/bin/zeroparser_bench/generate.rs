//! Deterministic random records for a workload: a `DynamicMessage` with every field set,
//! encoded once; every decoder then reads the same bytes.

use std::collections::HashMap;

use prost::Message;
use prost_reflect::{DynamicMessage, FieldDescriptor, Kind, MapKey, MessageDescriptor, Value};

/// How big the variable-length parts of a record are.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Length of string and bytes fields (unless `short_strings` names the field).
    pub string_len: usize,
    /// Fields whose strings are short codes (2–8 characters), e.g. NEOWISE flags.
    pub short_strings: &'static [&'static str],
    /// Elements of repeated fields and entries of maps.
    pub list_len: usize,
    /// Length of the strings inside lists, map values and repeated messages.
    pub element_len: usize,
    /// Upper bound of int32-typed values (small counters encode in one byte).
    pub int32_max: u64,
}

/// A small, fast, deterministic generator (splitmix64).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, bound: u64) -> u64 {
        self.next_u64() % bound.max(1)
    }

    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn text(&mut self, len: usize) -> String {
        const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789-_ABCDEFGHIJKLMNOPQRSTUVWXYZ";
        (0..len)
            .map(|_| char::from(ALPHABET[self.below(ALPHABET.len() as u64) as usize]))
            .collect()
    }
}

/// `count` encoded records of `message`.
pub fn records(message: &MessageDescriptor, shape: Shape, count: usize) -> Vec<Vec<u8>> {
    let mut rng = Rng::new(0x51u64.wrapping_mul(count as u64 + 1) ^ message.name().len() as u64);
    (0..count)
        .map(|_| random_message(message, shape, &mut rng).encode_to_vec())
        .collect()
}

fn random_message(message: &MessageDescriptor, shape: Shape, rng: &mut Rng) -> DynamicMessage {
    let mut out = DynamicMessage::new(message.clone());
    for field in message.fields() {
        // Elements of lists and maps have strings of their own length.
        let element_shape = Shape {
            string_len: shape.element_len,
            ..shape
        };
        let value = if field.is_map() {
            random_map(&field, element_shape, rng)
        } else if field.is_list() {
            Value::List(
                (0..shape.list_len)
                    .map(|_| random_scalar(&field, &field.kind(), element_shape, rng))
                    .collect(),
            )
        } else {
            random_scalar(&field, &field.kind(), shape, rng)
        };
        out.set_field(&field, value);
    }
    out
}

fn random_map(field: &FieldDescriptor, shape: Shape, rng: &mut Rng) -> Value {
    let Kind::Message(entry) = field.kind() else {
        return Value::Map(HashMap::new());
    };
    let key_field = entry.map_entry_key_field();
    let value_field = entry.map_entry_value_field();
    let key_shape = Shape {
        string_len: 8,
        ..shape
    };
    let mut map = HashMap::new();
    for i in 0..shape.list_len {
        let key = match key_field.kind() {
            Kind::String => MapKey::String(format!("{}{i}", rng.text(key_shape.string_len))),
            _ => MapKey::I32(i as i32 + 1),
        };
        map.insert(
            key,
            random_scalar(&value_field, &value_field.kind(), shape, rng),
        );
    }
    Value::Map(map)
}

fn random_scalar(field: &FieldDescriptor, kind: &Kind, shape: Shape, rng: &mut Rng) -> Value {
    let int32 = |rng: &mut Rng| rng.below(shape.int32_max);
    match kind {
        Kind::Double => Value::F64(rng.unit() * 360.0),
        Kind::Float => Value::F32((rng.unit() * 20.0) as f32),
        Kind::Int32 | Kind::Sfixed32 => Value::I32(int32(rng) as i32),
        Kind::Sint32 => Value::I32(int32(rng) as i32 - (shape.int32_max / 2) as i32),
        Kind::Uint32 | Kind::Fixed32 => Value::U32(int32(rng) as u32),
        Kind::Int64 | Kind::Sfixed64 => Value::I64(rng.below(1 << 50) as i64),
        Kind::Sint64 => Value::I64(rng.below(1 << 50) as i64 - (1 << 49)),
        Kind::Uint64 | Kind::Fixed64 => Value::U64(rng.below(1 << 50)),
        Kind::Bool => Value::Bool(rng.below(2) == 1),
        Kind::String => {
            let len = if shape.short_strings.contains(&field.name()) {
                2 + rng.below(7) as usize
            } else {
                shape.string_len
            };
            Value::String(rng.text(len))
        }
        Kind::Bytes => Value::Bytes(rng.text(shape.string_len).into_bytes().into()),
        Kind::Enum(e) => Value::EnumNumber(1 + rng.below(e.values().len() as u64 - 1) as i32),
        Kind::Message(m) => Value::Message(random_message(m, shape, rng)),
    }
}
