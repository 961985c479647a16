//! The first bytes a stranger sends the router's MQTT port when no pod is ready
//! (`router/src/mqtt_peek.rs`, compiled here as is). Nothing may panic; a level is only
//! read from a CONNECT (first byte 0x10) and is 3, 4 or 5; every prefix that already
//! decides (a level, or not a CONNECT) decides the same as the whole input, so the
//! router's read loop may stop at the first decision; the answer of a level is a CONNACK.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../../router/src/mqtt_peek.rs"]
mod mqtt_peek;

use mqtt_peek::{connect_level, server_unavailable, Peek};

fuzz_target!(|data: &[u8]| {
    let whole = connect_level(data);
    if let Peek::Level(level) = whole {
        assert_eq!(data.first(), Some(&0x10));
        assert!((3..=5).contains(&level));
        assert_eq!(server_unavailable(level).first(), Some(&0x20));
    }
    for n in 0..data.len() {
        match connect_level(&data[..n]) {
            Peek::More => {}
            decided => {
                assert_eq!(decided, whole, "prefix {n} decided otherwise");
                break;
            }
        }
    }
});
