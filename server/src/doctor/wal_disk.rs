//! The WAL directory's probes: fdatasync latency and IOPS (fio's log-disk recipe),
//! sequential bandwidth, free space, whether `O_DIRECT` writes are taken. Blocking; run on
//! a blocking thread.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use super::stats::{mb_per_s, millis, percentile};
use super::{Check, DoctorOptions, Verdict};

/// Size of each write of the fdatasync probe (the seed recipe's `--bs=2300`).
const RECORD_BYTES: usize = 2300;
/// Size of each write of the bandwidth probe.
const BLOCK_BYTES: usize = 1 << 20;

pub(super) fn checks(dir: &Path, opts: &DoctorOptions) -> Vec<Check> {
    let mut checks = Vec::new();
    if let Err(e) = crate::data_dir::create_private_dir(dir) {
        checks.push(Check::error("WAL directory", e));
        return checks;
    }
    checks.push(free_space(dir));
    checks.push(direct_io(dir));
    match fsync_probe(dir, opts.fsync_bytes) {
        Ok((mut syncs, elapsed)) => {
            let iops = syncs.len() as f64 / elapsed.as_secs_f64().max(1e-9);
            let p50 = millis(percentile(&mut syncs, 50.0));
            let p99 = millis(percentile(&mut syncs, 99.0));
            checks.push(Check::new(
                "WAL fdatasync p99 (2300 B writes)",
                format!("{p99:.2} ms (p50 {p50:.2} ms)"),
                "< 10 ms",
                Verdict::at_most(p99, 10.0, 20.0),
            ));
            checks.push(Check::new(
                "WAL fdatasync IOPS",
                format!("{iops:.0} /s ({} writes)", syncs.len()),
                "> 500 /s",
                if iops > 500.0 {
                    Verdict::Pass
                } else if iops > 250.0 {
                    Verdict::Warn
                } else {
                    Verdict::Fail
                },
            ));
        }
        Err(e) => checks.push(Check::error("WAL fdatasync", e)),
    }
    match bandwidth_probe(dir, opts.bandwidth_bytes) {
        Ok(mbps) => checks.push(Check::new(
            "WAL sequential write",
            format!("{mbps:.0} MB/s"),
            ">= 100 MB/s",
            Verdict::at_least(mbps, 100.0, 30.0),
        )),
        Err(e) => checks.push(Check::error("WAL sequential write", e)),
    }
    checks
}

/// A probe file that removes itself.
struct ProbeFile {
    file: File,
    path: std::path::PathBuf,
}

impl ProbeFile {
    fn create(dir: &Path, what: &str) -> std::io::Result<Self> {
        let path = dir.join(format!(".doctor-{what}-{}", std::process::id()));
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)?;
        Ok(ProbeFile { file, path })
    }
}

impl Drop for ProbeFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Latency of every `fdatasync` after a 2300-byte write, and the run's duration.
fn fsync_probe(dir: &Path, bytes: u64) -> std::io::Result<(Vec<Duration>, Duration)> {
    let mut probe = ProbeFile::create(dir, "fsync")?;
    let record = [0x5au8; RECORD_BYTES];
    let writes = (bytes / RECORD_BYTES as u64).max(1);
    let mut syncs = Vec::with_capacity(writes as usize);
    let started = Instant::now();
    for _ in 0..writes {
        probe.file.write_all(&record)?;
        let t = Instant::now();
        probe.file.sync_data()?;
        syncs.push(t.elapsed());
    }
    Ok((syncs, started.elapsed()))
}

/// MB/s of 1 MiB writes plus one final `fdatasync`.
fn bandwidth_probe(dir: &Path, bytes: u64) -> std::io::Result<f64> {
    let mut probe = ProbeFile::create(dir, "bandwidth")?;
    let block = vec![0xa5u8; BLOCK_BYTES];
    let blocks = (bytes / BLOCK_BYTES as u64).max(1);
    let started = Instant::now();
    for _ in 0..blocks {
        probe.file.write_all(&block)?;
    }
    probe.file.sync_data()?;
    Ok(mb_per_s(blocks * BLOCK_BYTES as u64, started.elapsed()))
}

/// Whether the WAL's segments here are written `O_DIRECT` (`--wal-direct-io`, the default):
/// where the file system refuses the flag they are buffered, which costs the pod more CPU.
fn direct_io(dir: &Path) -> Check {
    match sluice_wal::env::DirectFileSystem::probe(dir) {
        Ok(true) => Check::new(
            "WAL O_DIRECT writes",
            "taken".into(),
            "taken",
            Verdict::Pass,
        ),
        Ok(false) => Check::new(
            "WAL O_DIRECT writes",
            "refused: segments are buffered".into(),
            "taken",
            Verdict::Warn,
        ),
        Err(e) => Check::error("WAL O_DIRECT writes", e),
    }
}

fn free_space(dir: &Path) -> Check {
    const GIB: f64 = (1u64 << 30) as f64;
    match available_bytes(dir) {
        Ok(avail) => {
            let gib = avail as f64 / GIB;
            Check::new(
                "WAL free space",
                format!("{gib:.1} GiB"),
                ">= 4 GiB",
                Verdict::at_least(gib, 4.0, 1.0),
            )
        }
        Err(e) => Check::error("WAL free space", e),
    }
}

/// Bytes an unprivileged writer may still use on the file system holding `dir`.
#[cfg(unix)]
fn available_bytes(dir: &Path) -> std::io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    // SAFETY: statvfs only writes into the zeroed struct we pass; the path is a valid
    // NUL-terminated string that outlives the call.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statvfs(c_path.as_ptr(), &mut stat) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(stat.f_bavail as u64 * stat.f_frsize as u64)
}

#[cfg(not(unix))]
fn available_bytes(_dir: &Path) -> std::io::Result<u64> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "statvfs is unix-only",
    ))
}
