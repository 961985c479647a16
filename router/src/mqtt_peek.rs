//! The first bytes of an MQTT connection, as far as the router reads them: whether they are
//! a CONNECT and of which protocol level (answered CONNACK "Server unavailable" of that
//! level when no pod can take it), and its client id (the key that places the connection,
//! so a device's session finds its pod). Pure functions over bytes (fuzz target
//! `router_mqtt_peek` in `server/fuzz`, which compiles this file as is).

/// What the first bytes of an MQTT connection say.
#[derive(Debug, PartialEq, Eq)]
pub enum Peek {
    /// A CONNECT of this protocol level (3: 3.1, 4: 3.1.1, 5: 5.0).
    Level(u8),
    /// Not enough bytes yet.
    More,
    /// Not a CONNECT this router can answer.
    NotConnect,
}

/// Reads the protocol level of an MQTT CONNECT from its first bytes: packet type 1, the
/// remaining length (1–4 bytes), the protocol name (`MQTT` or `MQIsdp`) and the level.
pub fn connect_level(bytes: &[u8]) -> Peek {
    let Some(&first) = bytes.first() else {
        return Peek::More;
    };
    if first != 0x10 {
        return Peek::NotConnect;
    }
    let mut at = 1;
    loop {
        let Some(&b) = bytes.get(at) else {
            return Peek::More;
        };
        at += 1;
        if b & 0x80 == 0 {
            break;
        }
        if at > 4 {
            return Peek::NotConnect;
        }
    }
    let Some(len) = bytes.get(at..at + 2) else {
        return Peek::More;
    };
    let len = usize::from(u16::from_be_bytes([len[0], len[1]]));
    at += 2;
    let Some(name) = bytes.get(at..at + len.min(6)) else {
        return Peek::More;
    };
    if len > 6 || (name != b"MQTT" && name != b"MQIsdp") {
        return Peek::NotConnect;
    }
    match bytes.get(at + len) {
        None => Peek::More,
        Some(&level @ 3..=5) => Peek::Level(level),
        Some(_) => Peek::NotConnect,
    }
}

/// The client id of an MQTT CONNECT from its first bytes (after the protocol level: the
/// connect flags, keep-alive, v5 properties, then the id as a length-prefixed string):
/// `Id(start..end)` of `bytes`, `More`, or `NotConnect` (not a CONNECT, or a malformed one).
pub fn connect_client_id(bytes: &[u8]) -> ClientId {
    let level = match connect_level(bytes) {
        Peek::Level(level) => level,
        Peek::More => return ClientId::More,
        Peek::NotConnect => return ClientId::NotConnect,
    };
    // Fixed header, name and level are whole: find where the level byte is.
    let mut at = 1;
    while bytes.get(at).is_some_and(|b| b & 0x80 != 0) {
        at += 1;
    }
    at += 1;
    let name_len = usize::from(u16::from_be_bytes([bytes[at], bytes[at + 1]]));
    // Level, flags, keep-alive.
    at += 2 + name_len + 1 + 1 + 2;
    if level == 5 {
        let mut props = 0usize;
        let mut shift = 0;
        loop {
            let Some(&b) = bytes.get(at) else {
                return ClientId::More;
            };
            at += 1;
            props |= usize::from(b & 0x7F) << shift;
            if b & 0x80 == 0 {
                break;
            }
            shift += 7;
            if shift > 21 {
                return ClientId::NotConnect;
            }
        }
        at += props;
    }
    let Some(len) = bytes.get(at..at + 2) else {
        return ClientId::More;
    };
    let len = usize::from(u16::from_be_bytes([len[0], len[1]]));
    let start = at + 2;
    if bytes.len() < start + len {
        return ClientId::More;
    }
    ClientId::Id(start..start + len)
}

/// What the first bytes of an MQTT connection say of its client id.
#[derive(Debug, PartialEq, Eq)]
pub enum ClientId {
    /// The client id's bytes are this range of the input (may be empty).
    Id(std::ops::Range<usize>),
    /// Not enough bytes yet.
    More,
    /// Not a CONNECT.
    NotConnect,
}

/// CONNACK "Server unavailable" for a client of `level`: MQTT 5 reason code 0x88 with no
/// properties; 3.1 and 3.1.1 return code 3.
pub fn server_unavailable(level: u8) -> &'static [u8] {
    if level >= 5 {
        &[0x20, 0x03, 0x00, 0x88, 0x00]
    } else {
        &[0x20, 0x02, 0x00, 0x03]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connect(name: &[u8], level: u8) -> Vec<u8> {
        let mut body = vec![0, name.len() as u8];
        body.extend_from_slice(name);
        body.extend_from_slice(&[level, 0x02, 0, 60]);
        let mut packet = vec![0x10, body.len() as u8];
        packet.extend(body);
        packet
    }

    #[test]
    fn the_level_is_read_from_every_prefix_of_a_connect() {
        for (name, level) in [(&b"MQTT"[..], 5), (b"MQTT", 4), (b"MQIsdp", 3)] {
            let packet = connect(name, level);
            let full = 2 + 2 + name.len() + 1;
            for n in 0..full {
                assert_eq!(connect_level(&packet[..n]), Peek::More, "prefix {n}");
            }
            assert_eq!(connect_level(&packet), Peek::Level(level));
        }
    }

    #[test]
    fn the_client_id_is_read_from_a_v5_and_a_v311_connect() {
        for (level, props) in [(5u8, &[3u8, 0x21, 0, 10][..]), (4, &[][..])] {
            let mut body = vec![0, 4];
            body.extend_from_slice(b"MQTT");
            body.extend_from_slice(&[level, 0x02, 0, 60]);
            body.extend_from_slice(props);
            body.extend_from_slice(&[0, 5]);
            body.extend_from_slice(b"dev-7");
            body.extend_from_slice(&[0, 1, b'u']);
            let mut packet = vec![0x10, body.len() as u8];
            packet.extend(body);
            let ClientId::Id(range) = connect_client_id(&packet) else {
                panic!("no id at level {level}");
            };
            assert_eq!(&packet[range.clone()], b"dev-7");
            for n in 0..range.end {
                assert_eq!(
                    connect_client_id(&packet[..n]),
                    ClientId::More,
                    "prefix {n}"
                );
            }
        }
        assert_eq!(connect_client_id(&[0x16, 3, 1]), ClientId::NotConnect);
    }

    #[test]
    fn what_is_not_a_connect_is_not_answered() {
        assert_eq!(connect_level(&[0x30, 0x02]), Peek::NotConnect);
        assert_eq!(connect_level(&connect(b"HTTP", 4)), Peek::NotConnect);
        assert_eq!(connect_level(&connect(b"MQTT", 9)), Peek::NotConnect);
        assert_eq!(
            connect_level(&[0x10, 0xff, 0xff, 0xff, 0xff]),
            Peek::NotConnect
        );
        let mut long = vec![0x10, 0x80, 0x01, 0x00, 0x07];
        long.extend_from_slice(b"MQTTxyz");
        assert_eq!(connect_level(&long), Peek::NotConnect);
    }

    proptest::proptest! {
        /// A prefix that decides, decides as the whole input does (the router stops
        /// reading at the first decision); a level comes only from a CONNECT.
        #[test]
        fn the_first_decision_is_final(tail in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40)) {
            // Random bytes, a CONNECT type byte before them, and a CONNECT whose level
            // and everything after it are random.
            let mut typed = vec![0x10];
            typed.extend_from_slice(&tail);
            let mut named = vec![0x10, 0x20, 0x00, 0x04];
            named.extend_from_slice(b"MQTT");
            named.extend_from_slice(&tail);
            for data in [&tail, &typed, &named] {
                let whole = connect_level(data);
                if let Peek::Level(level) = whole {
                    proptest::prop_assert_eq!(data.first(), Some(&0x10));
                    proptest::prop_assert!((3..=5).contains(&level));
                }
                for n in 0..data.len() {
                    let decided = connect_level(&data[..n]);
                    if decided != Peek::More {
                        proptest::prop_assert_eq!(decided, whole);
                        break;
                    }
                }
                let id = connect_client_id(data);
                if let ClientId::Id(range) = &id {
                    proptest::prop_assert!(range.end <= data.len());
                }
                for n in 0..data.len() {
                    let decided = connect_client_id(&data[..n]);
                    if decided != ClientId::More {
                        proptest::prop_assert_eq!(decided, id);
                        break;
                    }
                }
            }
        }
    }

    #[test]
    fn the_refusal_is_server_unavailable_in_each_version() {
        assert_eq!(server_unavailable(5), &[0x20, 0x03, 0x00, 0x88, 0x00]);
        assert_eq!(server_unavailable(4), &[0x20, 0x02, 0x00, 0x03]);
        assert_eq!(server_unavailable(3), &[0x20, 0x02, 0x00, 0x03]);
    }
}
