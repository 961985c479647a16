//! Order statistics of measured samples.

use std::time::Duration;

/// Samples of one quantity, sorted on demand.
#[derive(Default, Clone, Debug)]
pub struct Samples {
    values: Vec<f64>,
    sorted: bool,
}

impl Samples {
    /// No samples yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one sample.
    pub fn push(&mut self, v: f64) {
        self.values.push(v);
        self.sorted = false;
    }

    /// Adds one duration in milliseconds.
    pub fn push_ms(&mut self, d: Duration) {
        self.push(d.as_secs_f64() * 1000.0);
    }

    /// Adds all samples of another set.
    pub fn extend(&mut self, other: &Samples) {
        self.values.extend_from_slice(&other.values);
        self.sorted = false;
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The `q` quantile (0..=1) by nearest rank; NaN when empty.
    pub fn quantile(&mut self, q: f64) -> f64 {
        if self.values.is_empty() {
            return f64::NAN;
        }
        if !self.sorted {
            self.values.sort_by(|a, b| a.total_cmp(b));
            self.sorted = true;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.values.len() as f64).ceil() as usize).max(1);
        self.values[rank - 1]
    }

    /// The median.
    pub fn median(&mut self) -> f64 {
        self.quantile(0.5)
    }
}

impl FromIterator<f64> for Samples {
    fn from_iter<I: IntoIterator<Item = f64>>(values: I) -> Self {
        Samples {
            values: values.into_iter().collect(),
            sorted: false,
        }
    }
}

/// A stretch of time in which latency samples stayed over a threshold: what sets a tail
/// when many requests wait on one stall of the server.
#[derive(Clone, Debug, PartialEq)]
pub struct Episode {
    /// Send time of its first sample over the threshold, s from the run's start.
    pub from_s: f64,
    /// Send time of its last one.
    pub to_s: f64,
    /// Samples over the threshold in it.
    pub samples: usize,
    /// Its largest sample, ms.
    pub max_ms: f64,
}

/// Groups the samples of `timeline` (send time s, latency ms) over `threshold_ms` into
/// episodes: a sample sent within `gap_s` of the episode's last one joins it. Largest first
/// (by samples).
pub fn episodes(timeline: &[(f64, f64)], threshold_ms: f64, gap_s: f64) -> Vec<Episode> {
    let mut over: Vec<(f64, f64)> = timeline
        .iter()
        .copied()
        .filter(|&(_, ms)| ms > threshold_ms)
        .collect();
    over.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out: Vec<Episode> = Vec::new();
    for (at, ms) in over {
        match out.last_mut() {
            Some(e) if at - e.to_s < gap_s => {
                e.to_s = at;
                e.samples += 1;
                e.max_ms = e.max_ms.max(ms);
            }
            _ => out.push(Episode {
                from_s: at,
                to_s: at,
                samples: 1,
                max_ms: ms,
            }),
        }
    }
    out.sort_by_key(|e| std::cmp::Reverse(e.samples));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_use_nearest_rank() {
        let mut s = Samples::new();
        for v in [5.0, 1.0, 4.0, 2.0, 3.0] {
            s.push(v);
        }
        assert_eq!(s.median(), 3.0);
        assert_eq!(s.quantile(0.99), 5.0);
        assert_eq!(s.quantile(0.0), 1.0);
        assert!(Samples::new().median().is_nan());
        let mut collected: Samples = [3.0, 1.0, 2.0].into_iter().collect();
        assert_eq!(collected.median(), 2.0);
        assert!(std::iter::empty().collect::<Samples>().median().is_nan());
    }

    #[test]
    fn episodes_group_samples_over_the_threshold_by_send_time() {
        let timeline = [
            (0.10, 5.0),
            (1.00, 30.0),
            (1.02, 40.0),
            (1.06, 25.0),
            (1.20, 2.0),
            (3.00, 50.0),
            (1.04, 35.0),
        ];
        let found = episodes(&timeline, 20.0, 0.05);
        assert_eq!(
            found,
            vec![
                Episode {
                    from_s: 1.00,
                    to_s: 1.06,
                    samples: 4,
                    max_ms: 40.0
                },
                Episode {
                    from_s: 3.00,
                    to_s: 3.00,
                    samples: 1,
                    max_ms: 50.0
                },
            ]
        );
        assert!(episodes(&timeline, 60.0, 0.05).is_empty());
    }
}
