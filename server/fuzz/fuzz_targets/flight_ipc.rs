//! Arrow Flight's IPC decoding as the pod runs it on every `DoPut` message and on every
//! arrow-batch WAL frame at replay: `server/src/flight/ipc.rs` (its own error type),
//! compiled here as is, behind the frame decoder of `server/src/journal/frames.rs`.
//! The first byte picks the stream schema (flat, dictionary-encoded, nested), the rest is
//! an arrow-batch payload; any bytes must decode or fail cleanly — never panic, never
//! allocate what a compressed buffer merely announces.

#![no_main]

use std::sync::Arc;

use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef};
use libfuzzer_sys::fuzz_target;

#[path = "../../src/journal/frames.rs"]
#[allow(dead_code)]
mod frames;

#[path = "../../src/flight/ipc.rs"]
#[allow(dead_code)]
mod ipc;

fn schema(pick: u8) -> SchemaRef {
    let fields = match pick % 3 {
        0 => vec![
            Field::new("id", DataType::Int64, false),
            Field::new("name", DataType::Utf8, true),
            Field::new("score", DataType::Float64, true),
        ],
        1 => vec![
            Field::new("id", DataType::Int64, false),
            Field::new_dictionary("name", DataType::Int32, DataType::Utf8, true),
        ],
        _ => vec![
            Field::new(
                "tags",
                DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
                true,
            ),
            Field::new(
                "pos",
                DataType::Struct(Fields::from(vec![
                    Field::new("x", DataType::Int32, true),
                    Field::new("label", DataType::Binary, true),
                ])),
                true,
            ),
            Field::new_map(
                "attrs",
                "entries",
                Field::new("keys", DataType::Utf8, false),
                Field::new("values", DataType::Int32, true),
                false,
                true,
            ),
        ],
    };
    Arc::new(Schema::new(fields))
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, payload)) = data.split_first() else {
        return;
    };
    // A schema message read as such must fail cleanly too.
    let _ = ipc::schema_of(payload);
    let Ok(frame) = frames::decode_arrow(payload) else {
        return;
    };
    if let Ok(batch) = ipc::decode_frame(schema(pick), frame.messages.iter().copied()) {
        assert_eq!(batch.num_columns(), schema(pick).fields().len());
    }
});
