//! One MQTT connection, from CONNECT to close.
//!
//! - CONNECT must arrive within [`CONNECT_TIMEOUT`]; its credentials are checked
//!   (`credentials`) and answered with CONNACK (refusals: 0x86 / 3.1.1 code 4, then close).
//! - Each PUBLISH is bound to the connection's table (`publish::bind`) and written by a task
//!   of its own (`publish::write`, which returns once the records are durable); answers leave
//!   in the order the PUBLISH packets came: QoS 1 → PUBACK, QoS 2 → PUBREC (its packet id is
//!   then remembered until PUBREL, so a redelivered PUBLISH with that id is answered PUBREC
//!   again without writing), QoS 0 → nothing. A refusal is the reason code on the PUBACK /
//!   PUBREC (v5); a refused QoS 0 publish gets a DISCONNECT with the code (v5). 3.1.1 has no
//!   negative acks: a refusal closes the connection there.
//! - Receive maximum: at most [`RECEIVE_MAXIMUM`] QoS 1/2 publishes unanswered (QoS 2 until
//!   PUBREL); at the limit the connection is not read, so TCP pushes back on the client.
//! - Keep alive: no packet for 1.5 × the client's keep-alive → DISCONNECT 0x8D, close.
//! - Sessions: none survive the connection (CONNACK says session present 0 and session
//!   expiry 0); a will message is ignored; SUBSCRIBE/UNSUBSCRIBE/AUTH → DISCONNECT 0x83.
//! - Pod shutdown: no new packets are read, the writes under way finish and are answered,
//!   then DISCONNECT 0x8B Server shutting down.

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use futures::stream::{FuturesOrdered, StreamExt};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::Instant;

use crate::pod::Pod;
use crate::rest::RestIngest;

use super::coalesce::Coalescer;
use super::credentials::{self, Identity};
use super::publish::{self, Binding, Refusal};
use super::wire::{reason, Codec, Inbound, Outbound, Publish, Version, WireError};

/// QoS 1/2 publishes a connection may have unanswered (advertised in CONNACK).
pub const RECEIVE_MAXIMUM: u16 = 64;
/// A client must send CONNECT within this time of connecting.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// What a connection task shares.
pub struct Shared {
    /// The pod.
    pub pod: Arc<Pod>,
    /// The write service (this listener's JSON stream per table).
    pub rest: Arc<RestIngest>,
    /// Each table's gathering of one-record publishes into shared writes.
    pub coalescer: Arc<Coalescer>,
    /// Largest packet taken, bytes.
    pub max_packet_size: u32,
}

/// The outcome of one PUBLISH, in arrival order.
struct Answered {
    qos: u8,
    id: u16,
    result: Result<usize, Refusal>,
}

type Pending = Pin<Box<dyn Future<Output = Answered> + Send>>;

/// A connection's state after CONNACK.
struct State {
    identity: Identity,
    /// The table, bound by the first accepted PUBLISH.
    binding: Option<Binding>,
    /// PUBLISH outcomes not answered yet, in arrival order.
    pending: FuturesOrdered<Pending>,
    /// QoS 2 packet ids being written.
    writing_qos2: HashSet<u16>,
    /// QoS 2 packet ids answered PUBREC, until their PUBREL.
    awaiting_rel: HashSet<u16>,
}

impl State {
    /// Whether another QoS 1/2 publish fits in the receive maximum.
    fn has_room(&self) -> bool {
        self.pending.len() + self.awaiting_rel.len() < usize::from(RECEIVE_MAXIMUM)
    }
}

/// Why the connection ends.
enum End {
    /// Close now (client left, or a 3.1.1 refusal).
    Close,
    /// Send this DISCONNECT (v5) and close.
    Disconnect(u8, String),
}

/// Serves one connection until it closes.
pub async fn serve<S>(stream: S, shared: Arc<Shared>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
{
    let mut conn = Connection {
        stream,
        buf: BytesMut::with_capacity(4096),
        codec: Codec::new(shared.max_packet_size),
        shared,
    };
    metrics::gauge!("sluice_mqtt_connections").increment(1.0);
    if let Err(e) = conn.run().await {
        tracing::debug!("MQTT connection ended: {e}");
    }
    metrics::gauge!("sluice_mqtt_connections").decrement(1.0);
}

struct Connection<S> {
    stream: S,
    buf: BytesMut,
    codec: Codec,
    shared: Arc<Shared>,
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Connection<S> {
    async fn run(&mut self) -> std::io::Result<()> {
        let connect = match tokio::time::timeout(CONNECT_TIMEOUT, self.next_packet()).await {
            Ok(Ok(Some(Inbound::Connect(c)))) => c,
            Ok(Err(e)) => return self.refuse_wire(e).await,
            _ => return Ok(()),
        };
        let identity = match credentials::authenticate(&self.shared.pod, &connect) {
            Ok(c) => c,
            Err(refused) => {
                metrics::counter!("sluice_mqtt_connects_total", "outcome" => "refused")
                    .increment(1);
                self.send(self.connack(refused.code, Some(refused.reason)))
                    .await?;
                return self.stream.shutdown().await;
            }
        };
        metrics::counter!("sluice_mqtt_connects_total", "outcome" => "accepted").increment(1);
        if let Some(size) = connect.max_packet_size {
            self.codec.set_client_max_packet_size(size);
        }
        self.send(self.connack(reason::SUCCESS, None)).await?;
        let keep_alive = (connect.keep_alive > 0)
            .then(|| Duration::from_millis(u64::from(connect.keep_alive) * 1500));
        let end = self.publishes(identity, keep_alive).await?;
        if let End::Disconnect(code, why) = end {
            self.send(Outbound::Disconnect {
                code,
                reason: Some(why),
            })
            .await?;
        }
        self.stream.shutdown().await
    }

    fn version(&self) -> Version {
        self.codec.version().unwrap_or(Version::V5)
    }

    fn connack(&self, code: u8, reason: Option<String>) -> Outbound {
        Outbound::ConnAck {
            code,
            reason,
            receive_max: RECEIVE_MAXIMUM,
            max_packet_size: self.shared.max_packet_size,
        }
    }

    /// The loop after CONNACK.
    async fn publishes(
        &mut self,
        identity: Identity,
        keep_alive: Option<Duration>,
    ) -> std::io::Result<End> {
        let pod = self.shared.pod.clone();
        let mut st = State {
            identity,
            binding: None,
            pending: FuturesOrdered::new(),
            writing_qos2: HashSet::new(),
            awaiting_rel: HashSet::new(),
        };
        let mut deadline = keep_alive.map(|k| Instant::now() + k);
        let mut reading = true;
        let mut end: Option<End> = None;
        loop {
            if end.is_some() && st.pending.is_empty() {
                break;
            }
            let read = reading && st.has_room() && end.is_none();
            tokio::select! {
                _ = pod.shutdown.cancelled(), if end.is_none() => {
                    end = Some(End::Disconnect(
                        reason::SERVER_SHUTTING_DOWN,
                        "the pod is shutting down; reconnect".into(),
                    ));
                }
                Some(done) = st.pending.next(), if !st.pending.is_empty() => {
                    if done.qos == 2 {
                        st.writing_qos2.remove(&done.id);
                    }
                    if let Some(stop) = self.answer(done, &mut st.awaiting_rel).await? {
                        end.get_or_insert(stop);
                    }
                }
                _ = sleep_until(deadline), if deadline.is_some() && end.is_none() => {
                    end = Some(End::Disconnect(
                        reason::KEEP_ALIVE_TIMEOUT,
                        "no packet within 1.5 times the keep-alive".into(),
                    ));
                }
                n = self.stream.read_buf(&mut self.buf), if read => {
                    if n? == 0 {
                        // The client left: let the writes under way finish (their records
                        // are logged either way), then close.
                        reading = false;
                        end.get_or_insert(End::Close);
                        continue;
                    }
                    deadline = keep_alive.map(|k| Instant::now() + k);
                    loop {
                        let packet = match self.codec.decode(&mut self.buf) {
                            Ok(Some(p)) => p,
                            Ok(None) => break,
                            Err(e) => {
                                end = Some(End::Disconnect(e.reason_code(), e.to_string()));
                                break;
                            }
                        };
                        let step = self.packet(packet, &mut st).await?;
                        if let Some(stop) = step {
                            end = Some(stop);
                            break;
                        }
                    }
                }
            }
        }
        Ok(end.unwrap_or(End::Close))
    }

    /// Handles one packet after CONNECT; Some ends the connection.
    async fn packet(&mut self, packet: Inbound, st: &mut State) -> std::io::Result<Option<End>> {
        match packet {
            Inbound::Publish(p) => self.publish(p, st).await,
            Inbound::PubRel(id) => {
                let found = st.awaiting_rel.remove(&id);
                self.send(Outbound::PubComp { id, found }).await?;
                Ok(None)
            }
            Inbound::Ping => {
                self.send(Outbound::PingResp).await?;
                Ok(None)
            }
            Inbound::ClientAck => Ok(None),
            Inbound::Disconnect(_) => Ok(Some(End::Close)),
            Inbound::Connect(_) => Ok(Some(End::Disconnect(
                reason::PROTOCOL_ERROR,
                "a second CONNECT".into(),
            ))),
            Inbound::Unsupported(what) => Ok(Some(End::Disconnect(
                reason::IMPLEMENTATION_SPECIFIC,
                format!("{what} is not served: Sluice takes PUBLISH into tables only"),
            ))),
        }
    }

    async fn publish(&mut self, p: Publish, st: &mut State) -> std::io::Result<Option<End>> {
        if p.retain {
            return Ok(Some(End::Disconnect(
                reason::RETAIN_NOT_SUPPORTED,
                "retained messages are not supported (CONNACK says Retain Available 0)".into(),
            )));
        }
        if p.topic_alias.is_some() {
            return Ok(Some(End::Disconnect(
                0x94,
                "topic aliases are not supported (CONNACK says Topic Alias Maximum 0)".into(),
            )));
        }
        let id = p.packet_id.unwrap_or(0);
        if p.qos == 2 && (st.awaiting_rel.contains(&id) || st.writing_qos2.contains(&id)) {
            // A redelivery of a QoS 2 publish already written (or being written): answered
            // again, never written twice.
            metrics::counter!("sluice_mqtt_qos2_redeliveries_total").increment(1);
            if st.awaiting_rel.contains(&id) {
                self.send(Outbound::PubRec {
                    id,
                    code: reason::SUCCESS,
                    reason: None,
                })
                .await?;
            }
            return Ok(None);
        }
        let bound = publish::bind(
            &self.shared.pod,
            &st.identity,
            st.binding.as_ref(),
            &p.topic,
        )
        .await;
        let qos = p.qos;
        let answer: Pending = match bound {
            Ok(b) => {
                st.binding = Some(b.clone());
                let task = tokio::spawn(publish::write(
                    self.shared.pod.clone(),
                    self.shared.rest.clone(),
                    self.shared.coalescer.clone(),
                    b,
                    p.payload,
                ));
                Box::pin(async move {
                    let result = task.await.unwrap_or_else(|e| {
                        Err(Refusal {
                            code: reason::UNSPECIFIED,
                            reason: format!("write task: {e}"),
                        })
                    });
                    Answered { qos, id, result }
                })
            }
            Err(refusal) => Box::pin(std::future::ready(Answered {
                qos,
                id,
                result: Err(refusal),
            })),
        };
        if qos == 2 {
            st.writing_qos2.insert(id);
        }
        st.pending.push_back(answer);
        Ok(None)
    }

    /// Sends the answer of a finished PUBLISH; Some ends the connection.
    async fn answer(
        &mut self,
        done: Answered,
        awaiting_rel: &mut HashSet<u16>,
    ) -> std::io::Result<Option<End>> {
        let outcome = if done.result.is_ok() { "ok" } else { "refused" };
        metrics::counter!("sluice_mqtt_publishes_total", "outcome" => outcome).increment(1);
        let (code, why) = match done.result {
            Ok(_) => (reason::SUCCESS, None),
            Err(r) => {
                tracing::debug!(code = r.code, "MQTT publish refused: {}", r.reason);
                (r.code, Some(r.reason))
            }
        };
        let out = match done.qos {
            0 if code == reason::SUCCESS => return Ok(None),
            0 => return Ok(Some(End::Disconnect(code, why.unwrap_or_default()))),
            1 => Outbound::PubAck {
                id: done.id,
                code,
                reason: why,
            },
            _ => {
                if code == reason::SUCCESS {
                    awaiting_rel.insert(done.id);
                }
                Outbound::PubRec {
                    id: done.id,
                    code,
                    reason: why,
                }
            }
        };
        if out.refusal_closes(self.version()) {
            return Ok(Some(End::Close));
        }
        self.send(out).await?;
        Ok(None)
    }

    /// Reads until one whole packet is decoded (None: the client left first).
    async fn next_packet(&mut self) -> Result<Option<Inbound>, WireError> {
        loop {
            if let Some(p) = self.codec.decode(&mut self.buf)? {
                return Ok(Some(p));
            }
            match self.stream.read_buf(&mut self.buf).await {
                Ok(0) | Err(_) => return Ok(None),
                Ok(_) => {}
            }
        }
    }

    /// Answers bytes that are not a CONNECT: a v5 DISCONNECT if the version is known.
    async fn refuse_wire(&mut self, e: WireError) -> std::io::Result<()> {
        tracing::debug!("MQTT connection refused: {e}");
        if self.codec.version() == Some(Version::V5) {
            let _ = self
                .send(Outbound::Disconnect {
                    code: e.reason_code(),
                    reason: Some(e.to_string()),
                })
                .await;
        }
        self.stream.shutdown().await
    }

    async fn send(&mut self, out: Outbound) -> std::io::Result<()> {
        let mut bytes = BytesMut::new();
        self.codec
            .encode(out, &mut bytes)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        if !bytes.is_empty() {
            self.stream.write_all(&bytes).await?;
            self.stream.flush().await?;
        }
        Ok(())
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
