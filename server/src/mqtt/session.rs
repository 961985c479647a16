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
//! - Client ids: an empty one with clean start (3.1.1: clean session) 0 is refused with
//!   CONNACK 0x85 (3.1.1: return code 2, identifier rejected); an empty one with clean
//!   start 1 on v5 is given one, `sluice-` and 16 random hex digits, in the CONNACK's
//!   Assigned Client Identifier.
//! - Receive maximum: at most [`RECEIVE_MAXIMUM`] QoS 1/2 publishes unanswered (QoS 2 until
//!   PUBREL → PUBCOMP). v5: one more is a protocol violation, answered DISCONNECT 0x93
//!   Receive Maximum exceeded; the connection is read on (so that one is seen) until
//!   2 × [`RECEIVE_MAXIMUM`] publishes of any QoS are held, then TCP pushes back. 3.1.1
//!   has no receive maximum: at [`RECEIVE_MAXIMUM`] held the connection is not read.
//! - Every refusal (CONNACK, PUBACK/PUBREC or DISCONNECT with a code ≥ 0x80, or the
//!   close that stands for it on 3.1.1; not the shutdown's 0x8B) is counted in
//!   `sluice_refusals_total{code}` with the gRPC code of the same meaning.
//! - Keep alive: no packet for 1.5 × the client's keep-alive → DISCONNECT 0x8D, close.
//! - Sessions (`sessions`): the client id's session is attached after CONNACK's checks
//!   (resumed: session present 1; granted expiry in the v5 CONNACK); its QoS 2 ids outlive
//!   the connection and, through the WAL (`journal::qos2`), the pod: a QoS 2 publish's
//!   (client id, packet id) is logged in its records' frame, and a PUBREL's release is
//!   logged and durable before PUBCOMP. A new kept session beyond `--mqtt-max-sessions` is
//!   refused with CONNACK 0x97 Quota exceeded (3.1.1: return code 3, server unavailable).
//!   Another connection with the same client id takes it over: this one
//!   answers what it has under way, then DISCONNECT 0x8E Session taken over (3.1.1:
//!   close). A will message is ignored; SUBSCRIBE/UNSUBSCRIBE/AUTH → DISCONNECT 0x83.
//! - Pod shutdown: no new packets are read, the writes under way finish and are answered,
//!   then DISCONNECT 0x8B Server shutting down. Pod drain (cluster): the same with
//!   DISCONNECT 0x9C Use another server (3.1.1: close), so devices reconnect through the
//!   router while the pod can still finish.

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use futures::stream::{FuturesOrdered, StreamExt};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::Instant;

use crate::ingest::acks::count_refusal_code;
use crate::pod::Pod;
use crate::rest::RestIngest;

use super::coalesce::Coalescer;
use super::credentials::{self, Identity};
use super::publish::{self, Binding, Refusal};
use super::sessions::{Attached, Begin, Session, Sessions};
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
    /// The sessions of this pod's MQTT clients.
    pub sessions: Sessions,
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
    /// The connection's protocol version (the receive maximum is policed on v5 only).
    version: Version,
    identity: Identity,
    /// The table, bound by the first accepted PUBLISH.
    binding: Option<Binding>,
    /// PUBLISH outcomes not answered yet, in arrival order.
    pending: FuturesOrdered<Pending>,
    /// QoS 1/2 publishes among `pending`.
    unanswered: usize,
    /// QoS 2 packet ids this connection is writing.
    writing_qos2: HashSet<u16>,
    /// The client's session (QoS 2 ids awaiting PUBREL live there).
    session: Arc<Session>,
    /// Its client id (QoS 2 pairs in the WAL name it).
    client_id: String,
}

impl State {
    /// Whether the connection is read now (else TCP pushes back).
    fn readable(&self) -> bool {
        let held = self.pending.len() + self.session.awaiting_release(&self.writing_qos2);
        match self.version {
            Version::V3 => held < usize::from(RECEIVE_MAXIMUM),
            Version::V5 => held < 2 * usize::from(RECEIVE_MAXIMUM),
        }
    }

    /// QoS 1/2 publishes not yet answered PUBACK / PUBCOMP.
    fn in_flight(&self) -> usize {
        self.unanswered + self.session.awaiting_release(&self.writing_qos2)
    }
}

/// Why the connection ends.
enum End {
    /// Close now (client left, or a 3.1.1 refusal).
    Close,
    /// Send this DISCONNECT (v5) and close.
    Disconnect(u8, String),
}

/// Ends the connection for the client's fault: DISCONNECT `code` (v5), counted in
/// `sluice_refusals_total` as `grpc`.
fn refuse(code: u8, grpc: tonic::Code, why: impl Into<String>) -> End {
    count_refusal_code(grpc);
    End::Disconnect(code, why.into())
}

/// The gRPC code a refusal of the bytes themselves counts as.
fn wire_grpc(e: &WireError) -> tonic::Code {
    match e {
        WireError::TooLarge { .. } => tonic::Code::ResourceExhausted,
        WireError::OverClientMaximum { .. } | WireError::Encode(_) => tonic::Code::Internal,
        _ => tonic::Code::InvalidArgument,
    }
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
        attached: None,
    };
    metrics::gauge!("sluice_mqtt_connections").increment(1.0);
    if let Err(e) = conn.run().await {
        tracing::debug!("MQTT connection ended: {e}");
    }
    if let Some((client_id, connection)) = conn.attached.take() {
        if conn.shared.sessions.detach(&client_id, connection) {
            // Dropped (expiry 0): its QoS 2 ids are released in the WAL too.
            let pod = &conn.shared.pod;
            let pairs = pod.qos2.of_clients(&[client_id]);
            if let Err(e) = pod.qos2.release(&pod.wal, &pairs).await {
                tracing::warn!("MQTT session's QoS 2 ids not released in the WAL: {e}");
            }
        }
    }
    metrics::gauge!("sluice_mqtt_connections").decrement(1.0);
}

struct Connection<S> {
    stream: S,
    buf: BytesMut,
    codec: Codec,
    shared: Arc<Shared>,
    /// The client id and connection number holding a session, once attached.
    attached: Option<(String, u64)>,
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
                let grpc = tonic::Code::Unauthenticated;
                return self
                    .refuse_connect(refused.code, grpc, refused.reason)
                    .await;
            }
        };
        if let Some(size) = connect.max_packet_size {
            self.codec.set_client_max_packet_size(size);
        }
        let assigned = (connect.version == Version::V5 && connect.client_id.is_empty())
            .then(|| format!("sluice-{:016x}", rand::random::<u64>()));
        let client_id = assigned.clone().unwrap_or(connect.client_id.clone());
        let asked_secs = match connect.version {
            Version::V5 => connect.session_expiry_secs,
            // 3.1.1 clean session 0: the session is kept (for the server's maximum).
            Version::V3 if connect.clean_start => 0,
            Version::V3 => u32::MAX,
        };
        let attached =
            match self
                .shared
                .sessions
                .attach(&client_id, connect.clean_start, asked_secs)
            {
                Ok(attached) => attached,
                Err(full) => {
                    // Sessions the refused CONNECT swept out (expired) are gone all the same:
                    // their QoS 2 ids must not come back at a restart.
                    let pod = &self.shared.pod;
                    let stale = pod.qos2.of_clients(&full.discarded);
                    if let Err(e) = pod.qos2.release(&pod.wal, &stale).await {
                        tracing::warn!("releasing expired MQTT sessions' QoS 2 ids failed: {e}");
                    }
                    let grpc = tonic::Code::ResourceExhausted;
                    return self
                        .refuse_connect(reason::QUOTA_EXCEEDED, grpc, full.to_string())
                        .await;
                }
            };
        metrics::counter!("sluice_mqtt_connects_total", "outcome" => "accepted").increment(1);
        self.attached = Some((client_id, attached.connection));
        // Discarded sessions' QoS 2 ids are released durably before CONNACK: a restart must
        // not bring them back to answer a new PUBLISH reusing one of them.
        let pod = &self.shared.pod;
        let stale = pod.qos2.of_clients(&attached.discarded);
        if let Err(e) = pod.qos2.release(&pod.wal, &stale).await {
            count_refusal_code(tonic::Code::Unavailable);
            self.send(self.connack(
                reason::UNSPECIFIED,
                Some(format!("the discarded session could not be logged: {e}")),
                None,
                None,
            ))
            .await?;
            return self.stream.shutdown().await;
        }
        self.send(self.connack(reason::SUCCESS, None, assigned, Some(&attached)))
            .await?;
        let keep_alive = (connect.keep_alive > 0)
            .then(|| Duration::from_millis(u64::from(connect.keep_alive) * 1500));
        let end = self.publishes(identity, keep_alive, attached).await?;
        if let End::Disconnect(code, why) = end {
            self.send(Outbound::Disconnect {
                code,
                reason: Some(why),
            })
            .await?;
        }
        self.stream.shutdown().await
    }

    /// Refuses the CONNECT: CONNACK `code` with `why` (3.1.1: the return code of the same
    /// meaning), counted in `sluice_refusals_total` as `grpc`, then close.
    async fn refuse_connect(
        &mut self,
        code: u8,
        grpc: tonic::Code,
        why: String,
    ) -> std::io::Result<()> {
        metrics::counter!("sluice_mqtt_connects_total", "outcome" => "refused").increment(1);
        count_refusal_code(grpc);
        self.send(self.connack(code, Some(why), None, None)).await?;
        self.stream.shutdown().await
    }

    fn version(&self) -> Version {
        self.codec.version().unwrap_or(Version::V5)
    }

    fn connack(
        &self,
        code: u8,
        reason: Option<String>,
        assigned: Option<String>,
        session: Option<&Attached>,
    ) -> Outbound {
        Outbound::ConnAck {
            code,
            reason,
            receive_max: RECEIVE_MAXIMUM,
            max_packet_size: self.shared.max_packet_size,
            assigned_client_id: assigned,
            session_present: session.is_some_and(|s| s.present),
            session_expiry_secs: session.map_or(0, |s| s.expiry_secs),
        }
    }

    /// The loop after CONNACK.
    async fn publishes(
        &mut self,
        identity: Identity,
        keep_alive: Option<Duration>,
        attached: Attached,
    ) -> std::io::Result<End> {
        let pod = self.shared.pod.clone();
        let taken = attached.taken;
        let mut st = State {
            version: self.version(),
            identity,
            binding: None,
            pending: FuturesOrdered::new(),
            unanswered: 0,
            writing_qos2: HashSet::new(),
            session: attached.session,
            client_id: self
                .attached
                .as_ref()
                .map(|(c, _)| c.clone())
                .unwrap_or_default(),
        };
        let mut deadline = keep_alive.map(|k| Instant::now() + k);
        let mut reading = true;
        let mut end: Option<End> = None;
        loop {
            if end.is_some() && st.pending.is_empty() {
                break;
            }
            let read = reading && st.readable() && end.is_none();
            tokio::select! {
                _ = pod.shutdown.cancelled(), if end.is_none() => {
                    end = Some(End::Disconnect(
                        reason::SERVER_SHUTTING_DOWN,
                        "the pod is shutting down; reconnect".into(),
                    ));
                }
                _ = pod.draining.cancelled(), if end.is_none() => {
                    end = Some(End::Disconnect(
                        reason::USE_ANOTHER_SERVER,
                        "the pod is draining; reconnect (through the router) to another pod"
                            .into(),
                    ));
                }
                _ = taken.cancelled(), if end.is_none() => {
                    end = Some(End::Disconnect(
                        reason::SESSION_TAKEN_OVER,
                        "another connection with this client id took the session over".into(),
                    ));
                }
                Some(done) = st.pending.next(), if !st.pending.is_empty() => {
                    if done.qos == 2 {
                        st.writing_qos2.remove(&done.id);
                    }
                    if done.qos > 0 {
                        st.unanswered -= 1;
                    }
                    if let Some(stop) = self.answer(done).await? {
                        end.get_or_insert(stop);
                    }
                }
                _ = sleep_until(deadline), if deadline.is_some() && end.is_none() => {
                    end = Some(refuse(
                        reason::KEEP_ALIVE_TIMEOUT,
                        tonic::Code::DeadlineExceeded,
                        "no packet within 1.5 times the keep-alive",
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
                                end = Some(refuse(e.reason_code(), wire_grpc(&e), e.to_string()));
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
                let found = st.session.release(id);
                if found {
                    // The release is durable before PUBCOMP, so a restart does not bring
                    // the id back as received.
                    let pod = &self.shared.pod;
                    let pair = [(st.client_id.clone(), id)];
                    if let Err(e) = pod.qos2.release(&pod.wal, &pair).await {
                        return Ok(Some(refuse(
                            reason::UNSPECIFIED,
                            tonic::Code::Unavailable,
                            format!("the PUBREL of packet id {id} could not be logged: {e}"),
                        )));
                    }
                }
                self.send(Outbound::PubComp { id, found }).await?;
                Ok(None)
            }
            Inbound::Ping => {
                self.send(Outbound::PingResp).await?;
                Ok(None)
            }
            Inbound::ClientAck => Ok(None),
            Inbound::Disconnect(_) => Ok(Some(End::Close)),
            Inbound::Connect(_) => Ok(Some(refuse(
                reason::PROTOCOL_ERROR,
                tonic::Code::InvalidArgument,
                "a second CONNECT",
            ))),
            Inbound::Unsupported(what) => Ok(Some(refuse(
                reason::IMPLEMENTATION_SPECIFIC,
                tonic::Code::Unimplemented,
                format!("{what} is not served: Sluice takes PUBLISH into tables only"),
            ))),
        }
    }

    async fn publish(&mut self, p: Publish, st: &mut State) -> std::io::Result<Option<End>> {
        if p.retain {
            return Ok(Some(refuse(
                reason::RETAIN_NOT_SUPPORTED,
                tonic::Code::Unimplemented,
                "retained messages are not supported (CONNACK says Retain Available 0)",
            )));
        }
        if p.topic_alias.is_some() {
            return Ok(Some(refuse(
                reason::TOPIC_ALIAS_INVALID,
                tonic::Code::Unimplemented,
                "topic aliases are not supported (CONNACK says Topic Alias Maximum 0)",
            )));
        }
        let id = p.packet_id.unwrap_or(0);
        if p.qos == 2 && st.writing_qos2.contains(&id) {
            // A redelivery of a QoS 2 publish this connection is writing: the write's answer
            // is its answer.
            metrics::counter!("sluice_mqtt_qos2_redeliveries_total").increment(1);
            return Ok(None);
        }
        let begun = if p.qos == 2 {
            match st.session.begin(id) {
                Begin::New(done) => Some(done),
                Begin::Received => {
                    // Written before (maybe on an earlier connection): PUBREC again, never
                    // written twice.
                    metrics::counter!("sluice_mqtt_qos2_redeliveries_total").increment(1);
                    self.send(Outbound::PubRec {
                        id,
                        code: reason::SUCCESS,
                        reason: None,
                    })
                    .await?;
                    return Ok(None);
                }
                Begin::Writing(mut rx) => {
                    // Being written by the connection this one took over: answered when
                    // that write ends.
                    metrics::counter!("sluice_mqtt_qos2_redeliveries_total").increment(1);
                    let session = st.session.clone();
                    st.unanswered += 1;
                    st.writing_qos2.insert(id);
                    st.pending.push_back(Box::pin(async move {
                        let _ = rx.wait_for(|done| *done).await;
                        let result = if session.is_received(id) {
                            Ok(0)
                        } else {
                            Err(Refusal::new(
                                reason::UNSPECIFIED,
                                tonic::Code::Aborted,
                                "the first delivery of this packet id was not written; \
                                 publish it again",
                            ))
                        };
                        Answered { qos: 2, id, result }
                    }));
                    return Ok(None);
                }
            }
        } else {
            None
        };
        if p.qos > 0 && st.in_flight() >= usize::from(RECEIVE_MAXIMUM) {
            // Only v5 gets here: a 3.1.1 connection is not read at the limit.
            return Ok(Some(refuse(
                reason::RECEIVE_MAXIMUM_EXCEEDED,
                tonic::Code::ResourceExhausted,
                format!(
                    "a QoS {} PUBLISH with {} unacknowledged: over the receive maximum of \
                     {RECEIVE_MAXIMUM} (CONNACK)",
                    p.qos,
                    st.in_flight()
                ),
            )));
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
                let write = publish::write(
                    self.shared.pod.clone(),
                    self.shared.rest.clone(),
                    self.shared.coalescer.clone(),
                    b,
                    p.payload,
                    begun.is_some().then(|| (st.client_id.clone(), id)),
                );
                let session = st.session.clone();
                // The session learns the outcome from the write's own task, so it holds
                // even if this connection is gone by then.
                let task = tokio::spawn(async move {
                    let result = write.await;
                    if let Some(done) = begun {
                        session.finish(id, result.is_ok(), done);
                    }
                    result
                });
                Box::pin(async move {
                    let result = task.await.unwrap_or_else(|e| {
                        Err(Refusal::new(
                            reason::UNSPECIFIED,
                            tonic::Code::Internal,
                            format!("write task: {e}"),
                        ))
                    });
                    Answered { qos, id, result }
                })
            }
            Err(refusal) => {
                if let Some(done) = begun {
                    st.session.finish(id, false, done);
                }
                Box::pin(std::future::ready(Answered {
                    qos,
                    id,
                    result: Err(refusal),
                }))
            }
        };
        if qos == 2 {
            st.writing_qos2.insert(id);
        }
        if qos > 0 {
            st.unanswered += 1;
        }
        st.pending.push_back(answer);
        Ok(None)
    }

    /// Sends the answer of a finished PUBLISH; Some ends the connection.
    async fn answer(&mut self, done: Answered) -> std::io::Result<Option<End>> {
        let outcome = if done.result.is_ok() { "ok" } else { "refused" };
        metrics::counter!("sluice_mqtt_publishes_total", "outcome" => outcome).increment(1);
        let (code, why) = match done.result {
            Ok(_) => (reason::SUCCESS, None),
            Err(r) => {
                tracing::debug!(code = r.code, "MQTT publish refused: {}", r.reason);
                count_refusal_code(r.grpc);
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
            _ => Outbound::PubRec {
                id: done.id,
                code,
                reason: why,
            },
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

    /// Answers a first packet that is refused: an empty client id that asks to keep its
    /// session gets CONNACK 0x85 (3.1.1: return code 2); other bytes that are not a
    /// CONNECT a v5 DISCONNECT if the version is known, else nothing; then close.
    async fn refuse_wire(&mut self, e: WireError) -> std::io::Result<()> {
        tracing::debug!("MQTT connection refused: {e}");
        count_refusal_code(wire_grpc(&e));
        let answer = match (&e, self.codec.version()) {
            (WireError::ClientIdRejected, Some(_)) => {
                Some(self.connack(e.reason_code(), Some(e.to_string()), None, None))
            }
            (_, Some(Version::V5)) => Some(Outbound::Disconnect {
                code: e.reason_code(),
                reason: Some(e.to_string()),
            }),
            _ => None,
        };
        if let Some(answer) = answer {
            let _ = self.send(answer).await;
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
