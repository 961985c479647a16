//! The WAL disk's free and total bytes (`statvfs` of the WAL directory), published as the
//! gauges `sluice_wal_disk_free_bytes` and `sluice_wal_disk_size_bytes` at each scrape, so
//! an alert can fire before the disk fills (a full disk stalls acks).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// `(free bytes for unprivileged writers, total bytes)` of the file system holding `dir`.
pub fn space(dir: &Path) -> Option<(u64, u64)> {
    let c = CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs only writes into the zeroed struct we own; `c` is NUL-terminated.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    if rc != 0 {
        return None;
    }
    let unit = st.f_frsize as u64;
    Some((st.f_bavail as u64 * unit, st.f_blocks as u64 * unit))
}

/// Sets the WAL disk gauges from `dir` (left unchanged when `statvfs` fails).
pub fn publish(dir: &Path) {
    if let Some((free, size)) = space(dir) {
        metrics::gauge!("sluice_wal_disk_free_bytes").set(free as f64);
        metrics::gauge!("sluice_wal_disk_size_bytes").set(size as f64);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_directory_has_some_space_of_a_larger_size() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (free, size) = super::space(dir.path()).expect("statvfs");
        assert!(size > 0 && free <= size, "free {free} size {size}");
        assert!(super::space(std::path::Path::new("/no/such/dir")).is_none());
    }
}
