//! A real `sluice serve` process for the sink benchmarks (feature `e2e`):
//! start on a free loopback port with extra flags, wait until healthy, make
//! admin calls to the HTTP API; killed on drop. Built on the process, token
//! and table helpers of [`crate::e2e`].

use std::path::Path;

use anyhow::{bail, Context, Result};

use crate::e2e::{free_port, serve_args, Process};
pub use crate::e2e::{CLIENT_ID, CLIENT_SECRET};

/// Fails with a hint to build it when the `sluice` binary a bench drives is missing.
pub fn require_binary(sluice: &Path) -> Result<()> {
    if !sluice.exists() {
        bail!(
            "{} not found: build it with `cargo build --release -p sluice-server`",
            sluice.display()
        );
    }
    Ok(())
}

/// UC columns of the telemetry table the end-to-end benchmarks write.
pub fn telemetry_columns() -> serde_json::Value {
    crate::e2e::telemetry_columns()
}

/// A running `sluice serve`.
pub struct Server {
    process: Process,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
}

impl Server {
    /// Starts `binary serve` on `data_dir` with `flush_interval` and `extra` flags.
    pub fn start(
        binary: &Path,
        data_dir: &Path,
        flush_interval: &str,
        extra: &[String],
    ) -> Result<Server> {
        let port = free_port()?;
        let mut args = serve_args(data_dir, port, flush_interval);
        args.extend(extra.iter().cloned());
        let url = format!("http://127.0.0.1:{port}");
        let process = Process::spawn(binary, &args, &data_dir.join("server.log"), url.clone())?;
        Ok(Server { process, url })
    }

    /// The server's process id (for its CPU time in /proc).
    pub fn pid(&self) -> u32 {
        self.process.child.id()
    }

    /// Runs `load` against this server, then stops it and removes `dir` (its data dir):
    /// what the load returned, its wall seconds and the server's CPU seconds (user +
    /// system, from /proc) while it ran.
    pub async fn measure<T>(
        self,
        dir: &Path,
        load: impl std::future::Future<Output = Result<T>>,
    ) -> Result<(T, f64, f64)> {
        let cpu_before = crate::procstat::cpu_seconds(self.pid())?;
        let started = std::time::Instant::now();
        let out = load.await?;
        let seconds = started.elapsed().as_secs_f64();
        let cpu_s = crate::procstat::cpu_seconds(self.pid())? - cpu_before;
        drop(self);
        let _ = std::fs::remove_dir_all(dir);
        Ok((out, seconds, cpu_s))
    }

    /// Waits until `/healthz` answers.
    pub async fn wait_ready(&self) -> Result<()> {
        crate::e2e::wait_ready(&format!("{}/healthz", self.process.url)).await
    }

    /// An admin access token.
    pub async fn token(&self) -> Result<String> {
        crate::e2e::token(&self.url).await
    }

    /// An admin POST to `path` with a JSON body; returns the JSON answer.
    pub async fn post(&self, path: &str, body: serde_json::Value) -> Result<serde_json::Value> {
        let resp = reqwest::Client::new()
            .post(format!("{}{path}", self.url))
            .bearer_auth(self.token().await?)
            .json(&body)
            .send()
            .await?;
        let status = resp.status();
        let v: serde_json::Value = resp.json().await?;
        if !status.is_success() {
            bail!("POST {path}: {status} {v}");
        }
        Ok(v)
    }

    /// Creates a table with UC `columns`; returns its storage location.
    pub async fn create_table(&self, name: &str, columns: serde_json::Value) -> Result<String> {
        let v = self
            .post(
                "/api/2.1/unity-catalog/tables",
                serde_json::json!({"name": name, "columns": columns}),
            )
            .await?;
        Ok(v["storage_location"]
            .as_str()
            .context("location")?
            .to_string())
    }
}
