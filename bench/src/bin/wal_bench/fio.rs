//! Runs fio's log-disk recipe on the same directory and reads its JSON output.

use std::path::Path;
use std::process::Command;

use anyhow::Context;

pub struct FioResult {
    pub iops: f64,
    pub sync_p50_ms: f64,
    pub sync_p99_ms: f64,
}

/// `overwrite`: fio lays the whole file out (writes it) before the timed run, like the WAL's
/// prepared segments; otherwise it times writes into a freshly `fallocate`d file.
pub fn run(fio: &str, dir: &Path, bytes: u64, overwrite: bool) -> anyhow::Result<FioResult> {
    let out = Command::new(fio)
        .arg(format!("--overwrite={}", u8::from(overwrite)))
        .args([
            "--name=wal-seed",
            "--rw=write",
            "--ioengine=sync",
            "--fdatasync=1",
            "--bs=2300",
            "--output-format=json",
        ])
        .arg(format!("--size={}m", bytes >> 20))
        .arg(format!("--directory={}", dir.display()))
        .output()
        .with_context(|| format!("running {fio}"))?;
    anyhow::ensure!(
        out.status.success(),
        "fio exited with {}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_file(dir.join("wal-seed.0.0"));
    // fio may print warnings before the JSON document.
    let text = String::from_utf8_lossy(&out.stdout);
    let json_start = text.find('{').context("no JSON in fio's output")?;
    let v: serde_json::Value = serde_json::from_str(&text[json_start..])?;
    let job = &v["jobs"][0];
    let pct = &job["sync"]["lat_ns"]["percentile"];
    let ms = |key: &str| pct[key].as_f64().map(|ns| ns / 1e6);
    Ok(FioResult {
        iops: job["write"]["iops"].as_f64().context("write.iops")?,
        sync_p50_ms: ms("50.000000").context("sync p50")?,
        sync_p99_ms: ms("99.000000").context("sync p99")?,
    })
}
