//! A real `sluice serve` process for the end-to-end benchmarks (feature
//! `e2e`): start on a free loopback port, wait until healthy, fetch an admin
//! token, create tables through the tables API; killed on drop.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// Admin client id the benchmarks bootstrap their servers with.
pub const CLIENT_ID: &str = "bench-admin";
/// Its secret.
pub const CLIENT_SECRET: &str = "bench-admin-secret-0123456789";

/// UC columns of the telemetry table the end-to-end benchmarks write.
pub fn telemetry_columns() -> serde_json::Value {
    serde_json::json!([
        {"name": "id", "type_text": "bigint", "nullable": false},
        {"name": "device", "type_text": "string"},
        {"name": "ts", "type_text": "timestamp"},
        {"name": "temp", "type_text": "double"},
        {"name": "humidity", "type_text": "double"},
        {"name": "payload", "type_text": "string"},
    ])
}

/// A running `sluice serve`.
pub struct Server {
    child: Child,
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
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let log = std::fs::File::create(data_dir.join("server.log"))?;
        let child = Command::new(binary)
            .args(["serve", "--data-dir"])
            .arg(data_dir)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--flush-interval", flush_interval])
            .args([
                "--bootstrap-principal",
                &format!("{CLIENT_ID}:{CLIENT_SECRET}"),
            ])
            .args(extra)
            .env("RUST_LOG", "warn")
            .stdout(log.try_clone()?)
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        Ok(Server {
            child,
            url: format!("http://127.0.0.1:{port}"),
        })
    }

    /// Waits until `/healthz` answers.
    pub async fn wait_ready(&self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Ok(r) = reqwest::get(format!("{}/healthz", self.url)).await {
                if r.status().is_success() {
                    return Ok(());
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        bail!("server did not become healthy")
    }

    /// An admin access token.
    pub async fn token(&self) -> Result<String> {
        let v: serde_json::Value = reqwest::Client::new()
            .post(format!("{}/oidc/v1/token", self.url))
            .basic_auth(CLIENT_ID, Some(CLIENT_SECRET))
            .form(&[("grant_type", "client_credentials")])
            .send()
            .await?
            .json()
            .await?;
        Ok(v["access_token"].as_str().context("no token")?.to_string())
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

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
