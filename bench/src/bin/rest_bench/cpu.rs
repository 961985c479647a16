//! CPU time of another process, read from `/proc/<pid>/stat` (user + system, in clock
//! ticks, converted to seconds): the server's CPU over a run is the difference of two reads.

use anyhow::{Context, Result};

/// CPU seconds (user + system) `pid` has used so far.
pub fn cpu_seconds(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let after = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .context("malformed /proc stat")?;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // After ')' field 0 is the state (stat field 3): utime is field 14, stime 15.
    let utime: u64 = fields.get(11).context("no utime")?.parse()?;
    let stime: u64 = fields.get(12).context("no stime")?.parse()?;
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Ok((utime + stime) as f64 / ticks)
}
