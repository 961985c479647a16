//! Pacing of failed client-secret checks at the token endpoint, per client id, so secrets
//! cannot be guessed at line rate: the first [`FREE_FAILURES`] failures in a row cost
//! nothing; each further one makes the client id wait 1 s, 2 s, 4 s … up to [`MAX_DELAY`]
//! before its next attempt is even checked (the endpoint answers 429 with `Retry-After`
//! meanwhile, to right and wrong secrets alike). A success clears the count.
//!
//! Unknown client ids are paced like known ones (answers must not tell which exist). The
//! table is bounded: stale entries are dropped when it fills, and while it is still full
//! new client ids share one entry, so flooding it with made-up ids paces those ids together
//! instead of freeing them.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Failures in a row that cost nothing (typos, a rotated secret in a config).
pub const FREE_FAILURES: u32 = 5;
/// The longest wait between attempts.
pub const MAX_DELAY: Duration = Duration::from_secs(60);
/// Client ids tracked at most.
const MAX_TRACKED: usize = 65_536;
/// An entry whose last failure is older than this (and whose wait is over) is forgotten.
const FORGET_AFTER: Duration = Duration::from_secs(900);
/// The shared entry of new client ids while the table is full.
const OVERFLOW: &str = "\0overflow";

#[derive(Clone, Copy)]
struct Entry {
    failures: u32,
    blocked_until: Instant,
    last_failure: Instant,
}

/// Failed-attempt counts per client id.
#[derive(Default)]
pub struct FailurePacer {
    entries: Mutex<HashMap<String, Entry>>,
}

impl FailurePacer {
    /// `Err(wait)` while `client_id` must wait before its next attempt.
    pub fn check(&self, client_id: &str) -> Result<(), Duration> {
        self.check_at(client_id, Instant::now())
    }

    /// Counts a failed attempt of `client_id`.
    pub fn failed(&self, client_id: &str) {
        self.failed_at(client_id, Instant::now());
    }

    /// Clears the count of `client_id` after a successful attempt.
    pub fn succeeded(&self, client_id: &str) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.remove(client_id);
        }
    }

    fn check_at(&self, client_id: &str, now: Instant) -> Result<(), Duration> {
        let Ok(entries) = self.entries.lock() else {
            return Ok(());
        };
        let entry = entries
            .get(client_id)
            .or_else(|| (entries.len() >= MAX_TRACKED).then(|| entries.get(OVERFLOW))?);
        match entry {
            Some(e) if e.blocked_until > now => Err(e.blocked_until - now),
            _ => Ok(()),
        }
    }

    fn failed_at(&self, client_id: &str, now: Instant) {
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        if !entries.contains_key(client_id) && entries.len() >= MAX_TRACKED {
            entries.retain(|_, e| {
                e.blocked_until > now || now.duration_since(e.last_failure) < FORGET_AFTER
            });
        }
        let key = if entries.contains_key(client_id) || entries.len() < MAX_TRACKED {
            client_id
        } else {
            OVERFLOW
        };
        let entry = entries.entry(key.to_string()).or_insert(Entry {
            failures: 0,
            blocked_until: now,
            last_failure: now,
        });
        entry.failures = entry.failures.saturating_add(1);
        entry.last_failure = now;
        if entry.failures > FREE_FAILURES {
            let doublings = (entry.failures - FREE_FAILURES - 1).min(16);
            let delay = Duration::from_secs(1u64 << doublings).min(MAX_DELAY);
            entry.blocked_until = now + delay;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_beyond_the_free_ones_double_the_wait_and_a_success_clears_it() {
        let pacer = FailurePacer::default();
        let t0 = Instant::now();
        for _ in 0..FREE_FAILURES {
            assert!(pacer.check_at("p", t0).is_ok());
            pacer.failed_at("p", t0);
        }
        assert!(
            pacer.check_at("p", t0).is_ok(),
            "the free failures cost nothing"
        );
        pacer.failed_at("p", t0);
        assert_eq!(pacer.check_at("p", t0), Err(Duration::from_secs(1)));
        assert!(
            pacer.check_at("other", t0).is_ok(),
            "other client ids are not paced"
        );
        let t1 = t0 + Duration::from_secs(1);
        assert!(pacer.check_at("p", t1).is_ok());
        pacer.failed_at("p", t1);
        assert_eq!(pacer.check_at("p", t1), Err(Duration::from_secs(2)));
        for _ in 0..20 {
            pacer.failed_at("p", t1);
        }
        assert_eq!(pacer.check_at("p", t1), Err(MAX_DELAY));
        pacer.succeeded("p");
        assert!(pacer.check_at("p", t1).is_ok());
    }

    #[test]
    fn a_full_table_paces_new_client_ids_together() {
        let pacer = FailurePacer::default();
        let now = Instant::now();
        for i in 0..MAX_TRACKED {
            pacer.failed_at(&format!("made-up-{i}"), now);
        }
        for _ in 0..=FREE_FAILURES {
            pacer.failed_at("new", now);
        }
        assert!(
            pacer.check_at("another-new", now).is_err(),
            "shared overflow entry"
        );
        assert!(pacer.check_at("made-up-1", now).is_ok(), "one failure each");
    }
}
