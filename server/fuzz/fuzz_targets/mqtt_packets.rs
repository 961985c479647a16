//! The bytes of an MQTT connection from a stranger: the first byte picks how the rest is
//! cut into reads (1 to 64 bytes each), the rest is fed to the connection's codec
//! (`server/src/mqtt/wire.rs`, compiled here as is) until it refuses. Nothing may panic; the
//! first packet decoded is a CONNECT and no other CONNECT follows; a PUBLISH has QoS 0 to 2,
//! a packet id exactly when its QoS is above 0, and a payload within the packet size limit;
//! every answer the session can give a decoded packet encodes.

#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;

#[path = "../../src/mqtt/wire.rs"]
#[allow(dead_code)]
mod wire;

use wire::{reason, Codec, Inbound, Outbound, WireError};

const MAX_PACKET: u32 = 4096;

fuzz_target!(|data: &[u8]| {
    let Some((&cut, wire_bytes)) = data.split_first() else {
        return;
    };
    let step = usize::from(cut % 64) + 1;
    let mut codec = Codec::new(MAX_PACKET);
    let mut buf = BytesMut::new();
    let mut packets = 0usize;
    for chunk in wire_bytes.chunks(step) {
        buf.extend_from_slice(chunk);
        loop {
            let before = buf.len();
            let packet = match codec.decode(&mut buf) {
                Ok(Some(p)) => p,
                Ok(None) => break,
                Err(e) => {
                    // An empty client id that asks to keep its session: CONNACK 0x85.
                    if matches!(e, WireError::ClientIdRejected) && codec.version().is_some() {
                        let connack = Outbound::ConnAck {
                            code: e.reason_code(),
                            reason: Some(e.to_string()),
                            receive_max: 64,
                            max_packet_size: MAX_PACKET,
                            assigned_client_id: None,
                            session_present: false,
                            session_expiry_secs: 0,
                        };
                        // Over the client's own Maximum Packet Size (read from this CONNECT)
                        // it is not sent and the connection closes (`session::refuse_wire`).
                        let mut out = BytesMut::new();
                        match codec.encode(connack, &mut out) {
                            Ok(()) | Err(WireError::OverClientMaximum { .. }) => {}
                            Err(e) => panic!("CONNACK 0x85 does not encode: {e}"),
                        }
                    }
                    return;
                }
            };
            assert!(buf.len() < before, "a packet decoded from no bytes");
            assert_eq!(matches!(packet, Inbound::Connect(_)), packets == 0);
            packets += 1;
            answer(&mut codec, packet);
        }
    }
});

/// Encodes what the session may answer `packet` with.
fn answer(codec: &mut Codec, packet: Inbound) {
    let mut out = BytesMut::new();
    let answers = match packet {
        Inbound::Connect(c) => {
            if let Some(size) = c.max_packet_size {
                codec.set_client_max_packet_size(size);
            }
            vec![
                Outbound::ConnAck {
                    code: reason::BAD_USER_NAME_OR_PASSWORD,
                    reason: Some(format!("no such client {}", c.client_id)),
                    receive_max: 64,
                    max_packet_size: MAX_PACKET,
                    assigned_client_id: None,
                    session_present: false,
                    session_expiry_secs: 0,
                },
                Outbound::ConnAck {
                    code: reason::SUCCESS,
                    reason: None,
                    receive_max: 64,
                    max_packet_size: MAX_PACKET,
                    assigned_client_id: c
                        .client_id
                        .is_empty()
                        .then(|| "sluice-0123456789abcdef".to_string()),
                    session_present: !c.clean_start,
                    session_expiry_secs: c.session_expiry_secs,
                },
            ]
        }
        Inbound::Publish(p) => {
            assert!(p.qos <= 2);
            assert_eq!(p.packet_id.is_some(), p.qos > 0);
            assert!(p.payload.len() <= MAX_PACKET as usize);
            let id = p.packet_id.unwrap_or(1);
            assert_ne!(id, 0);
            vec![
                Outbound::PubAck {
                    id,
                    code: reason::PAYLOAD_FORMAT_INVALID,
                    reason: Some(format!("topic {}", p.topic)),
                },
                Outbound::PubRec {
                    id,
                    code: reason::SUCCESS,
                    reason: None,
                },
            ]
        }
        Inbound::PubRel(id) => vec![Outbound::PubComp { id, found: false }],
        Inbound::Ping => vec![Outbound::PingResp],
        _ => vec![Outbound::Disconnect {
            code: reason::IMPLEMENTATION_SPECIFIC,
            reason: Some("not served".into()),
        }],
    };
    for a in answers {
        match codec.encode(a, &mut out) {
            // An answer over the client's Maximum Packet Size may not be sent (the session
            // closes the connection instead).
            Ok(()) | Err(WireError::OverClientMaximum { .. }) => {}
            Err(e) => panic!("an answer does not encode: {e}"),
        }
    }
}
