//! What one scenario run cost: CPU seconds and peak resident memory (from `getrusage` /
//! `wait4`) and the bytes a store occupies on disk (allocated blocks, so preallocation
//! counts).

use std::path::Path;

use serde::{Deserialize, Serialize};

/// CPU and memory of one process.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct Usage {
    /// User + system CPU seconds.
    pub cpu_s: f64,
    /// Peak resident set size in bytes (the kernel's high-water mark).
    pub peak_rss: u64,
}

impl Usage {
    fn from_rusage(u: &libc::rusage) -> Self {
        let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        Usage {
            cpu_s: secs(u.ru_utime) + secs(u.ru_stime),
            peak_rss: u.ru_maxrss.max(0) as u64 * 1024,
        }
    }

    /// This process so far.
    pub fn of_self() -> Self {
        // SAFETY: getrusage only writes into the zeroed struct we own.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
        Usage::from_rusage(&u)
    }
}

/// Waits for the child process `pid` to exit and returns its usage over its whole life.
#[cfg_attr(not(feature = "peers"), allow(dead_code))]
pub fn wait_child(pid: u32) -> std::io::Result<Usage> {
    let pid = libc::pid_t::try_from(pid)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "pid overflows"))?;
    // SAFETY: wait4 writes the status and the zeroed rusage we own; `pid` is our child.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    let mut status = 0;
    loop {
        let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut u) };
        if rc == pid {
            return Ok(Usage::from_rusage(&u));
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// Bytes of disk the files under `dir` occupy (allocated blocks, recursively).
pub fn allocated_bytes(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => allocated_bytes(&e.path()),
            Ok(m) => m.blocks() * 512,
            Err(_) => 0,
        })
        .sum()
}
