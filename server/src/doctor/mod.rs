//! `sluice doctor`: checks that this machine can keep Sluice's promises before it takes
//! traffic, the way log-broker operators check disks before production.
//!
//! | check | how | pass | warn | fail |
//! |---|---|---|---|---|
//! | data dir modes | modes of the data dir, its `wal` folder and the files in them | owner only | group may access | others may access |
//! | WAL fdatasync latency | 2300-byte writes each followed by `fdatasync`, ~22 MB (fio `--bs=2300 --fdatasync=1`) | p99 < 10 ms | < 20 ms | ≥ 20 ms |
//! | WAL fdatasync IOPS | same run: writes per second | > 500 | > 250 | ≤ 250 |
//! | WAL sequential write | 1 MiB writes, one `fdatasync` at the end | ≥ 100 MB/s | ≥ 30 MB/s | below |
//! | WAL free space | `statvfs` of the WAL directory | ≥ 4 GiB | ≥ 1 GiB | below |
//! | WAL O_DIRECT writes | a probe file opened `O_DIRECT`, one unaligned 2300-byte record staged and synced | taken | refused (segments buffered) | error |
//! | warehouse reachable | one listing of the probe prefix (endpoint, bucket, credentials), ≤ 15 s | answers | | error or no answer (no other warehouse probe runs) |
//! | warehouse PUT / GET | 16 MiB objects through `object_store` | ≥ 100 MB/s | ≥ 20 MB/s | below |
//! | warehouse put-if-absent | small `PutMode::Create` PUTs; a second one must be refused | p99 < 50 ms | < 200 ms | slower, or not refused |
//!
//! The fdatasync thresholds are the ones ARCHITECTURE.md states (an ack waits for one
//! fdatasync, so its p99 bounds the ack latency); the warn band is twice as loose; the
//! others are Sluice's own floor for a pod worth running. Every probe writes only below
//! `{wal dir}/.doctor-*` and `{warehouse}/_sluice_doctor/` and removes what it wrote.
//! The warehouse is a local folder or `s3://bucket/prefix`, reached with the same S3
//! settings (`--s3-*` flags, `AWS_*` variables) as `sluice serve`.
//! `--quick` shrinks every probe (for tests and smoke checks); its figures are noisier.

mod file_modes;
mod stats;
mod store_error;
mod wal_disk;
mod warehouse;

use std::fmt::Write as _;
use std::path::PathBuf;

/// What to check and how hard.
#[derive(Clone, Debug)]
pub struct DoctorOptions {
    /// The pod's data directory; the WAL directory is `{data_dir}/wal`.
    pub data_dir: PathBuf,
    /// `--warehouse` as `sluice serve` takes it. Default: `{data_dir}/warehouse`.
    pub warehouse: Option<String>,
    /// S3 settings of an `s3://` warehouse, as `sluice serve` takes them. Default: none
    /// (the `AWS_*` environment).
    pub s3: crate::warehouse::S3Settings,
    /// Bytes written by the fdatasync probe. Default: 22 MB.
    pub fsync_bytes: u64,
    /// Bytes written by the bandwidth probe. Default: 256 MiB.
    pub bandwidth_bytes: u64,
    /// 16 MiB objects PUT and then GET. Default: 4.
    pub objects: usize,
    /// Small conditional PUTs. Default: 100.
    pub conditional_puts: usize,
}

impl DoctorOptions {
    /// Full-size probes.
    pub fn new(data_dir: PathBuf, warehouse: Option<String>) -> Self {
        DoctorOptions {
            data_dir,
            warehouse,
            s3: crate::warehouse::S3Settings::default(),
            fsync_bytes: 22_000_000,
            bandwidth_bytes: 256 << 20,
            objects: 4,
            conditional_puts: 100,
        }
    }

    /// Small probes: seconds instead of tens of seconds.
    pub fn quick(mut self) -> Self {
        self.fsync_bytes = 2_300_000;
        self.bandwidth_bytes = 32 << 20;
        self.objects = 1;
        self.conditional_puts = 20;
        self
    }
}

/// Outcome of one check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Within the healthy range.
    Pass,
    /// Works, but outside the healthy range (shown as `WARN`).
    Warn,
    /// Broken or far outside the range (shown as `FAIL`; exit code 1).
    Fail,
}

impl Verdict {
    fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Warn => "WARN",
            Verdict::Fail => "FAIL",
        }
    }

    /// Pass below `pass`, warn below `warn`, else fail (for latencies).
    fn at_most(value: f64, pass: f64, warn: f64) -> Verdict {
        if value < pass {
            Verdict::Pass
        } else if value < warn {
            Verdict::Warn
        } else {
            Verdict::Fail
        }
    }

    /// Pass above `pass`, warn above `warn`, else fail (for rates).
    fn at_least(value: f64, pass: f64, warn: f64) -> Verdict {
        if value >= pass {
            Verdict::Pass
        } else if value >= warn {
            Verdict::Warn
        } else {
            Verdict::Fail
        }
    }
}

/// One row of the report.
#[derive(Clone, Debug)]
pub struct Check {
    /// What was checked, e.g. `fdatasync p99`.
    pub name: String,
    /// What was measured, with its unit.
    pub measured: String,
    /// The healthy range.
    pub expected: String,
    /// How the measurement compares with the range.
    pub verdict: Verdict,
}

impl Check {
    fn new(name: &str, measured: String, expected: &str, verdict: Verdict) -> Self {
        Check {
            name: name.into(),
            measured,
            expected: expected.into(),
            verdict,
        }
    }

    /// A probe that could not run at all.
    fn error(name: &str, error: impl std::fmt::Display) -> Self {
        Check::new(name, format!("error: {error}"), "runs", Verdict::Fail)
    }
}

/// Every check, in the order they ran.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// The rows, in the order they ran.
    pub checks: Vec<Check>,
}

impl Report {
    /// Whether any check failed (the command then exits non-zero).
    pub fn failed(&self) -> bool {
        self.checks.iter().any(|c| c.verdict == Verdict::Fail)
    }

    /// The report as an aligned text table.
    pub fn render(&self) -> String {
        let header = ["check", "measured", "healthy", "result"];
        let rows: Vec<[&str; 4]> = self
            .checks
            .iter()
            .map(|c| [&*c.name, &*c.measured, &*c.expected, c.verdict.as_str()])
            .collect();
        let mut widths = header.map(str::len);
        for row in &rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let mut out = String::new();
        let mut line = |cells: [&str; 4]| {
            let mut text = String::new();
            for (cell, w) in cells.iter().zip(widths) {
                let _ = write!(text, "{cell:<w$}  ");
            }
            out.push_str(text.trim_end());
            out.push('\n');
        };
        line(header);
        line(widths.map(|w| {
            &"----------------------------------------------------------------"[..w.min(64)]
        }));
        for row in rows {
            line(row);
        }
        let (pass, warn, fail) =
            self.checks
                .iter()
                .fold((0, 0, 0), |(p, w, f), c| match c.verdict {
                    Verdict::Pass => (p + 1, w, f),
                    Verdict::Warn => (p, w + 1, f),
                    Verdict::Fail => (p, w, f + 1),
                });
        let _ = writeln!(out, "\n{pass} passed, {warn} warnings, {fail} failed");
        out
    }
}

/// Runs every check. Never fails as a whole: a probe that cannot run is a failed check.
pub async fn run(opts: &DoctorOptions) -> Report {
    let mut report = Report::default();
    report.checks.push(file_modes::check(&opts.data_dir));
    let wal_dir = opts.data_dir.join(crate::data_dir::WAL_DIR);
    let disk_opts = opts.clone();
    match tokio::task::spawn_blocking(move || wal_disk::checks(&wal_dir, &disk_opts)).await {
        Ok(checks) => report.checks.extend(checks),
        Err(e) => report.checks.push(Check::error("WAL disk", e)),
    }
    report.checks.extend(warehouse::checks(opts).await);
    report
}
