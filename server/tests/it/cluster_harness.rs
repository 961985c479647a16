//! Real cluster components for the cluster tests: an `etcd` process (Debian `etcd-server`,
//! installed by `scripts/test.sh`) and `sluice router` processes. Pods are `harness::Server`s
//! started with `--join`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use databricks_zerobus_ingest_sdk::ZerobusSdk;

use crate::harness::{cli_at, free_port, sdk_at, wait_http_ok, Server};

/// Starts pod `id` joined to `join`, its data dir `root/id`, sharing the local-folder
/// `warehouse`, flushing every `flush_interval`, with drain grace `drain_grace`.
pub async fn start_pod(
    root: &Path,
    id: &str,
    join: &str,
    warehouse: &Path,
    flush_interval: &str,
    drain_grace: &str,
) -> Server {
    start_joined(
        root,
        id,
        join,
        warehouse,
        flush_interval,
        &["--drain-grace", drain_grace],
    )
    .await
}

/// Starts pod `id` joined to `join`, its data dir `root/id`, sharing the local-folder
/// `warehouse`, flushing every `flush_interval`, with `extra` flags of `sluice serve`.
pub async fn start_joined(
    root: &Path,
    id: &str,
    join: &str,
    warehouse: &Path,
    flush_interval: &str,
    extra: &[&str],
) -> Server {
    let warehouse = warehouse.to_str().expect("utf-8 path");
    let mut args = vec!["--join", join, "--pod-id", id, "--warehouse", warehouse];
    args.extend_from_slice(extra);
    Server::start_with_args(&root.join(id), flush_interval, &args).await
}

/// Starts etcd (in `root/etcd`) and pods `ids` joined to it (see [`start_pod`]), sharing the
/// warehouse `root/warehouse`; returns once every pod is registered.
pub async fn start_cluster<const N: usize>(
    root: &Path,
    ids: [&str; N],
    flush_interval: &str,
    drain_grace: &str,
) -> (Etcd, [Server; N]) {
    let etcd = Etcd::start(&root.join("etcd")).await;
    let warehouse = root.join("warehouse");
    let mut pods = Vec::with_capacity(N);
    for id in ids {
        pods.push(
            start_pod(
                root,
                id,
                &etcd.join,
                &warehouse,
                flush_interval,
                drain_grace,
            )
            .await,
        );
    }
    wait_for_pods(
        &etcd.join,
        Duration::from_secs(10),
        "every pod registered",
        |p| p.len() == N,
    )
    .await;
    let pods = pods
        .try_into()
        .unwrap_or_else(|_| panic!("{N} pods started"));
    (etcd, pods)
}

/// `sluice pod drain POD` (waiting until it left) and then until the process exited
/// cleanly; panics with the pod's log otherwise.
pub fn drain_pod(join: &str, pod: &mut Server, id: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["pod", "drain", id, "--join", join, "--timeout", "60s"])
        .output()
        .expect("run sluice pod drain");
    assert!(
        out.status.success(),
        "pod drain failed: {}{}\n{id} log:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        pod.log()
    );
    // The CLI's summary on stderr (stdout keeps its one-line result).
    let stderr = String::from_utf8_lossy(&out.stderr);
    let summary = stderr
        .lines()
        .find(|l| l.starts_with(&format!("drained {id}: it left the cluster (")))
        .unwrap_or_else(|| panic!("no drain summary on stderr: {stderr}"));
    assert!(
        summary.contains(" streams and ") && summary.ends_with(" s"),
        "{summary}"
    );
    assert!(
        pod.wait_exit(Duration::from_secs(30)),
        "drained {id} did not exit cleanly:\n{}",
        pod.log()
    );
}

/// A single-member etcd cluster on loopback.
pub struct Etcd {
    child: Option<Child>,
    pub join: String,
    dir: PathBuf,
    client: u16,
    peer: u16,
    metrics: u16,
    scheme: String,
    extra: Vec<String>,
}

impl Etcd {
    /// Starts etcd with its data in `dir`; returns once it answers.
    pub async fn start(dir: &Path) -> Etcd {
        Etcd::start_with(dir, "etcd", &[]).await
    }

    /// Starts etcd serving clients on `scheme` (`etcd`, or `etcds` with the TLS flags in
    /// `extra`) with the `extra` flags; returns once its health endpoint (plain HTTP on a
    /// port of its own, so a TLS etcd needs no client certificate for it) answers.
    pub async fn start_with(dir: &Path, scheme: &str, extra: &[&str]) -> Etcd {
        std::fs::create_dir_all(dir).expect("etcd dir");
        let client = free_port();
        let mut etcd = Etcd {
            child: None,
            join: format!("{scheme}://127.0.0.1:{client}"),
            dir: dir.to_path_buf(),
            client,
            peer: free_port(),
            metrics: free_port(),
            scheme: scheme.to_string(),
            extra: extra.iter().map(|s| s.to_string()).collect(),
        };
        etcd.spawn().await;
        etcd
    }

    async fn spawn(&mut self) {
        let (client, peer, metrics, dir) = (self.client, self.peer, self.metrics, &self.dir);
        let client_url = match self.scheme.as_str() {
            "etcds" => format!("https://127.0.0.1:{client}"),
            _ => format!("http://127.0.0.1:{client}"),
        };
        let log = dir.join("etcd.log");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .expect("etcd log");
        let mut child = Command::new("etcd")
            .arg("--name")
            .arg("it")
            .arg("--data-dir")
            .arg(dir.join("data"))
            .arg("--listen-client-urls")
            .arg(&client_url)
            .arg("--advertise-client-urls")
            .arg(&client_url)
            .arg("--listen-metrics-urls")
            .arg(format!("http://127.0.0.1:{metrics}"))
            .arg("--listen-peer-urls")
            .arg(format!("http://127.0.0.1:{peer}"))
            .arg("--initial-advertise-peer-urls")
            .arg(format!("http://127.0.0.1:{peer}"))
            .arg("--initial-cluster")
            .arg(format!("it=http://127.0.0.1:{peer}"))
            .args(&self.extra)
            .stdout(file.try_clone().expect("log"))
            .stderr(file)
            .stdin(Stdio::null())
            .spawn()
            .expect("start etcd (Debian package etcd-server; scripts/test.sh installs it)");
        let health = format!("http://127.0.0.1:{metrics}/health");
        wait_http_ok(&health, "etcd", &mut child, &log, Duration::from_secs(30)).await;
        self.child = Some(child);
    }

    /// SIGKILLs etcd (its data dir stays).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts etcd again on the same ports, flags and data dir.
    pub async fn restart(&mut self) {
        assert!(self.child.is_none(), "restart of a running etcd");
        self.spawn().await;
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A running `sluice router`.
pub struct Router {
    child: Child,
    pub url: String,
    log: PathBuf,
}

impl Router {
    /// Starts a router joined to `join`; returns once it is ready (`/readyz`: it sees a
    /// placeable pod, so a request through it reaches one).
    pub async fn start(dir: &Path, join: &str) -> Router {
        Router::start_with(dir, join, &[]).await
    }

    /// [`Router::start`] with extra `sluice router` flags (etcd TLS and credentials).
    pub async fn start_with(dir: &Path, join: &str, extra: &[&str]) -> Router {
        let mut router = Router::spawn(dir, join, extra);
        router.wait_ok("/readyz").await;
        router
    }

    /// Starts a router joined to `join`; returns once it answers `/healthz` (it reads the
    /// pod list; there may be no pod).
    pub async fn start_without_pods(dir: &Path, join: &str) -> Router {
        let mut router = Router::spawn(dir, join, &[]);
        router.wait_ok("/healthz").await;
        router
    }

    fn spawn(dir: &Path, join: &str, extra: &[&str]) -> Router {
        let port = free_port();
        std::fs::create_dir_all(dir).expect("router dir");
        let log = dir.join("router.log");
        let file = std::fs::File::create(&log).expect("router log");
        let child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["router", "--listen", &format!("127.0.0.1:{port}")])
            .args(["--join", join])
            .args(extra)
            .env("RUST_LOG", "info")
            .stdout(file.try_clone().expect("log"))
            .stderr(file)
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn sluice router");
        Router {
            child,
            url: format!("http://127.0.0.1:{port}"),
            log,
        }
    }

    async fn wait_ok(&mut self, path: &str) {
        let url = format!("{}{path}", self.url);
        let log = self.log.clone();
        wait_http_ok(
            &url,
            "sluice router",
            &mut self.child,
            &log,
            Duration::from_secs(30),
        )
        .await;
    }

    /// The router's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// An official-SDK client pointed at the router for both gRPC and OAuth/catalog.
    pub fn sdk(&self) -> ZerobusSdk {
        sdk_at(&self.url)
    }

    /// Runs the `sluice` CLI against the router.
    pub fn cli(&self, args: &[&str]) -> std::process::Output {
        cli_at(&self.url, args)
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
    let out = cluster_status_with(join, &[], &[]);
    assert!(
        out.status.success(),
        "cluster status failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice::<Vec<serde_json::Value>>(&out.stdout).expect("status json")
}

/// Runs `sluice cluster status --json --join JOIN` with extra flags and environment.
pub fn cluster_status_with(
    join: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["cluster", "status", "--json", "--join", join])
        .args(extra)
        .envs(env.iter().copied())
        .output()
        .expect("run sluice cluster status")
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
