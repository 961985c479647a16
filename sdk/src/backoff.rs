//! Reconnect delays: exponential backoff with full jitter, reset after a healthy
//! connection.

use std::time::Duration;

use rand::Rng;

/// Exponential backoff: attempt `n` waits a uniformly random time in
/// `[base·2ⁿ/2, base·2ⁿ]`, capped at `max` ("equal jitter": never zero, so a fleet
/// reconnecting after a pod restart spreads out without hammering it).
#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    attempt: u32,
}

impl Backoff {
    /// Starts at `base`, never waits more than `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Backoff {
            base,
            max,
            attempt: 0,
        }
    }

    /// The next delay.
    pub fn next_delay(&mut self) -> Duration {
        let exp = self
            .base
            .saturating_mul(1u32 << self.attempt.min(20))
            .min(self.max);
        self.attempt = self.attempt.saturating_add(1);
        let half = exp / 2;
        let jitter = rand::rng().random_range(0..=half.as_micros().max(1) as u64);
        half + Duration::from_micros(jitter)
    }

    /// After a connection that worked: the next failure waits `base` again.
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_within_jitter_bounds_and_stop_at_the_cap() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
        let bounds = [100u64, 200, 400, 800, 1000, 1000];
        for max in bounds {
            let d = b.next_delay();
            assert!(d >= Duration::from_millis(max / 2), "{d:?} < {max}/2");
            assert!(
                d <= Duration::from_millis(max) + Duration::from_micros(1),
                "{d:?}"
            );
        }
        b.reset();
        assert!(b.next_delay() <= Duration::from_millis(100) + Duration::from_micros(1));
    }
}
