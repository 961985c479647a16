//! A REST insert body from a stranger: the first byte picks the `Content-Encoding`
//! (identity, gzip, zstd) and the layout (JSON array or NDJSON), the rest is the body.
//! `server/src/rest/body.rs` is compiled here as is. Nothing may panic, the decoded body
//! never passes the limit, and every record split out is the text of a JSON object.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../src/rest/body.rs"]
#[allow(dead_code)]
mod body;

const LIMIT: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, wire)) = data.split_first() else {
        return;
    };
    let encoding = match mode % 3 {
        0 => body::Encoding::Identity,
        1 => body::Encoding::Gzip,
        _ => body::Encoding::Zstd,
    };
    let layout = if mode & 4 == 0 {
        body::Layout::Array
    } else {
        body::Layout::Ndjson
    };
    let Ok(decoded) = body::decode(wire, encoding, LIMIT) else {
        return;
    };
    assert!(decoded.len() <= LIMIT);
    if let Ok(records) = body::split(&decoded, layout) {
        for record in records {
            assert!(record.starts_with('{'));
            if layout == body::Layout::Array {
                assert!(serde_json::from_str::<serde_json::Value>(record).is_ok());
            }
        }
    }
});
