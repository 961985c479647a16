//! The first bytes a stranger sends the router's MQTT port when no pod is ready
//! (`router/src/mqtt_peek.rs`, compiled here as is). Nothing may panic; a level is only
//! read from a CONNECT (first byte 0x10) and is 3, 4 or 5; every prefix that already
//! decides (a level, or not a CONNECT) decides the same as the whole input, so the
//! router's read loop may stop at the first decision; the answer of a level is a CONNACK.
//! The same for the client id the router places a connection by: a range inside the input,
//! and the first decision on a prefix is final.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../../router/src/mqtt_peek.rs"]
mod mqtt_peek;

use mqtt_peek::{connect_client_id, connect_level, server_unavailable, ClientId, Peek};

fuzz_target!(|data: &[u8]| {
    let whole = connect_level(data);
    if let Peek::Level(level) = whole {
        assert_eq!(data.first(), Some(&0x10));
        assert!((3..=5).contains(&level));
        assert_eq!(server_unavailable(level).first(), Some(&0x20));
    }
    first_decision_is_final(data, connect_level, &Peek::More);
    let id = first_decision_is_final(data, connect_client_id, &ClientId::More);
    if let ClientId::Id(range) = &id {
        assert!(range.end <= data.len() && matches!(whole, Peek::Level(_)));
    }
});

/// `read(data)`, after checking that the first prefix of `data` on which `read` decides
/// (is not `more`) decides the same.
fn first_decision_is_final<T: PartialEq + std::fmt::Debug>(
    data: &[u8],
    read: fn(&[u8]) -> T,
    more: &T,
) -> T {
    let whole = read(data);
    if let Some(decided) = (0..data.len()).map(|n| read(&data[..n])).find(|d| d != more) {
        assert_eq!(decided, whole, "a prefix decided otherwise");
    }
    whole
}
