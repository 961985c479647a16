//! A pod, a router and `sluice cluster status` against a real etcd secured two ways:
//! TLS with client certificates (`--client-cert-auth`, certificates made here with rcgen)
//! and etcd's user/password authentication (enabled with `etcdctl`). With the right
//! `--etcd-*` flags everything works; without them, with a wrong password or an untrusted
//! CA, each fails with an error that names the cause.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::cluster_harness::{cluster_status_with, Etcd, Router};
use crate::harness::{Server, CLUSTER_KEK};

/// PEM files of a test PKI: the CA, etcd's server certificate (127.0.0.1), a client
/// certificate signed by the CA, and a CA that signed nothing etcd uses.
struct Pki {
    ca: PathBuf,
    server_cert: PathBuf,
    server_key: PathBuf,
    client_cert: PathBuf,
    client_key: PathBuf,
    stranger_ca: PathBuf,
}

fn make_pki(dir: &Path) -> Pki {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let write = |name: &str, pem: String| {
        let path = dir.join(name);
        std::fs::write(&path, pem).expect("write pem");
        path
    };
    let new_ca = |name: &str| {
        let key = KeyPair::generate().expect("ca key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("ca params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let cert = params.self_signed(&key).expect("ca cert");
        (cert.pem(), Issuer::new(params, key))
    };
    let (ca_pem, issuer) = new_ca("Sluice etcd test CA");
    let (stranger_pem, _) = new_ca("Some other CA");
    let leaf = |names: Vec<String>, cn: &str| {
        let key = KeyPair::generate().expect("leaf key");
        let mut params = CertificateParams::new(names).expect("leaf params");
        params.distinguished_name.push(DnType::CommonName, cn);
        let cert = params.signed_by(&key, &issuer).expect("leaf cert");
        (cert.pem(), key.serialize_pem())
    };
    let (server_cert, server_key) = leaf(vec!["127.0.0.1".into(), "localhost".into()], "etcd");
    let (client_cert, client_key) = leaf(Vec::new(), "sluice");
    Pki {
        ca: write("ca.pem", ca_pem),
        server_cert: write("etcd.pem", server_cert),
        server_key: write("etcd.key", server_key),
        client_cert: write("client.pem", client_cert),
        client_key: write("client.key", client_key),
        stranger_ca: write("stranger-ca.pem", stranger_pem),
    }
}

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// `sluice serve --join` that must fail: returns its log once it exited.
fn failed_pod_log(dir: &Path, join: &str, extra: &[&str]) -> String {
    let data = path(dir).to_string();
    let mut args = vec!["serve", "--data-dir", &data, "--listen", "127.0.0.1:0"];
    args.extend_from_slice(&["--join", join]);
    args.extend_from_slice(extra);
    failed_log(dir, &args)
}

/// A `sluice` command that must fail (a pod or a router, which would otherwise serve):
/// returns its output once it exited.
fn failed_log(dir: &Path, args: &[&str]) -> String {
    std::fs::create_dir_all(dir).expect("log dir");
    let log = dir.join("failed.log");
    let file = std::fs::File::create(&log).expect("log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .env("SLUICE_SECRETS_KEY", CLUSTER_KEK)
        .env_remove("SLUICE_ETCD_PASSWORD")
        .stdout(file.try_clone().expect("log"))
        .stderr(file)
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn sluice");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            assert!(!status.success(), "sluice {args:?} should have failed");
            return std::fs::read_to_string(&log).unwrap_or_default();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!(
                "sluice {args:?} did not give up: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn stderr_of(out: &Output) -> String {
    assert!(
        !out.status.success(),
        "expected a failure, got: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A pod joined with `flags`, a router with the same flags, and `cluster status` seeing it.
async fn pod_router_and_status(
    root: &Path,
    join: &str,
    flags: &[&str],
    env: &[(&str, &str)],
) -> (Server, Router) {
    let mut pod_flags = vec!["--join", join, "--pod-id", "pod-s"];
    pod_flags.extend_from_slice(flags);
    let pod = Server::start_with_args(&root.join("pod"), "500ms", &pod_flags).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = cluster_status_with(join, flags, env);
        assert!(
            out.status.success(),
            "cluster status: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let pods: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).expect("json");
        if pods.iter().any(|p| p["id"] == "pod-s") {
            break;
        }
        assert!(Instant::now() < deadline, "pod-s never registered");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Returns once a request through the router reached the pod it read from etcd.
    let router = Router::start_with(&root.join("router"), join, flags).await;
    (pod, router)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_over_tls_with_client_certificates_needs_the_ca_and_a_client_certificate() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    let pki = make_pki(root);
    let etcd = Etcd::start_with(
        &root.join("etcd"),
        "etcds",
        &[
            "--cert-file",
            path(&pki.server_cert),
            "--key-file",
            path(&pki.server_key),
            "--trusted-ca-file",
            path(&pki.ca),
            "--client-cert-auth",
        ],
    )
    .await;
    let join = etcd.join.clone();
    let trusting = |ca: &Path| {
        [
            "--etcd-ca".to_string(),
            path(ca).to_string(),
            "--etcd-cert".to_string(),
            path(&pki.client_cert).to_string(),
            "--etcd-key".to_string(),
            path(&pki.client_key).to_string(),
        ]
    };
    let good = trusting(&pki.ca);
    let good: Vec<&str> = good.iter().map(String::as_str).collect();
    let (pod, router) = pod_router_and_status(root, &join, &good, &[]).await;
    let logs = format!("{}{}", pod.log(), router.log());
    let key = std::fs::read_to_string(&pki.client_key).expect("key");
    let key_line = key.lines().nth(1).expect("a base64 line");
    assert!(!logs.contains(key_line), "no key material in logs");

    // No client certificate: etcd ends the handshake.
    let no_cert = stderr_of(&cluster_status_with(
        &join,
        &["--etcd-ca", path(&pki.ca)],
        &[],
    ));
    assert!(no_cert.contains("etcd range"), "{no_cert}");
    assert!(
        no_cert.contains("give --etcd-cert and --etcd-key"),
        "{no_cert}"
    );
    // A CA that did not sign etcd's certificate.
    let stranger = trusting(&pki.stranger_ca);
    let stranger: Vec<&str> = stranger.iter().map(String::as_str).collect();
    let untrusted = stderr_of(&cluster_status_with(&join, &stranger, &[]));
    assert!(untrusted.contains("UnknownIssuer"), "{untrusted}");
    assert!(
        untrusted.contains("not signed by the CA of --etcd-ca"),
        "{untrusted}"
    );
    // TLS material with a plain-text URL is refused, not ignored.
    let plain = join.replacen("etcds://", "etcd://", 1);
    let refused = stderr_of(&cluster_status_with(&plain, &good, &[]));
    assert!(refused.contains("use etcds://"), "{refused}");
    // A pod without a client certificate does not start.
    let log = failed_pod_log(&root.join("pod-bare"), &join, &["--etcd-ca", path(&pki.ca)]);
    assert!(log.contains("certificate"), "{log}");
}

/// Runs `etcdctl` against the plain-text etcd at `join`.
fn etcdctl(join: &str, args: &[&str]) {
    let endpoint = join.replacen("etcd://", "http://", 1);
    let out = Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .args(["--endpoints", &endpoint])
        .args(args)
        .output()
        .expect("run etcdctl (Debian package etcd-client; scripts/test.sh installs it)");
    assert!(
        out.status.success(),
        "etcdctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_with_authentication_needs_the_user_and_its_password() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    let etcd = Etcd::start_with(&root.join("etcd"), "etcd", &[]).await;
    let join = etcd.join.clone();
    // A root user (etcd needs one to enable auth) and a `sluice` user that may read and
    // write /sluice/ only.
    etcdctl(&join, &["user", "add", "root:root-pw-0123"]);
    etcdctl(&join, &["user", "add", "sluice:sluice-pw-0123"]);
    etcdctl(&join, &["role", "add", "sluice"]);
    etcdctl(
        &join,
        &[
            "role",
            "grant-permission",
            "sluice",
            "--prefix=true",
            "readwrite",
            "/sluice/",
        ],
    );
    etcdctl(&join, &["user", "grant-role", "sluice", "sluice"]);
    etcdctl(&join, &["auth", "enable"]);

    let password_file = root.join("etcd-password");
    std::fs::write(&password_file, "sluice-pw-0123\n").expect("password file");
    let flags = [
        "--etcd-user",
        "sluice",
        "--etcd-password-file",
        path(&password_file),
    ];
    let (pod, router) = pod_router_and_status(root, &join, &flags, &[]).await;
    // The CLI also takes the password from the environment.
    let by_env = cluster_status_with(
        &join,
        &["--etcd-user", "sluice"],
        &[("SLUICE_ETCD_PASSWORD", "sluice-pw-0123")],
    );
    assert!(
        by_env.status.success(),
        "{}",
        String::from_utf8_lossy(&by_env.stderr)
    );
    let logs = format!("{}{}", pod.log(), router.log());
    assert!(
        !logs.contains("sluice-pw-0123"),
        "the password is never logged"
    );

    let anonymous = stderr_of(&cluster_status_with(&join, &[], &[]));
    assert!(anonymous.contains("user name is empty"), "{anonymous}");
    assert!(anonymous.contains("--etcd-user"), "{anonymous}");
    let wrong = stderr_of(&cluster_status_with(
        &join,
        &["--etcd-user", "sluice"],
        &[("SLUICE_ETCD_PASSWORD", "not-the-password")],
    ));
    assert!(
        wrong.contains("etcd authentication as user \"sluice\"")
            && wrong.contains("invalid user ID or password"),
        "{wrong}"
    );
    assert!(!wrong.contains("not-the-password"), "{wrong}");
    let log = failed_pod_log(
        &root.join("pod-wrong"),
        &join,
        &[
            "--etcd-user",
            "sluice",
            "--etcd-password",
            "not-the-password",
        ],
    );
    assert!(log.contains("invalid user ID or password"), "{log}");
    assert!(!log.contains("not-the-password"), "{log}");
    // A router without credentials does not start either.
    let log = failed_log(
        &root.join("router-bare"),
        &["router", "--listen", "127.0.0.1:0", "--join", &join],
    );
    assert!(log.contains("give --etcd-user"), "{log}");
}
