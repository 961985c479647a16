//! Progress and a summary line for the CLI's long operations (`table optimize`, `table
//! vacuum`, `pod drain`), on stderr so stdout keeps the command's result. On a terminal one
//! line is redrawn in place (a spinner, the message, the seconds elapsed); otherwise (a
//! pipe, a log) plain lines: one when the message changes, at most one per
//! [`PLAIN_EVERY`] while it stays. The summary ends with the time taken.

use std::future::Future;
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// How often a plain (non-terminal) progress line repeats an unchanged message.
pub const PLAIN_EVERY: Duration = Duration::from_secs(5);
/// How often a call that reports nothing is shown as still running.
const TICK: Duration = Duration::from_millis(200);
const SPINNER: [char; 4] = ['|', '/', '-', '\\'];

/// One operation's progress on stderr.
pub struct Progress {
    started: Instant,
    tty: bool,
    ticks: usize,
    last_plain: Option<(Instant, String)>,
}

impl Progress {
    /// Starts showing progress (a terminal gets the in-place line).
    pub fn start() -> Progress {
        Progress {
            started: Instant::now(),
            tty: std::io::stderr().is_terminal(),
            ticks: 0,
            last_plain: None,
        }
    }

    /// Shows `message` as the current state.
    pub fn update(&mut self, message: &str) {
        let secs = self.started.elapsed().as_secs_f64();
        let mut err = std::io::stderr().lock();
        if self.tty {
            self.ticks += 1;
            let spin = SPINNER[self.ticks % SPINNER.len()];
            let _ = write!(err, "\r\x1b[2K{spin} {message} ({secs:.0} s)");
            let _ = err.flush();
            return;
        }
        let due = match &self.last_plain {
            Some((at, last)) => last != message || at.elapsed() >= PLAIN_EVERY,
            None => true,
        };
        if due {
            let _ = writeln!(err, "… {message} ({secs:.0} s)");
            self.last_plain = Some((Instant::now(), message.to_string()));
        }
    }

    /// Ends the progress with `summary` and the time taken.
    pub fn finish(self, summary: &str) {
        let mut err = std::io::stderr().lock();
        if self.tty {
            let _ = write!(err, "\r\x1b[2K");
        }
        let _ = writeln!(err, "{}", with_time(summary, self.started.elapsed()));
    }

    /// Awaits `call`, which reports nothing while it runs, showing `message` meanwhile.
    pub async fn during<F: Future>(&mut self, message: &str, call: F) -> F::Output {
        tokio::pin!(call);
        let mut ticker = tokio::time::interval(TICK);
        loop {
            tokio::select! {
                out = &mut call => return out,
                _ = ticker.tick() => self.update(message),
            }
        }
    }
}

/// `summary` with the time taken appended.
pub fn with_time(summary: &str, took: Duration) -> String {
    format!("{summary} in {:.1} s", took.as_secs_f64())
}

/// Bytes as kB (below a megabyte) or MB, with one decimal.
pub fn mb(bytes: f64) -> String {
    if bytes < 1e6 {
        format!("{:.1} kB", bytes / 1e3)
    } else {
        format!("{:.1} MB", bytes / 1e6)
    }
}

/// The summary of `sluice table optimize` from the pod's report.
pub fn optimize_summary(table: &str, report: &serde_json::Value) -> String {
    let c = &report["compaction"];
    let n = |k: &str| c[k].as_i64().unwrap_or(0);
    let checkpoint = report["checkpoint"]
        .as_u64()
        .map_or("no checkpoint due".to_string(), |v| {
            format!("checkpoint at version {v}")
        });
    if c["gave_up"].as_bool() == Some(true) {
        return format!(
            "optimized {table}: gave up, a concurrent commit removed one of its files first \
             (nothing committed; the next round retries); {checkpoint}"
        );
    }
    if n("files_removed") == 0 {
        return format!(
            "optimized {table}: nothing to compact (fewer than 2 small files); {checkpoint}"
        );
    }
    format!(
        "optimized {table}: {} small files ({}) rewritten into {} ({}), commit version {}; {checkpoint}",
        n("files_removed"),
        mb(n("bytes_removed") as f64),
        n("files_added"),
        mb(n("bytes_added") as f64),
        c["version"].as_u64().map_or("?".into(), |v| v.to_string()),
    )
}

/// The summary of `sluice table vacuum` from the pod's report.
pub fn vacuum_summary(table: &str, report: &serde_json::Value) -> String {
    format!(
        "vacuumed {table}: {} removed data files deleted",
        report["files_deleted"].as_u64().unwrap_or(0)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn summaries_say_what_was_done() {
        let report = json!({"compaction": {"files_removed": 12, "files_added": 1, "bytes_removed": 2_400_000,
            "bytes_added": 2_000_000, "version": 14, "gave_up": false}, "checkpoint": 15});
        assert_eq!(
            optimize_summary("main.s.t", &report),
            "optimized main.s.t: 12 small files (2.4 MB) rewritten into 1 (2.0 MB), commit version 14; checkpoint at version 15"
        );
        let nothing =
            json!({"compaction": {"files_removed": 0, "gave_up": false}, "checkpoint": null});
        assert_eq!(
            optimize_summary("t", &nothing),
            "optimized t: nothing to compact (fewer than 2 small files); no checkpoint due"
        );
        let lost = json!({"compaction": {"files_removed": 0, "gave_up": true}, "checkpoint": null});
        assert!(optimize_summary("t", &lost).contains("gave up"));
        assert_eq!(
            vacuum_summary("t", &json!({"files_deleted": 3})),
            "vacuumed t: 3 removed data files deleted"
        );
        assert_eq!(
            with_time("done", Duration::from_millis(1234)),
            "done in 1.2 s"
        );
    }
}
