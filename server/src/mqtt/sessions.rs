//! MQTT sessions that outlive a connection, kept in the pod's memory per client id.
//!
//! What an ingest-only server keeps of a session: the QoS 2 packet ids received — written
//! and answered PUBREC, or being written — and not yet released by PUBREL. So a client that
//! reconnects and sends a PUBLISH again (DUP) gets PUBREC without a second write, and its
//! PUBREL for a remembered id gets PUBCOMP (an id not remembered: PUBCOMP 0x92 on v5).
//!
//! - Resume: CONNECT with clean start 0 (3.1.1: clean session 0) finds the session of its
//!   client id (CONNACK session present 1) unless it expired; clean start 1 discards it.
//! - Expiry: a session outlives its connection by the interval the client asked for (v5
//!   Session Expiry Interval; 3.1.1 clean session 0: the maximum; clean session 1 or an
//!   interval of 0: not at all), capped by [`SESSION_EXPIRY_MAX_SECS`] (the granted value is
//!   announced in the v5 CONNACK). An expired session is not resumed; expired sessions are
//!   dropped by a sweep at a CONNECT at most every [`SWEEP_EVERY`].
//! - Takeover: a CONNECT for a client id whose session another connection holds cancels
//!   that connection's token ([`Attached::taken`]); it answers what it has under way and
//!   leaves with DISCONNECT 0x8E Session taken over (3.1.1: a close). Its writes still mark
//!   their ids in the session, which the new connection now holds.
//! - Cap: at most `--mqtt-max-sessions` sessions ([`Sessions::new`]; default
//!   [`DEFAULT_MAX_SESSIONS`]) — held by a connection or waiting for one — so a client
//!   cycling through client ids cannot grow the pod's memory for an hour. A CONNECT that
//!   would add a kept session (expiry > 0, no session of its client id yet) at the cap
//!   sweeps expired sessions first (at most every [`FULL_SWEEP_EVERY`]); if still full it
//!   is refused ([`Full`]: CONNACK 0x97 Quota exceeded, 3.1.1 return code 3). Refused, not
//!   an older session evicted: an evicted session's QoS 2 ids would be forgotten and a
//!   resent PUBLISH written twice, silently; a refusal is seen by the device and leaves
//!   every kept session exactly-once. Resuming or taking over a session and a CONNECT that
//!   keeps no session (expiry 0) are never refused by the cap. Gauge
//!   `sluice_mqtt_sessions`: sessions in the map.
//! - Durable QoS 2 ids (`journal::qos2`): an id's pair is logged in its records' WAL frame
//!   and its release before PUBCOMP, so after a pod restart the listener starts with a
//!   session per client id that had ids received and not released ([`Sessions::restored`]:
//!   detached, the full expiry cap), holding those ids as received. A PUBLISH carrying a
//!   received id is answered PUBREC without a write, DUP flag or not (paho resends a
//!   redelivery without DUP), so an id must never be kept stale: the ids of a session this
//!   pod discards (clean start, expiry — also when the CONNECT that swept it is then refused
//!   at the cap) are released in the WAL before the CONNACK. A device reconnecting with
//!   clean start 0 finds its session (session present 1).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::journal::Qos2Ledger;

/// The longest a session outlives its connection, seconds (announced in the v5 CONNACK).
pub const SESSION_EXPIRY_MAX_SECS: u32 = 3600;

/// How often at most a CONNECT sweeps expired sessions out (the sweep reads them all).
pub const SWEEP_EVERY: Duration = Duration::from_secs(10);

/// How often at most a CONNECT refused at the cap sweeps first.
pub const FULL_SWEEP_EVERY: Duration = Duration::from_secs(1);

/// The default of `--mqtt-max-sessions`.
pub const DEFAULT_MAX_SESSIONS: usize = 100_000;

/// The pod's sessions by client id.
pub struct Sessions {
    by_client: Mutex<HashMap<String, Arc<Session>>>,
    next_connection: AtomicU64,
    swept_at: Mutex<Option<Instant>>,
    max: usize,
}

impl Default for Sessions {
    fn default() -> Self {
        Sessions::new(DEFAULT_MAX_SESSIONS)
    }
}

/// A CONNECT refused because the pod keeps `max` sessions already.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the pod keeps at most {max} MQTT sessions (--mqtt-max-sessions) and has no room for a \
     new one; retry later, or connect without a session (clean start 1, session expiry 0)"
)]
pub struct Full {
    /// The cap.
    pub max: usize,
    /// Client ids whose expired sessions the refused CONNECT swept out: their QoS 2 ids are
    /// to be released in the WAL all the same.
    pub discarded: Vec<String>,
}

/// One client's session.
#[derive(Default)]
pub struct Session {
    qos2: Mutex<HashMap<u16, Qos2>>,
    holder: Mutex<Holder>,
}

/// Which connection holds a session, and until when it is kept once none does.
#[derive(Default)]
struct Holder {
    connection: Option<(u64, CancellationToken)>,
    expiry: Duration,
    detached_at: Option<Instant>,
}

/// A QoS 2 packet id the session knows.
enum Qos2 {
    /// Being written; the sender says when the write ended (`finish`).
    Writing(watch::Receiver<bool>),
    /// Written and answered PUBREC, until PUBREL.
    Received,
}

/// What a QoS 2 PUBLISH's packet id means to the session.
pub enum Begin {
    /// New: write it, then [`Session::finish`] with this sender.
    New(watch::Sender<bool>),
    /// Being written (by this or an earlier connection): wait on this, then
    /// [`Session::is_received`].
    Writing(watch::Receiver<bool>),
    /// Already written: answer PUBREC, do not write.
    Received,
}

/// A connection's hold on its session.
pub struct Attached {
    /// The session.
    pub session: Arc<Session>,
    /// Whether it was resumed (CONNACK session present).
    pub present: bool,
    /// The granted session expiry interval, seconds.
    pub expiry_secs: u32,
    /// This connection's number (for [`Sessions::detach`]).
    pub connection: u64,
    /// Cancelled when another connection takes the session over.
    pub taken: CancellationToken,
    /// Client ids whose sessions this attach discarded (clean start, expired): their QoS 2
    /// ids are to be released in the WAL before CONNACK.
    pub discarded: Vec<String>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks leaves plain data behind: keep using it.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Sessions {
    /// At most `max` sessions (`--mqtt-max-sessions`).
    pub fn new(max: usize) -> Sessions {
        Sessions {
            by_client: Mutex::default(),
            next_connection: AtomicU64::new(0),
            swept_at: Mutex::new(None),
            max,
        }
    }

    /// The sessions of the client ids `ledger` holds QoS 2 ids of (rebuilt from the WAL):
    /// detached, kept for [`SESSION_EXPIRY_MAX_SECS`] from now; at most `max` sessions for
    /// new client ids (the restored ones count, and are never dropped for the cap).
    pub fn restored(ledger: &Qos2Ledger, max: usize) -> Sessions {
        let now = Instant::now();
        let by_client = ledger
            .by_client()
            .into_iter()
            .map(|(client, ids)| {
                let session = Session {
                    qos2: Mutex::new(ids.into_iter().map(|id| (id, Qos2::Received)).collect()),
                    holder: Mutex::new(Holder {
                        connection: None,
                        expiry: Duration::from_secs(u64::from(SESSION_EXPIRY_MAX_SECS)),
                        detached_at: Some(now),
                    }),
                };
                (client, Arc::new(session))
            })
            .collect();
        Sessions {
            by_client: Mutex::new(by_client),
            next_connection: AtomicU64::new(0),
            swept_at: Mutex::new(None),
            max,
        }
    }

    /// The session of `client_id` for a new connection (resumed unless `clean_start`),
    /// taking it over from a connection that holds it. `asked_secs`: the expiry interval the
    /// client asked for (3.1.1 clean session 0: `u32::MAX`). [`Full`] when it would add a
    /// kept session at the cap (see the module doc).
    pub fn attach(
        &self,
        client_id: &str,
        clean_start: bool,
        asked_secs: u32,
    ) -> Result<Attached, Full> {
        let now = Instant::now();
        let expiry_secs = asked_secs.min(SESSION_EXPIRY_MAX_SECS);
        let mut discarded = Vec::new();
        let mut map = lock(&self.by_client);
        let grows = |map: &HashMap<String, Arc<Session>>| {
            expiry_secs > 0 && map.len() >= self.max && !map.contains_key(client_id)
        };
        let mut swept_at = lock(&self.swept_at);
        let every = if grows(&map) {
            FULL_SWEEP_EVERY
        } else {
            SWEEP_EVERY
        };
        if swept_at.is_none_or(|at| now.duration_since(at) >= every) {
            map.retain(|client, s| {
                let expired = s.expired(now);
                if expired {
                    discarded.push(client.clone());
                }
                !expired
            });
            *swept_at = Some(now);
        }
        drop(swept_at);
        metrics::gauge!("sluice_mqtt_sessions").set(map.len() as f64);
        if grows(&map) {
            return Err(Full {
                max: self.max,
                discarded,
            });
        }
        let connection = self.next_connection.fetch_add(1, Ordering::Relaxed);
        let taken = CancellationToken::new();
        let existing = map.get(client_id).cloned();
        if let Some(old) = &existing {
            if let Some((_, token)) = lock(&old.holder).connection.take() {
                metrics::counter!("sluice_mqtt_session_takeovers_total").increment(1);
                token.cancel();
            }
        }
        let (session, present) = match existing {
            Some(old) if !clean_start && !old.expired(now) => (old, true),
            old => {
                if old.is_some() {
                    discarded.push(client_id.to_string());
                }
                let fresh = Arc::new(Session::default());
                map.insert(client_id.to_string(), fresh.clone());
                metrics::gauge!("sluice_mqtt_sessions").set(map.len() as f64);
                (fresh, false)
            }
        };
        *lock(&session.holder) = Holder {
            connection: Some((connection, taken.clone())),
            expiry: Duration::from_secs(u64::from(expiry_secs)),
            detached_at: None,
        };
        metrics::counter!(
            "sluice_mqtt_sessions_total",
            "outcome" => if present { "resumed" } else { "new" }
        )
        .increment(1);
        Ok(Attached {
            session,
            present,
            expiry_secs,
            connection,
            taken,
            discarded,
        })
    }

    /// The connection `connection` ended: its session is kept for its expiry interval (or
    /// dropped now if that is 0: returns true, its QoS 2 ids are to be released in the WAL)
    /// unless another connection took it over.
    pub fn detach(&self, client_id: &str, connection: u64) -> bool {
        let mut map = lock(&self.by_client);
        let Some(session) = map.get(client_id).cloned() else {
            return false;
        };
        let mut holder = lock(&session.holder);
        if holder.connection.as_ref().map(|(c, _)| *c) != Some(connection) {
            return false;
        }
        holder.connection = None;
        if holder.expiry.is_zero() {
            drop(holder);
            map.remove(client_id);
            metrics::gauge!("sluice_mqtt_sessions").set(map.len() as f64);
            true
        } else {
            holder.detached_at = Some(Instant::now());
            false
        }
    }

    /// Sessions kept (held by a connection or waiting for one).
    pub fn len(&self) -> usize {
        lock(&self.by_client).len()
    }

    /// Whether no session is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Session {
    fn expired(&self, now: Instant) -> bool {
        let holder = lock(&self.holder);
        holder
            .detached_at
            .is_some_and(|at| now.duration_since(at) >= holder.expiry)
    }

    /// What QoS 2 packet id `id` is to this session; a new id is marked as being written.
    pub fn begin(&self, id: u16) -> Begin {
        let mut qos2 = lock(&self.qos2);
        match qos2.get(&id) {
            Some(Qos2::Received) => return Begin::Received,
            // A writer that went away without finishing (its task panicked) is forgotten.
            Some(Qos2::Writing(rx)) if rx.has_changed().is_ok() => {
                return Begin::Writing(rx.clone())
            }
            _ => {}
        }
        let (tx, rx) = watch::channel(false);
        qos2.insert(id, Qos2::Writing(rx));
        Begin::New(tx)
    }

    /// The write of QoS 2 packet id `id` ended: remembered until PUBREL if `written`, else
    /// forgotten (a refused publish is not kept).
    pub fn finish(&self, id: u16, written: bool, done: watch::Sender<bool>) {
        let mut qos2 = lock(&self.qos2);
        if written {
            qos2.insert(id, Qos2::Received);
        } else {
            qos2.remove(&id);
        }
        drop(qos2);
        let _ = done.send(true);
    }

    /// Whether `id` was written and not yet released.
    pub fn is_received(&self, id: u16) -> bool {
        matches!(lock(&self.qos2).get(&id), Some(Qos2::Received))
    }

    /// PUBREL of `id`: whether it was remembered (then it is released).
    pub fn release(&self, id: u16) -> bool {
        let mut qos2 = lock(&self.qos2);
        if matches!(qos2.get(&id), Some(Qos2::Received)) {
            qos2.remove(&id);
            true
        } else {
            false
        }
    }

    /// QoS 2 ids written and awaiting PUBREL, but for those in `answering`: ids a
    /// connection has not answered PUBREC yet, which it counts among its unanswered
    /// publishes (an id is Received from its write's end until the connection answers it,
    /// and counted twice it would make a client within its receive maximum look over it).
    pub fn awaiting_release(&self, answering: &HashSet<u16>) -> usize {
        lock(&self.qos2)
            .iter()
            .filter(|(id, q)| matches!(q, Qos2::Received) && !answering.contains(id))
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_resumed_taken_over_and_expires() {
        let sessions = Sessions::default();
        let first = sessions.attach("dev", false, 60).expect("room for it");
        assert!(!first.present);
        let Begin::New(tx) = first.session.begin(7) else {
            panic!("a new id")
        };
        first.session.finish(7, true, tx);
        let second = sessions.attach("dev", false, 60).expect("room for it");
        assert!(second.present && first.taken.is_cancelled());
        assert!(matches!(second.session.begin(7), Begin::Received));
        // The old connection's end does not drop the session the new one holds.
        sessions.detach("dev", first.connection);
        assert_eq!(sessions.len(), 1);
        assert!(second.session.release(7) && !second.session.release(7));
        sessions.detach("dev", second.connection);
        let clean = sessions.attach("dev", true, 0).expect("room for it");
        assert!(!clean.present);
        sessions.detach("dev", clean.connection);
        assert!(sessions.is_empty(), "expiry 0: dropped at the end");
        assert_eq!(
            sessions
                .attach("x", false, u32::MAX)
                .expect("room for it")
                .expiry_secs,
            3600
        );
    }

    #[test]
    fn a_new_kept_session_at_the_cap_is_refused_until_an_expired_one_is_swept() {
        let sessions = Sessions::new(2);
        let a = sessions.attach("a", false, 60).expect("room for it");
        let b = sessions.attach("b", false, 1).expect("room for it");
        sessions.detach("b", b.connection);
        assert_eq!(
            sessions.attach("c", false, 60).err().map(|f| f.max),
            Some(2)
        );
        // No kept session asked, or the client id's own session: not refused.
        let no_session = sessions.attach("d", true, 0).expect("room for it");
        sessions.detach("d", no_session.connection);
        assert!(
            sessions
                .attach("a", false, 60)
                .expect("room for it")
                .present
        );
        assert!(
            sessions
                .attach("b", false, 60)
                .expect("room for it")
                .present
        );
        sessions.detach("a", a.connection);
        let b = sessions.attach("b", true, 1).expect("room for it");
        sessions.detach("b", b.connection);
        // Once b has expired, the CONNECT at the cap sweeps it out and takes its place.
        std::thread::sleep(Duration::from_millis(1100));
        assert!(
            !sessions
                .attach("c", false, 60)
                .expect("room for it")
                .present
        );
        assert_eq!(sessions.len(), 2);
    }

    #[test]
    fn restored_ids_are_received_and_a_discarded_session_is_reported() {
        let ledger = Qos2Ledger::default();
        ledger.received(&[("dev".to_string(), 7), ("dev".to_string(), 8)], 100);
        let sessions = Sessions::restored(&ledger, 10);
        assert_eq!(sessions.len(), 1);
        let resumed = sessions.attach("dev", false, 60).expect("room for it");
        assert!(resumed.present && resumed.discarded.is_empty());
        assert!(matches!(resumed.session.begin(7), Begin::Received));
        assert!(resumed.session.release(7) && resumed.session.is_received(8));
        let clean = sessions.attach("dev", true, 0).expect("room for it");
        assert!(!clean.present);
        assert_eq!(clean.discarded, vec!["dev".to_string()]);
        assert!(
            sessions.detach("dev", clean.connection),
            "expiry 0: dropped, reported"
        );
    }

    #[test]
    fn an_id_written_but_not_yet_answered_is_not_counted_as_awaiting_release() {
        let session = Session::default();
        for id in [1, 2] {
            let Begin::New(done) = session.begin(id) else {
                panic!("id {id} is new");
            };
            session.finish(id, true, done);
        }
        assert_eq!(session.awaiting_release(&HashSet::new()), 2);
        assert_eq!(session.awaiting_release(&HashSet::from([2])), 1);
        assert!(session.release(1));
        assert_eq!(session.awaiting_release(&HashSet::from([2])), 0);
    }
}
