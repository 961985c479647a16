//! How early a table's flush starts so that its oldest row is visible in Delta about one
//! `--flush-interval` after its append.
//!
//! A flush takes time: the Parquet encoding, the hand-off and the commit (the committer's
//! interval included). Started when the oldest row is one flush interval old, its rows
//! become visible an interval *plus* that time after their append — measured 1.9 s p99 at
//! `--flush-interval 1s`. So the flush loop starts a flush that much earlier: when the oldest
//! row is `interval - lead` old, where `lead` is the longest of the table's last few flushes
//! of new rows that committed (memtable taken → commit answered; a failed flush and the
//! resend of its hand-off are not counted). A slow store makes flushes start earlier, never more
//! than half an interval (at most twice as many, smaller files).
//!
//! Tried and not kept: a tenth of the interval added to the lead, as a margin. The pod's own
//! freshness p99 at half rate fell by about 0.1 s, but the producers' end-to-end p99 did not
//! move beyond the runs' spread, and 100-column rows paid for the smaller flushes with more
//! CPU (README, "A freshness margin tried").

use std::time::Duration;

/// Flushes remembered.
const REMEMBERED: usize = 4;

/// The durations of a table's last few successful flushes.
#[derive(Debug, Default)]
pub struct FlushLead {
    recent: [Duration; REMEMBERED],
    next: usize,
}

impl FlushLead {
    /// Notes a successful flush that took `took` from taking the memtable to the commit's answer.
    pub fn record(&mut self, took: Duration) {
        self.recent[self.next] = took;
        self.next = (self.next + 1) % REMEMBERED;
    }

    /// How long before `interval` a flush starts: the longest remembered flush, at most half
    /// of `interval` (zero before any flush).
    pub fn lead(&self, interval: Duration) -> Duration {
        let longest = self.recent.iter().max().copied().unwrap_or_default();
        longest.min(interval / 2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn no_flush_yet_means_no_lead() {
        assert_eq!(FlushLead::default().lead(SECOND), Duration::ZERO);
    }

    #[test]
    fn the_lead_is_the_longest_of_the_last_four_flushes() {
        let mut lead = FlushLead::default();
        for ms in [120, 300, 90, 150] {
            lead.record(Duration::from_millis(ms));
        }
        assert_eq!(lead.lead(SECOND), Duration::from_millis(300));
        // The fifth and sixth flushes push out the 120 and 300 ms ones, the next two 90 and 150.
        for ms in [80, 70] {
            lead.record(Duration::from_millis(ms));
        }
        assert_eq!(lead.lead(SECOND), Duration::from_millis(150));
        lead.record(Duration::from_millis(60));
        lead.record(Duration::from_millis(50));
        assert_eq!(lead.lead(SECOND), Duration::from_millis(80));
    }

    #[test]
    fn a_slow_store_starts_flushes_at_most_half_an_interval_early() {
        let mut lead = FlushLead::default();
        lead.record(Duration::from_secs(3));
        assert_eq!(lead.lead(SECOND), Duration::from_millis(500));
        assert_eq!(lead.lead(Duration::from_secs(10)), Duration::from_secs(3));
    }
}
