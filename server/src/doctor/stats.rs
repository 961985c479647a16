//! Percentiles and units for the doctor's report.

use std::time::Duration;

/// The `p`-th percentile (0..=100) of `samples`, sorting them; zero when empty.
pub(crate) fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    samples.sort_unstable();
    let rank = ((p / 100.0) * (samples.len() - 1) as f64).round() as usize;
    samples[rank.min(samples.len() - 1)]
}

pub(crate) fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Megabytes (10⁶ bytes) per second.
pub(crate) fn mb_per_s(bytes: u64, elapsed: Duration) -> f64 {
    bytes as f64 / 1e6 / elapsed.as_secs_f64().max(1e-9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_pick_the_nearest_rank() {
        let mut v: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&mut v, 50.0), Duration::from_millis(51));
        assert_eq!(percentile(&mut v, 99.0), Duration::from_millis(99));
        assert_eq!(percentile(&mut [], 99.0), Duration::ZERO);
    }
}
