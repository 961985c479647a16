//! The decoders of the payloads Sluice keeps in its WAL frames (replay
//! reads them back after a crash): the server's own
//! `server/src/journal/frames.rs` (with its own error type), compiled here as
//! is. Decoding arbitrary bytes must fail cleanly, and whatever decodes must
//! encode back to the same bytes.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../src/journal/frames.rs"]
#[allow(dead_code)]
mod frames;

fuzz_target!(|data: &[u8]| {
    let Some((&kind, payload)) = data.split_first() else {
        return;
    };
    if kind % 5 == 3 {
        if let Ok((pairs, rest)) = frames::decode_mqtt_records(payload) {
            assert_eq!(frames::encode_mqtt_records(&pairs, rest), payload);
        }
    } else if kind % 5 == 4 {
        if let Ok((state, pairs)) = frames::decode_mqtt_ids(payload) {
            assert_eq!(frames::encode_mqtt_ids(state, &pairs), payload);
        }
    } else if kind % 5 == 2 {
        if let Ok(frame) = frames::decode_arrow(payload) {
            let again = frames::encode_arrow(
                frame.stream_key,
                frame.offset,
                frame.rows,
                frame.messages.iter().copied(),
            );
            assert_eq!(again, payload, "an arrow frame re-encodes to its bytes");
        }
    } else if kind % 5 == 0 {
        if let Ok(open) = frames::StreamOpen::decode(payload) {
            assert_eq!(frames::StreamOpen::decode(&open.encode()).ok(), Some(open));
        }
    } else if let Ok(frame) = frames::decode_records(payload) {
        let again = frames::encode_records(frame.stream_key, frame.records.iter().copied());
        let back = frames::decode_records(&again).expect("re-encoded payload decodes");
        assert_eq!(back.stream_key, frame.stream_key);
        assert_eq!(back.records, frame.records);
    }
});
