//! CPU seconds of other processes, read from `/proc/<pid>/stat` (user + system time), their
//! resident memory (`VmRSS` of `/proc/<pid>/status`), and the children of a process (`/proc/<pid>/task/*/children`): how the end-to-end benchmarks
//! report the pods' own CPU beside their throughput, since producers and pods share the
//! machine's cores.

use std::path::Path;

use anyhow::{Context, Result};

/// Clock ticks per second of `/proc` times.
fn ticks_per_second() -> f64 {
    // SAFETY: sysconf only reads a configuration value.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// User + system CPU seconds process `pid` has used so far.
pub fn cpu_seconds(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    cpu_seconds_of(&stat, ticks_per_second())
}

/// Parses utime + stime (fields 14 and 15) of a `/proc/<pid>/stat` line.
fn cpu_seconds_of(stat: &str, ticks: f64) -> Result<f64> {
    // The command name (field 2) is in parentheses and may hold spaces: split after it.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .context("malformed /proc stat")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state): utime is field 14, stime field 15.
    let utime: f64 = fields.get(11).context("no utime")?.parse()?;
    let stime: f64 = fields.get(12).context("no stime")?.parse()?;
    Ok((utime + stime) / ticks)
}

/// Resident set size of process `pid` in bytes.
pub fn rss_bytes(pid: u32) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    rss_bytes_of(&status)
}

/// Parses the `VmRSS:   1234 kB` line of a `/proc/<pid>/status` text.
fn rss_bytes_of(status: &str) -> Result<u64> {
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .context("no VmRSS")?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()?;
    Ok(kb * 1024)
}

/// Pids of the direct children of `pid` whose command line contains `needle`.
pub fn children_matching(pid: u32, needle: &str) -> Result<Vec<u32>> {
    let mut out = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let children = std::fs::read_to_string(task?.path().join("children")).unwrap_or_default();
        for child in children
            .split_whitespace()
            .filter_map(|c| c.parse::<u32>().ok())
        {
            let cmdline = std::fs::read(Path::new("/proc").join(child.to_string()).join("cmdline"))
                .unwrap_or_default();
            if String::from_utf8_lossy(&cmdline).contains(needle) {
                out.push(child);
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Summed CPU seconds of `pids` (a process that is gone counts 0).
pub fn cpu_seconds_sum(pids: &[u32]) -> f64 {
    pids.iter().filter_map(|&p| cpu_seconds(p).ok()).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_with_spaces_in_the_name_parses() {
        let line = "42 (sluice serve) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0 1 2 3";
        assert_eq!(cpu_seconds_of(line, 100.0).expect("parse"), 3.0);
    }

    #[test]
    fn the_vmrss_line_is_read_in_bytes() {
        let status = "Name:\tsluice\nVmPeak:\t  9000 kB\nVmRSS:\t   1536 kB\nThreads:\t9\n";
        assert_eq!(rss_bytes_of(status).expect("parse"), 1536 * 1024);
        assert!(rss_bytes_of("Name:\tkthreadd\n").is_err());
        assert!(rss_bytes(std::process::id()).expect("own status") > 0);
    }

    #[test]
    fn spinning_raises_this_processs_cpu_seconds() {
        let before = cpu_seconds(std::process::id()).expect("own stat");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut x = 0u64;
        while cpu_seconds(std::process::id()).expect("own stat") <= before {
            for i in 0..1_000_000u64 {
                x = x.wrapping_mul(31).wrapping_add(i);
            }
            assert!(
                std::time::Instant::now() < deadline,
                "CPU time never moved ({x})"
            );
        }
        assert!(cpu_seconds(u32::MAX).is_err());
    }
}
