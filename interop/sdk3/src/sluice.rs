//! One real `sluice serve` process on a free loopback port, with OAuth on and a bootstrap
//! admin principal, its data dir in a temporary directory; and the `sluice` CLI against it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use databricks_zerobus_ingest_sdk::ZerobusSdk;

use crate::HarnessError;

/// The admin principal's client id (created on first start by `--bootstrap-principal`).
pub const CLIENT_ID: &str = "interop-admin";
/// The admin principal's client secret.
pub const CLIENT_SECRET: &str = "interop-admin-secret-0123456789abcdef";

/// How long `sluice serve` gets to answer `/healthz`.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The `sluice` binary: `$SLUICE_BIN`, else the workspace's debug build.
pub fn sluice_bin() -> PathBuf {
    std::env::var_os("SLUICE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/debug/sluice")
        })
}

/// A free loopback TCP port (bound once, then released for the server to take).
pub fn free_port() -> Result<u16, HarnessError> {
    let listener =
        std::net::TcpListener::bind("127.0.0.1:0").map_err(HarnessError::io("bind a port"))?;
    Ok(listener
        .local_addr()
        .map_err(HarnessError::io("port address"))?
        .port())
}

/// Waits until `url` answers 2xx; fails (with the log at `log`) when `child` exits first or
/// `timeout` passes.
pub async fn wait_healthy(
    child: &mut Child,
    url: &str,
    log: &Path,
    timeout: Duration,
) -> Result<(), HarnessError> {
    let deadline = Instant::now() + timeout;
    let client = reqwest::Client::new();
    let failed = |reason: String| HarnessError::ServerStart {
        reason,
        log: std::fs::read_to_string(log).unwrap_or_default(),
    };
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(failed(format!("exited with {status}")));
        }
        if let Ok(response) = client.get(url).send().await {
            if response.status().is_success() {
                return Ok(());
            }
        }
        if Instant::now() >= deadline {
            return Err(failed(format!("no answer on {url}")));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A running `sluice serve`; SIGKILLed when dropped.
pub struct Sluice {
    child: Child,
    /// `http://127.0.0.1:PORT`, gRPC and HTTP on one port.
    pub url: String,
    dir: tempfile::TempDir,
}

impl Sluice {
    /// Starts `sluice serve` with OAuth, the admin principal and `flush_interval` (how soon a
    /// table commits after its first uncommitted record), and waits for `/healthz`.
    pub async fn start(flush_interval: &str) -> Result<Sluice, HarnessError> {
        let dir = tempfile::tempdir().map_err(HarnessError::io("temporary dir"))?;
        let port = free_port()?;
        let log_path = dir.path().join("server.log");
        let log = std::fs::File::create(&log_path).map_err(HarnessError::io("server log"))?;
        let log_err = log.try_clone().map_err(HarnessError::io("server log"))?;
        let child = Command::new(sluice_bin())
            .arg("serve")
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--auth", "oauth"])
            .args(["--flush-interval", flush_interval])
            .args([
                "--bootstrap-principal",
                &format!("{CLIENT_ID}:{CLIENT_SECRET}"),
            ])
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(HarnessError::io(format!(
                "spawn {}",
                sluice_bin().display()
            )))?;
        let mut sluice = Sluice {
            child,
            url: format!("http://127.0.0.1:{port}"),
            dir,
        };
        sluice.wait_healthy().await?;
        Ok(sluice)
    }

    async fn wait_healthy(&mut self) -> Result<(), HarnessError> {
        let url = format!("{}/healthz", self.url);
        let log = self.dir.path().join("server.log");
        wait_healthy(&mut self.child, &url, &log, START_TIMEOUT).await
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    /// Runs the `sluice` CLI against this server as the admin.
    pub fn cli(&self, args: &[&str]) -> Result<String, HarnessError> {
        cli_at(&self.url, args)
    }

    /// Creates `name` (catalog.schema.table) with `columns` in this server's temporary dir and
    /// returns its location (a `file://` URL).
    pub fn create_table(&self, name: &str, columns: &str) -> Result<String, HarnessError> {
        create_table_at(&self.url, &self.dir.path().join("tables"), name, columns)
    }

    /// An official SDK 3.0.0 client for this server (plain-text gRPC; OAuth against the
    /// server's own token endpoint).
    pub fn sdk(&self) -> Result<ZerobusSdk, HarnessError> {
        sdk_at(&self.url)
    }
}

/// Runs the `sluice` CLI against the server (or router) at `url` as the admin; its stdout.
pub fn cli_at(url: &str, args: &[&str]) -> Result<String, HarnessError> {
    let out = Command::new(sluice_bin())
        .args(args)
        .env("SLUICE_SERVER", url)
        .env("SLUICE_CLIENT_ID", CLIENT_ID)
        .env("SLUICE_CLIENT_SECRET", CLIENT_SECRET)
        .env("RUST_BACKTRACE", "0")
        .output()
        .map_err(HarnessError::io("run the sluice CLI"))?;
    if !out.status.success() {
        return Err(HarnessError::Cli {
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Creates `name` with `columns` through the server at `url`, its files under `tables`;
/// returns its location (a `file://` URL).
pub fn create_table_at(
    url: &str,
    tables: &Path,
    name: &str,
    columns: &str,
) -> Result<String, HarnessError> {
    let location = format!("file://{}", tables.join(name).display());
    cli_at(
        url,
        &[
            "table",
            "create",
            name,
            "--columns",
            columns,
            "--location",
            &location,
        ],
    )?;
    Ok(location)
}

/// An official SDK 3.0.0 client for the Zerobus endpoint at `url`, which also serves the
/// OAuth/catalog calls; plain-text gRPC.
pub fn sdk_at(url: &str) -> Result<ZerobusSdk, HarnessError> {
    Ok(ZerobusSdk::builder()
        .endpoint(url)
        .unity_catalog_url(url)
        .no_tls()
        .build()?)
}

impl Drop for Sluice {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
