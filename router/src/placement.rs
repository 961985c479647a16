//! Where a new stream goes. A pod's *score* estimates how busy it is from its last load report
//! plus the streams this router placed on it since that report (so a burst of new streams
//! between two reports does not all land on the same pod). Policies:
//!
//! - [`Policy::PowerOfTwo`] (default): sample two distinct placeable pods at random, take the
//!   lower score. Near least-loaded balance, but robust to stale reports and to several
//!   routers deciding at once (they do not all herd onto the one least-loaded pod).
//! - [`Policy::LeastLoaded`]: the lowest score (best with one router and fresh reports).
//! - [`Policy::RoundRobin`] and [`Policy::Random`]: load-blind baselines for the balance
//!   benchmark.
//!
//! A connection with a key (an MQTT client id) is placed by [`rendezvous`] hashing instead:
//! the placeable pod with the highest weight for the key, so every router sends the key to
//! the same pod while that pod is placeable, and to the next one when it is not.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use rand::Rng;

use crate::pod_record::{Load, PodRecord};

/// Bytes/s of ingress that weigh as much as one open stream in the score.
pub const BYTES_PER_SEC_PER_STREAM: f64 = 1024.0 * 1024.0;
/// Weight of one busy core in the score, in streams. Small: a pod's CPU mostly follows its
/// streams and ingress (already counted); it matters when pods share machines unequally.
pub const STREAMS_PER_CORE: f64 = 2.0;
/// WAL queue bytes that weigh as much as one stream (a queue means the disk is behind).
pub const WAL_QUEUE_BYTES_PER_STREAM: f64 = 4.0 * 1024.0 * 1024.0;

/// The rendezvous weight of `pod_id` for `key` (FNV-1a over key, a separator and the id,
/// then a splitmix64 finaliser): stable across routers and restarts.
pub fn rendezvous(key: &[u8], pod_id: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key.iter().chain(&[0xff]).chain(pod_id.as_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// A placement policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Two random candidates, the less loaded wins.
    PowerOfTwo,
    /// The least loaded pod.
    LeastLoaded,
    /// Each pod in turn.
    RoundRobin,
    /// A uniformly random pod.
    Random,
}

impl std::str::FromStr for Policy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "p2c" | "power-of-two" => Ok(Policy::PowerOfTwo),
            "least-loaded" => Ok(Policy::LeastLoaded),
            "round-robin" => Ok(Policy::RoundRobin),
            "random" => Ok(Policy::Random),
            other => Err(format!(
                "unknown placement policy {other:?} (p2c, least-loaded, round-robin, random)"
            )),
        }
    }
}

/// The load score of a pod: open streams, plus ingress, CPU and WAL backlog expressed in
/// stream equivalents, plus `placed_since_report` streams the caller knows are on their way.
pub fn score(load: &Load, placed_since_report: u64) -> f64 {
    (load.open_streams + placed_since_report) as f64
        + load.ingress_bytes_per_sec / BYTES_PER_SEC_PER_STREAM
        + load.cpu_cores * STREAMS_PER_CORE
        + load.wal_queue_bytes as f64 / WAL_QUEUE_BYTES_PER_STREAM
}

/// Chooses pods for new streams among the pods of the latest membership view.
pub struct Placer {
    policy: Policy,
    next: AtomicUsize,
}

impl Placer {
    /// A placer with `policy`.
    pub fn new(policy: Policy) -> Placer {
        Placer {
            policy,
            next: AtomicUsize::new(0),
        }
    }

    /// Picks one of `candidates` (already filtered to placeable pods); `placed` counts the
    /// streams placed per pod id since that pod's last report. `None` when there is none.
    pub fn choose<'a>(
        &self,
        candidates: &'a [PodRecord],
        placed: &HashMap<String, u64>,
    ) -> Option<&'a PodRecord> {
        let score_of = |p: &PodRecord| score(&p.load, placed.get(&p.id).copied().unwrap_or(0));
        match candidates.len() {
            0 => return None,
            1 => return candidates.first(),
            _ => {}
        }
        let mut rng = rand::rng();
        match self.policy {
            Policy::PowerOfTwo => {
                let a = rng.random_range(0..candidates.len());
                let mut b = rng.random_range(0..candidates.len() - 1);
                if b >= a {
                    b += 1;
                }
                let (pa, pb) = (&candidates[a], &candidates[b]);
                Some(if score_of(pb) < score_of(pa) { pb } else { pa })
            }
            Policy::LeastLoaded => candidates
                .iter()
                .min_by(|x, y| score_of(x).total_cmp(&score_of(y))),
            Policy::RoundRobin => {
                let i = self.next.fetch_add(1, Ordering::Relaxed);
                candidates.get(i % candidates.len())
            }
            Policy::Random => candidates.get(rng.random_range(0..candidates.len())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod_record::PodState;

    fn pod(id: &str, streams: u64) -> PodRecord {
        PodRecord {
            id: id.into(),
            addr: format!("http://{id}"),
            state: PodState::Ready,
            load: Load {
                open_streams: streams,
                ..Load::default()
            },
            reported_at_ms: 0,
            mqtt_addr: None,
            kafka_addr: None,
        }
    }

    #[test]
    fn power_of_two_never_picks_the_busiest_of_two() {
        let pods = vec![pod("idle", 0), pod("busy", 50)];
        let placer = Placer::new(Policy::PowerOfTwo);
        for _ in 0..100 {
            let chosen = placer.choose(&pods, &HashMap::new()).map(|p| p.id.as_str());
            assert_eq!(chosen, Some("idle"));
        }
    }

    #[test]
    fn streams_placed_since_the_report_count_in_the_score() {
        let pods = vec![pod("a", 0), pod("b", 3)];
        let placed = HashMap::from([("a".to_string(), 5u64)]);
        let placer = Placer::new(Policy::LeastLoaded);
        assert_eq!(
            placer.choose(&pods, &placed).map(|p| p.id.as_str()),
            Some("b")
        );
    }

    #[test]
    fn round_robin_visits_every_pod() {
        let pods = vec![pod("a", 0), pod("b", 0), pod("c", 0)];
        let placer = Placer::new(Policy::RoundRobin);
        let mut seen: Vec<String> = (0..3)
            .filter_map(|_| placer.choose(&pods, &HashMap::new()).map(|p| p.id.clone()))
            .collect();
        seen.sort();
        assert_eq!(seen, vec!["a", "b", "c"]);
    }

    #[test]
    fn no_candidates_means_no_choice() {
        let placer = Placer::new(Policy::PowerOfTwo);
        assert!(placer.choose(&[], &HashMap::new()).is_none());
    }
}
