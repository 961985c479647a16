//! The MQTT load: `connections` MQTT 5 connections (client id/secret in CONNECT), each
//! publishing one telemetry record per PUBLISH at QoS 1 to the table's topic, one publish in
//! flight per connection (a device's usual pattern), as fast as PUBACKs come (closed loop)
//! or at a fixed total rate (open loop). Each publish is timed from send to its PUBACK.
//! Packets are encoded and decoded with the `rmqtt-codec` crate, as the server does.

use std::num::NonZeroU16;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bytestring::ByteString;
use futures::{SinkExt, StreamExt};
use rmqtt_codec::types::{Publish, QoS};
use rmqtt_codec::v5::{Codec, Connect, ConnectAckReason, Packet, PublishAckReason};
use sluice_bench::stats::Samples;
use tokio_util::codec::Framed;

use crate::rest_load::json_record;

/// What one load run did.
pub struct Outcome {
    /// Publishes answered PUBACK success inside the window.
    pub records: u64,
    /// PUBACK latencies, ms.
    pub latency_ms: Samples,
    /// Each latency with its publish's send time (s from the start, ms).
    pub timeline: Vec<(f64, f64)>,
}

/// The load's shape.
pub struct Shape {
    /// The pod's MQTT port.
    pub port: u16,
    /// The topic (table).
    pub table: String,
    /// Concurrent connections.
    pub connections: usize,
    /// How long to send.
    pub window: Duration,
    /// Total publishes/s (None: closed loop).
    pub rate: Option<f64>,
}

/// Runs the load.
pub async fn run(shape: Shape, padding: Arc<String>) -> Result<Outcome> {
    let start = Instant::now();
    let deadline = start + shape.window;
    let mut tasks = Vec::new();
    for c in 0..shape.connections {
        let (padding, table) = (padding.clone(), shape.table.clone());
        let interval = shape
            .rate
            .map(|r| Duration::from_secs_f64(shape.connections as f64 / r));
        let (port, connections) = (shape.port, shape.connections);
        tasks.push(tokio::spawn(async move {
            let stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
            stream.set_nodelay(true)?;
            let mut framed = Framed::new(stream, Codec::new(0, 0));
            let connect = Connect {
                client_id: ByteString::from(format!("bench-{c}")),
                username: Some(ByteString::from(sluice_bench::server::CLIENT_ID)),
                password: Some(
                    sluice_bench::server::CLIENT_SECRET
                        .as_bytes()
                        .to_vec()
                        .into(),
                ),
                keep_alive: 60,
                ..Connect::default()
            };
            framed.send(Packet::Connect(Box::new(connect))).await?;
            match framed.next().await {
                Some(Ok((Packet::ConnectAck(ack), _)))
                    if ack.reason_code == ConnectAckReason::Success => {}
                other => bail!("connection {c}: no CONNACK success: {other:?}"),
            }
            let mut latency = Samples::new();
            let mut timeline = Vec::new();
            let mut records = 0u64;
            let mut next =
                start + interval.map_or(Duration::ZERO, |i| i * c as u32 / connections as u32);
            let mut id = c as i64 * sluice_bench::e2e::ID_STRIDE;
            let mut packet_id: u16 = 0;
            while Instant::now() < deadline {
                if let Some(i) = interval {
                    tokio::time::sleep_until(next.into()).await;
                    next += i;
                }
                packet_id = packet_id.checked_add(1).unwrap_or(1);
                let publish = Publish {
                    dup: false,
                    retain: false,
                    qos: QoS::AtLeastOnce,
                    topic: ByteString::from(table.as_str()),
                    packet_id: NonZeroU16::new(packet_id),
                    payload: json_record(id, &padding).into(),
                    properties: Some(Default::default()),
                };
                id += 1;
                let sent = Instant::now();
                framed.send(Packet::Publish(Box::new(publish))).await?;
                match framed.next().await.context("connection closed")?? {
                    (Packet::PublishAck(ack), _)
                        if ack.reason_code == PublishAckReason::Success => {}
                    other => bail!("connection {c}: not a PUBACK success: {other:?}"),
                }
                if Instant::now() <= deadline {
                    let waited = sent.elapsed();
                    timeline.push((
                        sent.duration_since(start).as_secs_f64(),
                        waited.as_secs_f64() * 1000.0,
                    ));
                    latency.push_ms(waited);
                    records += 1;
                }
            }
            let _ = framed
                .send(Packet::Disconnect(rmqtt_codec::v5::Disconnect::new(
                    rmqtt_codec::v5::DisconnectReasonCode::NormalDisconnection,
                )))
                .await;
            anyhow::Ok((records, latency, timeline))
        }));
    }
    let mut out = Outcome {
        records: 0,
        latency_ms: Samples::new(),
        timeline: Vec::new(),
    };
    for t in tasks {
        let (records, latency, timeline) = t.await??;
        out.records += records;
        out.latency_ms.extend(&latency);
        out.timeline.extend(timeline);
    }
    Ok(out)
}
