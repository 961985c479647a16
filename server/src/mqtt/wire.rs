//! MQTT packets as the session sees them, version-neutral: the bytes of a connection are
//! decoded by `rmqtt-codec` (3.1, 3.1.1 and 5.0; the version is read from the CONNECT
//! packet, which must come first) into [`Inbound`], and the session's answers
//! ([`Outbound`], with MQTT 5 reason codes) are encoded for the connection's version —
//! 3.1.1 has no reason codes on PUBACK or DISCONNECT, so there a refusal closes the
//! connection ([`Outbound::refusal_closes`]) and a CONNACK code is mapped to a 3.1.1
//! return code ([`v3_return_code`]).
//!
//! This file depends on nothing else in the crate (its errors are its own [`WireError`]),
//! so the `mqtt_packets` fuzz target compiles it as is.

use std::num::{NonZeroU16, NonZeroU32};

use bytes::{Bytes, BytesMut};
use bytestring::ByteString;
use rmqtt_codec::error::{DecodeError, EncodeError};
use rmqtt_codec::types::QoS;
use rmqtt_codec::version::ProtocolVersion;
use rmqtt_codec::{v3, v5, MqttCodec, MqttPacket};
use tokio_util::codec::{Decoder, Encoder};

/// MQTT 5 reason codes the session answers with (PUBACK, PUBREC, CONNACK, DISCONNECT).
pub mod reason {
    /// Success / normal disconnection.
    pub const SUCCESS: u8 = 0x00;
    /// Unspecified error.
    pub const UNSPECIFIED: u8 = 0x80;
    /// Malformed packet.
    pub const MALFORMED_PACKET: u8 = 0x81;
    /// Protocol error.
    pub const PROTOCOL_ERROR: u8 = 0x82;
    /// Implementation specific error.
    pub const IMPLEMENTATION_SPECIFIC: u8 = 0x83;
    /// Client identifier not valid (3.1.1: return code 2, identifier rejected).
    pub const CLIENT_IDENTIFIER_NOT_VALID: u8 = 0x85;
    /// Bad user name or password.
    pub const BAD_USER_NAME_OR_PASSWORD: u8 = 0x86;
    /// Not authorized.
    pub const NOT_AUTHORIZED: u8 = 0x87;
    /// Server unavailable.
    pub const SERVER_UNAVAILABLE: u8 = 0x88;
    /// Server shutting down.
    pub const SERVER_SHUTTING_DOWN: u8 = 0x8B;
    /// Session taken over (another connection with the same client id).
    pub const SESSION_TAKEN_OVER: u8 = 0x8E;
    /// Keep alive timeout.
    pub const KEEP_ALIVE_TIMEOUT: u8 = 0x8D;
    /// Topic name invalid.
    pub const TOPIC_NAME_INVALID: u8 = 0x90;
    /// Receive maximum exceeded.
    pub const RECEIVE_MAXIMUM_EXCEEDED: u8 = 0x93;
    /// Topic alias invalid.
    pub const TOPIC_ALIAS_INVALID: u8 = 0x94;
    /// Packet too large.
    pub const PACKET_TOO_LARGE: u8 = 0x95;
    /// Quota exceeded.
    pub const QUOTA_EXCEEDED: u8 = 0x97;
    /// Payload format invalid.
    pub const PAYLOAD_FORMAT_INVALID: u8 = 0x99;
    /// Retain not supported.
    pub const RETAIN_NOT_SUPPORTED: u8 = 0x9A;
    /// Use another server (the pod is draining).
    pub const USE_ANOTHER_SERVER: u8 = 0x9C;
}

/// The protocol version of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// MQTT 3.1 or 3.1.1.
    V3,
    /// MQTT 5.0.
    V5,
}

/// Bytes that are not a packet this server takes.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The packet is over the maximum packet size.
    #[error("packet of {size} bytes is over the maximum packet size of {max} bytes")]
    TooLarge {
        /// Its size.
        size: u32,
        /// The limit.
        max: u32,
    },
    /// Anything else the codec refused.
    #[error("malformed packet: {0}")]
    Malformed(String),
    /// The first packet is not CONNECT, or the protocol level is not 3, 4 or 5.
    #[error("the first packet must be CONNECT with protocol MQTT 3.1, 3.1.1 or 5.0: {0}")]
    NotConnect(String),
    /// A second CONNECT on the same connection.
    #[error("a second CONNECT on the same connection")]
    SecondConnect,
    /// A CONNECT with an empty client id that asks to keep its session (clean start /
    /// clean session 0): there is no session to keep it under.
    #[error(
        "an empty client id needs clean start (clean session) 1: a session is kept under \
         its client id, so none can be resumed for a client that names none"
    )]
    ClientIdRejected,
    /// An answer larger than the client's Maximum Packet Size (v5 CONNECT): it may not be
    /// sent, so the connection closes without it.
    #[error("an answer of {size} bytes is over the client's maximum packet size of {max} bytes")]
    OverClientMaximum {
        /// The answer's size.
        size: u32,
        /// The client's limit.
        max: u32,
    },
    /// An answer that cannot be encoded.
    #[error("encoding an answer: {0}")]
    Encode(String),
}

impl WireError {
    /// The MQTT 5 DISCONNECT reason code of this error.
    pub fn reason_code(&self) -> u8 {
        match self {
            WireError::TooLarge { .. } => reason::PACKET_TOO_LARGE,
            WireError::Malformed(_) | WireError::NotConnect(_) => reason::MALFORMED_PACKET,
            WireError::SecondConnect => reason::PROTOCOL_ERROR,
            WireError::ClientIdRejected => reason::CLIENT_IDENTIFIER_NOT_VALID,
            WireError::OverClientMaximum { .. } | WireError::Encode(_) => reason::UNSPECIFIED,
        }
    }
}

impl From<DecodeError> for WireError {
    fn from(e: DecodeError) -> Self {
        match e {
            DecodeError::MaxSizeExceeded { size, max } => WireError::TooLarge { size, max },
            DecodeError::InvalidClientId => WireError::ClientIdRejected,
            other => WireError::Malformed(other.to_string()),
        }
    }
}

impl From<EncodeError> for WireError {
    fn from(e: EncodeError) -> Self {
        match e {
            EncodeError::OverMaxPacketSize { size, max } => {
                WireError::OverClientMaximum { size, max }
            }
            other => WireError::Encode(other.to_string()),
        }
    }
}

/// A CONNECT packet's fields the session uses.
#[derive(Debug, Clone)]
pub struct Connect {
    /// Version of the connection.
    pub version: Version,
    /// Client identifier (may be empty).
    pub client_id: String,
    /// User name.
    pub username: Option<String>,
    /// Password.
    pub password: Option<Bytes>,
    /// Keep alive, seconds (0: none).
    pub keep_alive: u16,
    /// v5: how many QoS 1/2 publishes the client takes unacknowledged (ours to it: none).
    pub receive_max: Option<u16>,
    /// v5: the largest packet the client takes.
    pub max_packet_size: Option<u32>,
    /// v5: the session expiry the client asked for, seconds.
    pub session_expiry_secs: u32,
    /// Clean start (v5) / clean session (3.1.1).
    pub clean_start: bool,
}

/// A PUBLISH packet's fields the session uses.
#[derive(Debug, Clone)]
pub struct Publish {
    /// 0, 1 or 2.
    pub qos: u8,
    /// Redelivery flag.
    pub dup: bool,
    /// Retain flag.
    pub retain: bool,
    /// Topic name (may be empty in v5 with a topic alias).
    pub topic: String,
    /// Packet identifier (QoS 1 and 2).
    pub packet_id: Option<u16>,
    /// v5 topic alias, if any.
    pub topic_alias: Option<u16>,
    /// The application message.
    pub payload: Bytes,
}

/// A packet from the client.
#[derive(Debug, Clone)]
pub enum Inbound {
    /// CONNECT (always the first packet).
    Connect(Connect),
    /// PUBLISH.
    Publish(Publish),
    /// PUBREL of a QoS 2 publish.
    PubRel(u16),
    /// PUBACK/PUBREC/PUBCOMP from the client (we never publish to it): ignored.
    ClientAck,
    /// PINGREQ.
    Ping,
    /// DISCONNECT (v5: its reason code).
    Disconnect(u8),
    /// SUBSCRIBE, UNSUBSCRIBE or AUTH: not served here.
    Unsupported(&'static str),
}

/// What the session tells a client.
#[derive(Debug, Clone)]
pub enum Outbound {
    /// CONNACK with an MQTT 5 reason code (mapped for 3.1.1) and what this server takes.
    ConnAck {
        /// MQTT 5 reason code.
        code: u8,
        /// v5 reason string.
        reason: Option<String>,
        /// v5: QoS 1/2 publishes this server takes unacknowledged.
        receive_max: u16,
        /// v5: the largest packet this server takes.
        max_packet_size: u32,
        /// v5: the client id this server gave a client that sent an empty one.
        assigned_client_id: Option<String>,
        /// Whether the client's session was resumed.
        session_present: bool,
        /// v5: the session expiry interval granted, seconds.
        session_expiry_secs: u32,
    },
    /// PUBACK (QoS 1).
    PubAck {
        /// Packet identifier.
        id: u16,
        /// MQTT 5 reason code.
        code: u8,
        /// v5 reason string.
        reason: Option<String>,
    },
    /// PUBREC (QoS 2, once durable).
    PubRec {
        /// Packet identifier.
        id: u16,
        /// MQTT 5 reason code.
        code: u8,
        /// v5 reason string.
        reason: Option<String>,
    },
    /// PUBCOMP (QoS 2); `found`: whether the packet id was awaiting its PUBREL.
    PubComp {
        /// Packet identifier.
        id: u16,
        /// Whether the id was known (v5: 0x92 otherwise).
        found: bool,
    },
    /// PINGRESP.
    PingResp,
    /// DISCONNECT from the server (v5 only; 3.1.1 just closes).
    Disconnect {
        /// MQTT 5 reason code.
        code: u8,
        /// Reason string.
        reason: Option<String>,
    },
}

impl Outbound {
    /// Whether, on a 3.1.1 connection, this answer cannot be said and the connection is
    /// closed instead (a refused PUBACK/PUBREC, or a DISCONNECT).
    pub fn refusal_closes(&self, version: Version) -> bool {
        version == Version::V3
            && match self {
                Outbound::PubAck { code, .. } | Outbound::PubRec { code, .. } => {
                    *code >= reason::UNSPECIFIED
                }
                Outbound::Disconnect { .. } => true,
                _ => false,
            }
    }
}

/// The 3.1.1 CONNACK return code of an MQTT 5 CONNACK reason code.
pub fn v3_return_code(code: u8) -> v3::ConnectAckReason {
    match code {
        reason::SUCCESS => v3::ConnectAckReason::ConnectionAccepted,
        0x84 => v3::ConnectAckReason::UnacceptableProtocolVersion,
        reason::CLIENT_IDENTIFIER_NOT_VALID => v3::ConnectAckReason::IdentifierRejected,
        reason::BAD_USER_NAME_OR_PASSWORD => v3::ConnectAckReason::BadUserNameOrPassword,
        reason::NOT_AUTHORIZED => v3::ConnectAckReason::NotAuthorized,
        _ => v3::ConnectAckReason::ServiceUnavailable,
    }
}

/// Decodes and encodes one connection's packets.
#[derive(Debug)]
pub struct Codec {
    inner: MqttCodec,
    version: Option<Version>,
    max_packet_size: u32,
    connected: bool,
}

impl Codec {
    /// A codec for a new connection taking packets of at most `max_packet_size` bytes.
    pub fn new(max_packet_size: u32) -> Codec {
        Codec {
            inner: MqttCodec::Version(rmqtt_codec::version::VersionCodec),
            version: None,
            max_packet_size,
            connected: false,
        }
    }

    /// The connection's version once its CONNECT was read.
    pub fn version(&self) -> Option<Version> {
        self.version
    }

    /// Caps the packets sent to the client at its maximum packet size (v5).
    pub fn set_client_max_packet_size(&mut self, size: u32) {
        if let MqttCodec::V5(codec) = &mut self.inner {
            codec.set_max_outbound_size(size);
        }
    }

    /// The next whole packet in `buf` (consumed from it), or None when more bytes are
    /// needed.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Inbound>, WireError> {
        if self.version.is_none() {
            let detected = self
                .inner
                .decode(buf)
                .map_err(|e| WireError::NotConnect(e.to_string()))?;
            let Some((MqttPacket::Version(version), _)) = detected else {
                return Ok(None);
            };
            let max = self.max_packet_size;
            (self.inner, self.version) = match version {
                ProtocolVersion::MQTT3 => (MqttCodec::V3(v3::Codec::new(max)), Some(Version::V3)),
                ProtocolVersion::MQTT5 => {
                    (MqttCodec::V5(v5::Codec::new(max, 0)), Some(Version::V5))
                }
            };
        }
        let Some((packet, _)) = self.inner.decode(buf)? else {
            return Ok(None);
        };
        let inbound = match packet {
            MqttPacket::V3(p) => from_v3(p)?,
            MqttPacket::V5(p) => from_v5(p)?,
            MqttPacket::Version(_) => return Err(WireError::SecondConnect),
        };
        let is_connect = matches!(inbound, Inbound::Connect(_));
        match (is_connect, self.connected) {
            (true, true) => Err(WireError::SecondConnect),
            (false, false) => Err(WireError::NotConnect("another packet came first".into())),
            _ => {
                self.connected = true;
                Ok(Some(inbound))
            }
        }
    }

    /// Appends `out`'s bytes for this connection's version to `dst`. Answers 3.1.1
    /// cannot carry ([`Outbound::refusal_closes`]) encode nothing.
    pub fn encode(&mut self, out: Outbound, dst: &mut BytesMut) -> Result<(), WireError> {
        match (&mut self.inner, self.version) {
            (MqttCodec::V3(codec), Some(Version::V3)) => {
                if out.refusal_closes(Version::V3) {
                    return Ok(());
                }
                codec.encode(to_v3(out), dst)?;
            }
            (MqttCodec::V5(codec), Some(Version::V5)) => codec.encode(to_v5(out)?, dst)?,
            _ => return Err(WireError::Encode("no CONNECT read yet".into())),
        }
        Ok(())
    }
}

fn text(s: &ByteString) -> String {
    s.to_string()
}

/// A PUBLISH of either version (one type in the codec; 3.1.1's has no properties).
fn publish(p: &rmqtt_codec::types::Publish) -> Publish {
    Publish {
        qos: p.qos.value(),
        dup: p.dup,
        retain: p.retain,
        topic: text(&p.topic),
        packet_id: p.packet_id.map(NonZeroU16::get),
        topic_alias: p
            .properties
            .as_ref()
            .and_then(|props| props.topic_alias)
            .map(NonZeroU16::get),
        payload: p.payload.clone(),
    }
}

fn from_v3(p: v3::Packet) -> Result<Inbound, WireError> {
    Ok(match p {
        v3::Packet::Connect(c) => Inbound::Connect(Connect {
            version: Version::V3,
            client_id: text(&c.client_id),
            username: c.username.as_ref().map(text),
            password: c.password.clone(),
            keep_alive: c.keep_alive,
            receive_max: None,
            max_packet_size: None,
            session_expiry_secs: 0,
            clean_start: c.clean_session,
        }),
        v3::Packet::Publish(p) => Inbound::Publish(publish(&p)),
        v3::Packet::PublishRelease { packet_id } => Inbound::PubRel(packet_id.get()),
        v3::Packet::PublishAck { .. }
        | v3::Packet::PublishReceived { .. }
        | v3::Packet::PublishComplete { .. } => Inbound::ClientAck,
        v3::Packet::PingRequest => Inbound::Ping,
        v3::Packet::Disconnect => Inbound::Disconnect(reason::SUCCESS),
        v3::Packet::Subscribe { .. } => Inbound::Unsupported("SUBSCRIBE"),
        v3::Packet::Unsubscribe { .. } => Inbound::Unsupported("UNSUBSCRIBE"),
        other => {
            return Err(WireError::Malformed(format!(
                "packet type {:#x} is sent by servers, not clients",
                other.packet_type()
            )))
        }
    })
}

fn from_v5(p: v5::Packet) -> Result<Inbound, WireError> {
    Ok(match p {
        v5::Packet::Connect(c) => Inbound::Connect(Connect {
            version: Version::V5,
            client_id: text(&c.client_id),
            username: c.username.as_ref().map(text),
            password: c.password.clone(),
            keep_alive: c.keep_alive,
            receive_max: c.receive_max.map(NonZeroU16::get),
            max_packet_size: c.max_packet_size.map(NonZeroU32::get),
            session_expiry_secs: c.session_expiry_interval_secs,
            clean_start: c.clean_start,
        }),
        v5::Packet::Publish(p) => Inbound::Publish(publish(&p)),
        v5::Packet::PublishRelease(ack) => Inbound::PubRel(ack.packet_id.get()),
        v5::Packet::PublishAck(_)
        | v5::Packet::PublishReceived(_)
        | v5::Packet::PublishComplete(_) => Inbound::ClientAck,
        v5::Packet::PingRequest => Inbound::Ping,
        v5::Packet::Disconnect(d) => Inbound::Disconnect(u8::from(d.reason_code)),
        v5::Packet::Subscribe(_) => Inbound::Unsupported("SUBSCRIBE"),
        v5::Packet::Unsubscribe(_) => Inbound::Unsupported("UNSUBSCRIBE"),
        v5::Packet::Auth(_) => Inbound::Unsupported("AUTH"),
        other => {
            return Err(WireError::Malformed(format!(
                "packet type {:#x} is sent by servers, not clients",
                other.packet_type()
            )))
        }
    })
}

fn packet_id(id: u16) -> Result<NonZeroU16, WireError> {
    NonZeroU16::new(id).ok_or_else(|| WireError::Encode("packet id 0".into()))
}

fn to_v3(out: Outbound) -> v3::Packet {
    // Ids come from decoded packets, which the codec checked to be non-zero.
    let id = |id: u16| NonZeroU16::new(id).unwrap_or(NonZeroU16::MIN);
    match out {
        Outbound::ConnAck {
            code,
            session_present,
            ..
        } => v3::Packet::ConnectAck(v3::ConnectAck {
            return_code: v3_return_code(code),
            session_present,
        }),
        Outbound::PubAck { id: i, .. } => v3::Packet::PublishAck { packet_id: id(i) },
        Outbound::PubRec { id: i, .. } => v3::Packet::PublishReceived { packet_id: id(i) },
        Outbound::PubComp { id: i, .. } => v3::Packet::PublishComplete { packet_id: id(i) },
        Outbound::PingResp => v3::Packet::PingResponse,
        Outbound::Disconnect { .. } => v3::Packet::Disconnect,
    }
}

fn to_v5(out: Outbound) -> Result<v5::Packet, WireError> {
    let bad = |what: &str, code: u8| WireError::Encode(format!("{what} reason code {code:#x}"));
    let string = |s: Option<String>| s.map(ByteString::from);
    Ok(match out {
        Outbound::ConnAck {
            code,
            reason,
            receive_max,
            max_packet_size,
            assigned_client_id,
            session_present,
            session_expiry_secs,
        } => v5::Packet::ConnectAck(Box::new(v5::ConnectAck {
            session_present,
            reason_code: v5::ConnectAckReason::try_from(code).map_err(|_| bad("CONNACK", code))?,
            reason_string: string(reason),
            receive_max: NonZeroU16::new(receive_max).unwrap_or(NonZeroU16::MAX),
            max_packet_size: Some(max_packet_size),
            assigned_client_id: string(assigned_client_id),
            // The interval granted (the client's, capped by the server's maximum).
            session_expiry_interval_secs: Some(session_expiry_secs),
            max_qos: QoS::ExactlyOnce,
            topic_alias_max: 0,
            retain_available: false,
            wildcard_subscription_available: false,
            subscription_identifiers_available: false,
            shared_subscription_available: false,
            ..Default::default()
        })),
        Outbound::PubAck { id, code, reason } => v5::Packet::PublishAck(v5::PublishAck {
            packet_id: packet_id(id)?,
            reason_code: v5::PublishAckReason::try_from(code).map_err(|_| bad("PUBACK", code))?,
            properties: Vec::new(),
            reason_string: string(reason),
        }),
        Outbound::PubRec { id, code, reason } => v5::Packet::PublishReceived(v5::PublishAck {
            packet_id: packet_id(id)?,
            reason_code: v5::PublishAckReason::try_from(code).map_err(|_| bad("PUBREC", code))?,
            properties: Vec::new(),
            reason_string: string(reason),
        }),
        Outbound::PubComp { id, found } => v5::Packet::PublishComplete(v5::PublishAck2 {
            packet_id: packet_id(id)?,
            reason_code: if found {
                v5::PublishAck2Reason::Success
            } else {
                v5::PublishAck2Reason::PacketIdNotFound
            },
            properties: Vec::new(),
            reason_string: None,
        }),
        Outbound::PingResp => v5::Packet::PingResponse,
        Outbound::Disconnect { code, reason } => v5::Packet::Disconnect(v5::Disconnect {
            reason_code: v5::DisconnectReasonCode::try_from(code)
                .map_err(|_| bad("DISCONNECT", code))?,
            reason_string: string(reason),
            ..v5::Disconnect::new(v5::DisconnectReasonCode::NormalDisconnection)
        }),
    })
}

#[cfg(test)]
mod tests {
    use bytes::BytesMut;

    use super::*;

    fn string(s: &[u8]) -> Vec<u8> {
        let mut out = (s.len() as u16).to_be_bytes().to_vec();
        out.extend_from_slice(s);
        out
    }

    fn connect(level: u8) -> Vec<u8> {
        let mut body = string(b"MQTT");
        body.extend([level, 0xC2, 0, 30]);
        if level == 5 {
            body.push(0); // no properties
        }
        for s in [&b"dev"[..], b"user", b"secret"] {
            body.extend(string(s));
        }
        let mut packet = vec![0x10, body.len() as u8];
        packet.extend(body);
        packet
    }

    #[test]
    fn connect_then_publish_decode_for_both_versions() {
        for (level, version) in [(4, Version::V3), (5, Version::V5)] {
            let mut codec = Codec::new(1024);
            let mut buf = BytesMut::from(&connect(level)[..]);
            let mut publish = string(b"main.s.t");
            publish.extend([0, 7]);
            if level == 5 {
                publish.push(0);
            }
            publish.extend_from_slice(br#"{"id":1}"#);
            buf.extend_from_slice(&[0x32, publish.len() as u8]);
            buf.extend_from_slice(&publish);
            let Ok(Some(Inbound::Connect(c))) = codec.decode(&mut buf) else {
                panic!("no CONNECT");
            };
            assert_eq!((c.version, c.username.as_deref()), (version, Some("user")));
            let Ok(Some(Inbound::Publish(p))) = codec.decode(&mut buf) else {
                panic!("no PUBLISH");
            };
            assert_eq!(
                (p.qos, p.packet_id, p.topic.as_str()),
                (1, Some(7), "main.s.t")
            );
            assert_eq!(&p.payload[..], br#"{"id":1}"#);
            assert!(buf.is_empty());
        }
    }

    #[test]
    fn a_first_packet_that_is_not_connect_and_a_second_connect_are_refused() {
        let mut codec = Codec::new(1024);
        let mut buf = BytesMut::from(&b"\xc0\x00"[..]);
        assert!(matches!(
            codec.decode(&mut buf),
            Err(WireError::NotConnect(_))
        ));
        let mut codec = Codec::new(1024);
        let mut twice = connect(5);
        twice.extend(connect(5));
        let mut buf = BytesMut::from(&twice[..]);
        assert!(matches!(
            codec.decode(&mut buf),
            Ok(Some(Inbound::Connect(_)))
        ));
        assert!(matches!(
            codec.decode(&mut buf),
            Err(WireError::SecondConnect)
        ));
    }

    #[test]
    fn an_empty_client_id_without_clean_start_is_rejected_with_0x85_or_return_code_2() {
        for (level, connack) in [(4u8, &b"\x20\x02\x00\x02"[..]), (5, &b"\x20"[..])] {
            let mut body = string(b"MQTT");
            body.extend([level, 0xC0, 0, 30]); // user name, password, clean start 0
            if level == 5 {
                body.push(0);
            }
            for s in [&b""[..], b"user", b"secret"] {
                body.extend(string(s));
            }
            let mut buf = BytesMut::from(&[0x10, body.len() as u8][..]);
            buf.extend_from_slice(&body);
            let mut codec = Codec::new(1024);
            let e = codec.decode(&mut buf).expect_err("rejected");
            assert!(matches!(e, WireError::ClientIdRejected), "{e}");
            assert_eq!(e.reason_code(), reason::CLIENT_IDENTIFIER_NOT_VALID);
            let mut out = BytesMut::new();
            let answer = Outbound::ConnAck {
                code: e.reason_code(),
                reason: None,
                receive_max: 64,
                max_packet_size: 1024,
                assigned_client_id: None,
                session_present: false,
                session_expiry_secs: 0,
            };
            codec.encode(answer, &mut out).expect("connack");
            assert_eq!(&out[..connack.len()], connack, "level {level}");
            // Session present 0, then the code (v5: 0x85; properties follow).
            assert_eq!(
                out[2..4],
                [0, if level == 5 { 0x85 } else { 2 }],
                "level {level}"
            );
        }
    }

    #[test]
    fn a_connack_over_the_clients_maximum_packet_size_is_not_encoded() {
        // Found by the mqtt_packets fuzz target: a v5 CONNECT with an empty client id and a
        // Maximum Packet Size of 43; the CONNACK with the assigned id is 50 bytes.
        let mut body = string(b"MQTT");
        body.extend([5, 0xC2, 0, 30, 5, 0x27, 0, 0, 0, 43]);
        for s in [&b""[..], b"user", b"secret"] {
            body.extend(string(s));
        }
        let mut buf = BytesMut::from(&[0x10, body.len() as u8][..]);
        buf.extend_from_slice(&body);
        let mut codec = Codec::new(1024);
        let Ok(Some(Inbound::Connect(c))) = codec.decode(&mut buf) else {
            panic!("no CONNECT");
        };
        codec.set_client_max_packet_size(c.max_packet_size.expect("sent"));
        let connack = |assigned: Option<&str>| Outbound::ConnAck {
            code: reason::SUCCESS,
            reason: None,
            receive_max: 64,
            max_packet_size: 1024,
            assigned_client_id: assigned.map(str::to_string),
            session_present: false,
            session_expiry_secs: 0,
        };
        let mut out = BytesMut::new();
        let e = codec
            .encode(connack(Some("sluice-0123456789abcdef")), &mut out)
            .expect_err("over 43 bytes");
        assert!(matches!(e, WireError::OverClientMaximum { .. }), "{e}");
        codec
            .encode(connack(None), &mut out)
            .expect("fits in 43 bytes");
    }

    #[test]
    fn a_v3_connection_gets_return_codes_and_no_negative_acks() {
        let mut codec = Codec::new(1024);
        let mut buf = BytesMut::from(&connect(4)[..]);
        assert!(matches!(
            codec.decode(&mut buf),
            Ok(Some(Inbound::Connect(_)))
        ));
        let mut out = BytesMut::new();
        let refused = Outbound::ConnAck {
            code: reason::BAD_USER_NAME_OR_PASSWORD,
            reason: Some("no".into()),
            receive_max: 64,
            max_packet_size: 1024,
            assigned_client_id: None,
            session_present: false,
            session_expiry_secs: 0,
        };
        codec.encode(refused, &mut out).expect("connack");
        assert_eq!(&out[..], b"\x20\x02\x00\x04");
        let nack = Outbound::PubAck {
            id: 1,
            code: reason::PAYLOAD_FORMAT_INVALID,
            reason: None,
        };
        assert!(nack.refusal_closes(Version::V3) && !nack.refusal_closes(Version::V5));
        out.clear();
        codec.encode(nack, &mut out).expect("nothing");
        assert!(out.is_empty());
        assert_eq!(
            v3_return_code(reason::NOT_AUTHORIZED),
            v3::ConnectAckReason::NotAuthorized
        );
    }
}
