//! Single-thread throughput contests: per-thread CPU time (the machine is shared with other
//! builds, so wall time is noisy), trials of at least a minimum duration, and contenders
//! measured side by side in rounds ([`Contest`]) so that their ratios are taken within one
//! stretch of time. Used by `zeroparser-bench`.

use std::time::Duration;

use crate::stats::Samples;

/// CPU time consumed by the calling thread so far.
pub fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant libc knows.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// How long and how often to measure.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// Rounds per contest (trials per decoder); medians are reported.
    pub trials: usize,
    /// Minimum CPU time of one trial.
    pub min_trial: Duration,
}

/// One trial: repeats `pass` until `min_trial` of thread CPU time has elapsed; MB/s (10^6
/// bytes per CPU second) of `bytes_per_pass` input bytes per pass.
fn trial(min_trial: Duration, bytes_per_pass: usize, pass: &mut dyn FnMut()) -> f64 {
    let start = thread_cpu_time();
    let mut passes = 0u64;
    let elapsed = loop {
        pass();
        passes += 1;
        let elapsed = thread_cpu_time().saturating_sub(start);
        if elapsed >= min_trial {
            break elapsed;
        }
    };
    (passes as f64 * bytes_per_pass as f64) / elapsed.as_secs_f64() / 1e6
}

/// One decoder of a contest.
struct Entry<'a> {
    name: &'static str,
    bytes: usize,
    pass: Box<dyn FnMut() + 'a>,
    /// MB/s of each round's trial.
    rates: Vec<f64>,
}

/// Decoders measured against each other round by round: each round runs one trial of every
/// decoder, the order rotated from round to round. The host's speed on this machine moves
/// by up to a half within a minute; measured one decoder after the other, a ratio of two
/// decoders compared two different stretches of it (the same build read 0.53× and 1.57×
/// prost in runs a minute apart). A round's trials share one stretch, so the median of the
/// rounds' ratios ([`Contest::ratio`]) is the figure a goal is read from.
pub struct Contest<'a> {
    plan: Plan,
    entries: Vec<Entry<'a>>,
}

impl<'a> Contest<'a> {
    /// An empty contest measured by `plan`.
    pub fn new(plan: Plan) -> Contest<'a> {
        Contest {
            plan,
            entries: Vec::new(),
        }
    }

    /// Adds decoder `name`, whose `pass` processes `bytes` input bytes each call.
    pub fn add(&mut self, name: &'static str, bytes: usize, pass: impl FnMut() + 'a) {
        self.entries.push(Entry {
            name,
            bytes,
            pass: Box::new(pass),
            rates: Vec::new(),
        });
    }

    /// Runs the rounds; one untimed pass of every decoder first warms its caches.
    pub fn run(&mut self) {
        for entry in &mut self.entries {
            (entry.pass)();
        }
        let n = self.entries.len();
        for round in 0..self.plan.trials.max(1) {
            for i in 0..n {
                if let Some(entry) = self.entries.get_mut((round + i) % n) {
                    let rate = trial(self.plan.min_trial, entry.bytes, &mut entry.pass);
                    entry.rates.push(rate);
                }
            }
        }
    }

    fn rates(&self, name: &str) -> Option<&[f64]> {
        self.entries
            .iter()
            .find(|e| e.name == name)
            .map(|e| e.rates.as_slice())
    }

    /// The median MB/s of decoder `name`; 0 if it was not in the contest.
    pub fn rate(&self, name: &str) -> f64 {
        self.rates(name).map_or(0.0, |rates| {
            rates.iter().copied().collect::<Samples>().median()
        })
    }

    /// The median over the rounds of `a`'s rate over `b`'s in the same round; NaN if either
    /// was not in the contest.
    pub fn ratio(&self, a: &str, b: &str) -> f64 {
        match (self.rates(a), self.rates(b)) {
            (Some(a), Some(b)) => a
                .iter()
                .zip(b)
                .map(|(a, b)| a / b)
                .collect::<Samples>()
                .median(),
            _ => f64::NAN,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Contest, Plan};
    use std::time::Duration;

    fn contest<'a>(trials: usize, min_trial_ms: u64) -> Contest<'a> {
        Contest::new(Plan {
            trials,
            min_trial: Duration::from_millis(min_trial_ms),
        })
    }

    #[test]
    fn each_round_runs_every_decoder_once_starting_one_further_along() {
        let order = std::cell::RefCell::new(Vec::new());
        let mut contest = contest(3, 1);
        for name in ["a", "b", "c"] {
            let order = &order;
            contest.add(name, 1, move || order.borrow_mut().push(name));
        }
        contest.run();
        let rate = contest.rate("a");
        drop(contest);
        let mut order = order.into_inner();
        // One warm-up pass each, then trials of many passes: one name per trial.
        let warm: Vec<&str> = order.drain(..3).collect();
        assert_eq!(warm, ["a", "b", "c"]);
        order.dedup();
        assert_eq!(order, ["a", "b", "c", "b", "c", "a", "c", "a", "b"]);
        assert!(rate > 0.0);
    }

    #[test]
    fn a_contender_left_out_reads_zero_and_its_ratios_nan() {
        let mut contest = contest(1, 0);
        contest.add("a", 1, || {});
        contest.run();
        assert_eq!(contest.rate("absent"), 0.0);
        assert!(contest.ratio("a", "absent").is_nan());
        assert!(contest.ratio("absent", "a").is_nan());
    }

    #[test]
    fn a_ratio_is_the_median_of_the_rounds_ratios() {
        let mut contest = contest(3, 0);
        contest.add("x", 1, || {});
        contest.add("y", 1, || {});
        // The host slowed down 4x in round 2, and y had one lucky round: x is twice y in
        // two rounds of three, while the medians (180 over 100) would say 1.8.
        contest.entries[0].rates = vec![200.0, 50.0, 180.0];
        contest.entries[1].rates = vec![100.0, 25.0, 200.0];
        assert_eq!(contest.ratio("x", "y"), 2.0);
        assert_eq!(contest.rate("x"), 180.0);
        assert_eq!(contest.rate("y"), 100.0);
    }
}
