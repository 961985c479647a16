//! Sluice's etcd client against a real etcd (`/usr/bin/etcd`, Debian `etcd-server`, which
//! `scripts/test.sh` installs): the calls the meta store and registration make, with the
//! answers etcd gives (wire compatibility of the trimmed `.proto`).

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use sluice_router::etcd::{Credentials, EtcdOptions};
use sluice_router::meta::Meta;
use sluice_router::RouterError;

/// A single-member etcd on loopback, killed on drop.
struct Etcd {
    child: Child,
    join: String,
    _dir: tempfile::TempDir,
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

/// Starts etcd and returns once the meta store answers through it.
async fn start_etcd() -> (Etcd, Meta) {
    start_etcd_with(&[]).await
}

/// [`start_etcd`] with extra etcd flags.
async fn start_etcd_with(extra: &[&str]) -> (Etcd, Meta) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (client, peer) = (free_port(), free_port());
    let child = Command::new("etcd")
        .args(["--name", "t", "--data-dir"])
        .arg(dir.path().join("data"))
        .arg(format!("--listen-client-urls=http://127.0.0.1:{client}"))
        .arg(format!("--advertise-client-urls=http://127.0.0.1:{client}"))
        .arg(format!("--listen-peer-urls=http://127.0.0.1:{peer}"))
        .arg(format!(
            "--initial-advertise-peer-urls=http://127.0.0.1:{peer}"
        ))
        .arg(format!("--initial-cluster=t=http://127.0.0.1:{peer}"))
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start etcd (Debian package etcd-server)");
    let etcd = Etcd {
        child,
        join: format!("etcd://127.0.0.1:{client}"),
        _dir: dir,
    };
    for _ in 0..300 {
        if let Ok(meta) = Meta::connect(&etcd.join, &Default::default()).await {
            if meta.pods().await.is_ok() {
                return (etcd, meta);
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("etcd at {} did not come up", etcd.join);
}

#[tokio::test]
async fn compare_and_put_writes_only_over_the_revision_it_read() {
    let (_etcd, meta) = start_etcd().await;
    assert!(meta.get("/t/k").await.expect("get").is_none());

    let first = meta
        .compare_and_put("/t/k", 0, b"one".to_vec())
        .await
        .expect("create");
    let first = first.expect("absent key is created");
    assert_eq!(
        meta.compare_and_put("/t/k", 0, b"again".to_vec())
            .await
            .expect("txn"),
        None
    );

    let read = meta.get("/t/k").await.expect("get").expect("present");
    assert_eq!((read.value.as_slice(), read.revision), (&b"one"[..], first));

    let second = meta
        .compare_and_put("/t/k", first, b"two".to_vec())
        .await
        .expect("txn");
    let second = second.expect("unchanged key is replaced");
    assert!(second > first);
    assert_eq!(
        meta.compare_and_put("/t/k", first, b"stale".to_vec())
            .await
            .expect("txn"),
        None
    );
    let read = meta.get("/t/k").await.expect("get").expect("present");
    assert_eq!(
        (read.value.as_slice(), read.revision),
        (&b"two"[..], second)
    );
}

#[tokio::test]
async fn a_watch_reports_each_change_and_a_drain_request_wakes_its_waiter() {
    let (_etcd, meta) = start_etcd().await;
    let (seen_tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
    let watcher = meta.clone();
    let watch = tokio::spawn(async move {
        watcher
            .watch_revisions("/t/w", move |r| {
                let _ = seen_tx.send(r);
            })
            .await
    });
    let waiter = meta.clone();
    let drained = tokio::spawn(async move { waiter.drain_requested("p1").await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!drained.is_finished(), "no drain was requested yet");

    let written = meta
        .compare_and_put("/t/w", 0, b"x".to_vec())
        .await
        .expect("put");
    let got = tokio::time::timeout(Duration::from_secs(5), seen.recv())
        .await
        .expect("event");
    assert_eq!(got, written);
    watch.abort();

    // A drain of an unknown pod is refused; of a registered one it reaches the waiter.
    assert!(matches!(
        meta.request_drain("p1", "ops@host").await,
        Err(RouterError::UnknownPod(_))
    ));
    let lease = meta.client().lease_grant(5).await.expect("grant");
    let record = sluice_router::PodRecord {
        id: "p1".into(),
        addr: "http://127.0.0.1:1".into(),
        state: sluice_router::PodState::Ready,
        load: sluice_router::Load::default(),
        reported_at_ms: 0,
        mqtt_addr: None,
        kafka_addr: None,
    };
    meta.put_pod(&record, lease).await.expect("put pod");
    meta.request_drain("p1", "ops@host").await.expect("drain");
    let woke = tokio::time::timeout(Duration::from_secs(5), drained)
        .await
        .expect("woke");
    assert_eq!(woke.expect("task").expect("drain seen"), "ops@host");
}

#[tokio::test]
async fn a_pod_record_lives_as_long_as_its_lease() {
    let (_etcd, meta) = start_etcd().await;
    let etcd = meta.client();
    let lease = etcd.lease_grant(5).await.expect("grant");
    assert!(lease != 0);
    let ttl = etcd.lease_keep_alive(lease).await.expect("keep alive");
    assert!((1..=5).contains(&ttl), "renewed ttl {ttl}");

    let record = sluice_router::PodRecord {
        id: "p2".into(),
        addr: "http://127.0.0.1:2".into(),
        state: sluice_router::PodState::Draining,
        load: sluice_router::Load::default(),
        reported_at_ms: 7,
        mqtt_addr: None,
        kafka_addr: None,
    };
    meta.put_pod(&record, lease).await.expect("put pod");
    let pods = meta.pods().await.expect("pods");
    assert_eq!(pods.len(), 1);
    assert_eq!(
        (pods[0].id.as_str(), pods[0].state),
        ("p2", sluice_router::PodState::Draining)
    );

    etcd.lease_revoke(lease).await.expect("revoke");
    assert!(
        meta.pods().await.expect("pods").is_empty(),
        "revoking removes the record"
    );
    assert!(
        etcd.lease_keep_alive(lease).await.expect("keep alive") <= 0,
        "a revoked lease is gone"
    );
}

#[tokio::test]
async fn an_unreachable_etcd_is_an_etcd_error_naming_the_call() {
    let meta = Meta::connect(
        &format!("etcd://127.0.0.1:{}", free_port()),
        &Default::default(),
    )
    .await
    .expect("lazy");
    match meta.get("/t/k").await {
        Err(RouterError::Etcd { call, .. }) => assert_eq!(call, "range"),
        other => panic!("expected an etcd error, got {other:?}"),
    }
}

/// Runs `etcdctl` (Debian `etcd-client`) against `join`.
fn etcdctl(join: &str, args: &[&str]) {
    let out = Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .arg(format!(
            "--endpoints={}",
            join.replacen("etcd://", "http://", 1)
        ))
        .args(args)
        .output()
        .expect("run etcdctl (Debian package etcd-client)");
    assert!(
        out.status.success(),
        "etcdctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn an_expired_token_is_renewed_for_calls_watches_and_leases() {
    // Tokens of this etcd expire after one idle second.
    let (etcd, _) = start_etcd_with(&["--auth-token-ttl=1"]).await;
    etcdctl(&etcd.join, &["user", "add", "root:root-pw"]);
    etcdctl(&etcd.join, &["auth", "enable"]);
    let options = EtcdOptions {
        credentials: Some(Credentials {
            user: "root".into(),
            password: "root-pw".into(),
        }),
        ..Default::default()
    };
    let meta = Meta::connect(&etcd.join, &options).await.expect("connect");
    meta.client().put("/t/a", "1", 0).await.expect("first put");
    let idle = || tokio::time::sleep(Duration::from_millis(2500));

    idle().await;
    let got = meta.get("/t/a").await.expect("get after expiry");
    assert_eq!(got.map(|v| v.value), Some(b"1".to_vec()));

    idle().await;
    let lease = meta
        .client()
        .lease_grant(30)
        .await
        .expect("grant after expiry");
    idle().await;
    assert!(
        meta.client()
            .lease_keep_alive(lease)
            .await
            .expect("keep-alive")
            > 0
    );

    idle().await;
    let mut watch = meta
        .client()
        .watch("/t/w", 0)
        .await
        .expect("watch after expiry");
    meta.client().put("/t/w", "x", 0).await.expect("put");
    let event = tokio::time::timeout(Duration::from_secs(5), watch.message())
        .await
        .expect("an event in time")
        .expect("watch")
        .expect("open");
    assert_eq!(event.events.len(), 1);

    let anonymous = Meta::connect(&etcd.join, &Default::default())
        .await
        .expect("connect");
    let refused = anonymous.get("/t/a").await.expect_err("auth is on");
    assert!(
        refused.to_string().contains("give --etcd-user"),
        "{refused}"
    );
}
