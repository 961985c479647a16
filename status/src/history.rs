//! The last 15 minutes of snapshots, one every [`SAMPLE_EVERY`] (the server and the router
//! each run a sampler that pushes here), and what they give the page: rates of counters
//! between a past snapshot and now, the charts' series, and counts over the window.
//! Times are Unix seconds passed in by the caller, so the arithmetic is testable.

use std::collections::VecDeque;
use std::time::Duration;

use crate::snapshot::{ClusterSnapshot, PodSnapshot};

/// How often a sampler takes a snapshot.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(5);
/// How far back the ring reaches.
pub const WINDOW: Duration = Duration::from_secs(15 * 60);
/// A rate needs two snapshots at least this far apart (seconds).
const MIN_RATE_SPAN: f64 = 1.0;

/// A ring of `(unix seconds, snapshot)`, oldest first.
#[derive(Debug, Default)]
pub struct History {
    points: VecDeque<(f64, ClusterSnapshot)>,
}

/// The increase of a counter from `before` to `after` over `secs`, per second; a counter
/// that went down (its pod restarted) counts from zero.
pub fn rate(before: f64, after: f64, secs: f64) -> f64 {
    let delta = if after >= before {
        after - before
    } else {
        after
    };
    delta / secs.max(MIN_RATE_SPAN)
}

impl History {
    /// Adds the snapshot taken at `at`; forgets those older than [`WINDOW`] before it.
    pub fn push(&mut self, at: f64, snapshot: ClusterSnapshot) {
        self.points.push_back((at, snapshot));
        while self
            .points
            .front()
            .is_some_and(|(t, _)| *t < at - WINDOW.as_secs_f64())
        {
            self.points.pop_front();
        }
    }

    /// Snapshots held.
    pub fn len(&self) -> usize {
        self.points.len()
    }

    /// Whether no snapshot is held.
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// The newest snapshot at least a second older than `now`: the base of "now" rates.
    pub fn baseline(&self, now: f64) -> Option<&(f64, ClusterSnapshot)> {
        self.points
            .iter()
            .rev()
            .find(|(t, _)| *t <= now - MIN_RATE_SPAN)
    }

    /// The oldest snapshot held.
    pub fn oldest(&self) -> Option<&(f64, ClusterSnapshot)> {
        self.points.front()
    }

    /// `counter` of pod `id` per second between the baseline and `current` (None without a
    /// baseline, or when the pod is in only one of them or lacks the counter).
    pub fn pod_rate(
        &self,
        now: f64,
        current: &PodSnapshot,
        counter: impl Fn(&PodSnapshot) -> Option<f64>,
    ) -> Option<f64> {
        let (t, base) = self.baseline(now)?;
        let before = base.seen().find(|p| p.id == current.id)?;
        Some(rate(counter(before)?, counter(current)?, now - t))
    }

    /// `counter` summed over the cluster per second between the baseline and `current`.
    pub fn cluster_rate(
        &self,
        now: f64,
        current: &ClusterSnapshot,
        counter: impl Fn(&ClusterSnapshot) -> f64,
    ) -> Option<f64> {
        let (t, base) = self.baseline(now)?;
        Some(rate(counter(base), counter(current), now - t))
    }

    /// A level over time: `(unix seconds, value)` per snapshot.
    pub fn series(&self, level: impl Fn(&ClusterSnapshot) -> f64) -> Vec<(f64, f64)> {
        self.points.iter().map(|(t, s)| (*t, level(s))).collect()
    }

    /// A counter's rate over time: one point per pair of neighbouring snapshots, at the
    /// later one's time.
    pub fn rate_series(&self, counter: impl Fn(&ClusterSnapshot) -> f64) -> Vec<(f64, f64)> {
        let values: Vec<(f64, f64)> = self.series(counter);
        values
            .windows(2)
            .map(|w| (w[1].0, rate(w[0].1, w[1].1, w[1].0 - w[0].0)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::PodView;

    fn snap(id: &str, bytes: f64) -> ClusterSnapshot {
        ClusterSnapshot {
            pods: vec![PodView::Seen(PodSnapshot {
                id: id.into(),
                ingress_bytes_total: bytes,
                ..PodSnapshot::default()
            })],
        }
    }

    #[test]
    fn rates_come_from_the_newest_snapshot_a_second_old() {
        let mut h = History::default();
        let current = snap("p", 3000.0);
        assert_eq!(
            h.cluster_rate(100.0, &current, |c| c.total(|p| p.ingress_bytes_total)),
            None
        );
        h.push(90.0, snap("p", 0.0));
        h.push(95.0, snap("p", 1000.0));
        h.push(99.5, snap("p", 2900.0)); // too recent to be the base at 100
        let pod = match &current.pods[0] {
            PodView::Seen(p) => p.clone(),
            PodView::Unreachable { .. } => unreachable!(),
        };
        assert_eq!(
            h.pod_rate(100.0, &pod, |p| Some(p.ingress_bytes_total)),
            Some(400.0)
        );
        let other = PodSnapshot {
            id: "q".into(),
            ..pod
        };
        assert_eq!(
            h.pod_rate(100.0, &other, |p| Some(p.ingress_bytes_total)),
            None
        );
        assert_eq!(
            h.rate_series(|c| c.total(|p| p.ingress_bytes_total)),
            vec![(95.0, 200.0), (99.5, 1900.0 / 4.5)]
        );
        assert_eq!(
            rate(500.0, 100.0, 10.0),
            10.0,
            "a restarted pod counts from zero"
        );
    }

    #[test]
    fn the_ring_keeps_fifteen_minutes() {
        let mut h = History::default();
        for i in 0..400 {
            h.push(f64::from(i) * 5.0, snap("p", 0.0));
        }
        assert_eq!(h.len(), 181);
        assert_eq!(h.oldest().map(|(t, _)| *t), Some(1995.0 - 900.0));
    }
}
