//! Real cluster components for the cluster tests: an `etcd` process (Debian `etcd-server`,
//! installed by `scripts/test.sh`) and `sluice router` processes. Pods are `harness::Server`s
//! started with `--join`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use databricks_zerobus_ingest_sdk::ZerobusSdk;

use crate::harness::{free_port, CLIENT_ID, CLIENT_SECRET};

/// A single-member etcd cluster on loopback.
pub struct Etcd {
    child: Child,
    pub join: String,
    log: PathBuf,
}

impl Etcd {
    /// Starts etcd with its data in `dir`; returns once it answers.
    pub async fn start(dir: &Path) -> Etcd {
        let client = free_port();
        let peer = free_port();
        std::fs::create_dir_all(dir).expect("etcd dir");
        let log = dir.join("etcd.log");
        let file = std::fs::File::create(&log).expect("etcd log");
        let child = Command::new("etcd")
            .arg("--name")
            .arg("it")
            .arg("--data-dir")
            .arg(dir.join("data"))
            .arg("--listen-client-urls")
            .arg(format!("http://127.0.0.1:{client}"))
            .arg("--advertise-client-urls")
            .arg(format!("http://127.0.0.1:{client}"))
            .arg("--listen-peer-urls")
            .arg(format!("http://127.0.0.1:{peer}"))
            .arg("--initial-advertise-peer-urls")
            .arg(format!("http://127.0.0.1:{peer}"))
            .arg("--initial-cluster")
            .arg(format!("it=http://127.0.0.1:{peer}"))
            .stdout(file.try_clone().expect("log"))
            .stderr(file)
            .stdin(Stdio::null())
            .spawn()
            .expect("start etcd (Debian package etcd-server; scripts/test.sh installs it)");
        let etcd = Etcd {
            child,
            join: format!("etcd://127.0.0.1:{client}"),
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        let health = format!("http://127.0.0.1:{client}/health");
        loop {
            if let Ok(r) = reqwest::get(&health).await {
                if r.status().is_success() {
                    return etcd;
                }
            }
            assert!(
                Instant::now() < deadline,
                "etcd did not start:\n{}",
                std::fs::read_to_string(&etcd.log).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A running `sluice router`.
pub struct Router {
    child: Child,
    pub url: String,
    log: PathBuf,
}

impl Router {
    /// Starts a router joined to `join`; returns once a request through it reaches a pod.
    pub async fn start(dir: &Path, join: &str) -> Router {
        let port = free_port();
        std::fs::create_dir_all(dir).expect("router dir");
        let log = dir.join("router.log");
        let file = std::fs::File::create(&log).expect("router log");
        let child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["router", "--listen", &format!("127.0.0.1:{port}")])
            .args(["--join", join])
            .env("RUST_LOG", "info")
            .stdout(file.try_clone().expect("log"))
            .stderr(file)
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn sluice router");
        let router = Router {
            child,
            url: format!("http://127.0.0.1:{port}"),
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(r) = reqwest::get(format!("{}/healthz", router.url)).await {
                if r.status().is_success() {
                    return router;
                }
            }
            assert!(
                Instant::now() < deadline,
                "router did not relay /healthz:\n{}",
                router.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The router's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// An official-SDK client pointed at the router for both gRPC and OAuth/catalog.
    pub fn sdk(&self) -> ZerobusSdk {
        ZerobusSdk::builder()
            .endpoint(&self.url)
            .unity_catalog_url(&self.url)
            .no_tls()
            .build()
            .expect("sdk")
    }

    /// Runs the `sluice` CLI against the router.
    pub fn cli(&self, args: &[&str]) -> std::process::Output {
        Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(args)
            .env("SLUICE_SERVER", &self.url)
            .env("SLUICE_CLIENT_ID", CLIENT_ID)
            .env("SLUICE_CLIENT_SECRET", CLIENT_SECRET)
            .output()
            .expect("run sluice cli")
    }
}

impl Drop for Router {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `sluice cluster status --json`, parsed.
pub fn cluster_status(join: &str) -> Vec<serde_json::Value> {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["cluster", "status", "--json", "--join", join])
        .output()
        .expect("run sluice cluster status");
    assert!(
        out.status.success(),
        "cluster status failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice::<Vec<serde_json::Value>>(&out.stdout).expect("status json")
}

/// Polls `cluster status` until `pred` holds on the pod list (or panics after `timeout`).
pub async fn wait_for_pods(
    join: &str,
    timeout: Duration,
    what: &str,
    pred: impl Fn(&[serde_json::Value]) -> bool,
) -> Vec<serde_json::Value> {
    let deadline = Instant::now() + timeout;
    loop {
        let pods = cluster_status(join);
        if pred(&pods) {
            return pods;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for: {what}; pods: {pods:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The `open_streams` a pod last reported (0 if it is not registered).
pub fn open_streams(pods: &[serde_json::Value], id: &str) -> u64 {
    pods.iter()
        .find(|p| p["id"] == id)
        .and_then(|p| p["load"]["open_streams"].as_u64())
        .unwrap_or(0)
}
