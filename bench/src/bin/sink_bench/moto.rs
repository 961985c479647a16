//! moto's S3 server (`.venv/bin/moto_server`, installed by scripts/test.sh)
//! on a free loopback port with one bucket; killed on drop.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use sluice_server::warehouse::S3Settings;

/// The bucket the benchmark uses.
pub const BUCKET: &str = "sluice-bench";

pub struct Moto {
    child: Child,
    pub endpoint: String,
}

impl Moto {
    pub async fn start() -> Result<Moto> {
        let binary = std::path::Path::new(".venv/bin/moto_server");
        if !binary.exists() {
            bail!("{} not found: run scripts/test.sh once", binary.display());
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let child = Command::new(binary)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting moto_server")?;
        let moto = Moto {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(r) = reqwest::Client::new()
                .put(format!("{}/{BUCKET}", moto.endpoint))
                .send()
                .await
            {
                if r.status().is_success() {
                    return Ok(moto);
                }
                bail!("creating bucket: {}", r.status());
            }
            if Instant::now() > deadline {
                bail!("moto_server did not start");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub fn settings(&self) -> S3Settings {
        S3Settings {
            endpoint: Some(self.endpoint.clone()),
            region: Some("us-east-1".into()),
            access_key_id: Some("bench".into()),
            secret_access_key: Some("bench".into()),
            allow_http: true,
        }
    }

    /// `sluice serve` flags of a warehouse under `prefix`.
    pub fn serve_args(&self, prefix: &str) -> Vec<String> {
        [
            "--warehouse",
            &format!("s3://{BUCKET}/{prefix}"),
            "--s3-endpoint",
            &self.endpoint,
            "--s3-region",
            "us-east-1",
            "--s3-access-key-id",
            "bench",
            "--s3-secret-access-key",
            "bench",
            "--s3-allow-http",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
