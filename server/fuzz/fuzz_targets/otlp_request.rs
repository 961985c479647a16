//! An OTLP export request from a stranger: the first byte picks the signal (traces, logs,
//! metrics) and the wire (protobuf or OTLP/JSON), the rest is the body. The OTLP modules
//! of `server/src/otlp/` that decode and transcode are compiled here as they are. Nothing
//! may panic; a request that decodes transcodes into a batch of the table's schema in
//! which every item is a row or counted rejected, and its protobuf encoding (what the WAL
//! keeps) decodes to the same request.

#![no_main]

use libfuzzer_sys::fuzz_target;

// Top-level here, so their `super::` paths name these siblings.
#[path = "../../src/otlp/columns.rs"]
#[allow(dead_code)]
mod columns;
#[path = "../../src/otlp/logs.rs"]
#[allow(dead_code)]
mod logs;
#[path = "../../src/otlp/metrics.rs"]
#[allow(dead_code)]
mod metrics;
#[path = "../../src/otlp/request.rs"]
#[allow(dead_code)]
mod request;
#[path = "../../src/otlp/rows.rs"]
#[allow(dead_code)]
mod rows;
#[path = "../../src/otlp/schema.rs"]
#[allow(dead_code)]
mod schema;
#[path = "../../src/otlp/traces.rs"]
#[allow(dead_code)]
mod traces;
#[path = "../../src/otlp/variant.rs"]
#[allow(dead_code)]
mod variant;

use request::{Request, Wire};
use schema::Signal;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, body)) = data.split_first() else {
        return;
    };
    let signal = Signal::ALL[(mode % 3) as usize];
    let wire = if mode & 4 == 0 {
        Wire::Proto
    } else {
        Wire::Json
    };
    let Ok(request) = Request::decode(signal, wire, body) else {
        return;
    };
    let schema = signal.schema().arrow_schema();
    let rows = request
        .transcode(schema.clone(), 1, 0, 0)
        .expect("a decoded request always transcodes");
    assert_eq!(rows.batch.schema(), schema);
    assert_eq!(
        rows.batch.num_rows() + rows.rejected as usize,
        request.items()
    );
    // Compared as bytes: a NaN double is not equal to itself.
    let encoded = request.encode();
    let again = Request::decode_proto(signal, &encoded).expect("its encoding decodes");
    assert_eq!(again.encode(), encoded);
});
