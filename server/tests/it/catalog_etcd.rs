//! The catalog kept in a real etcd, as two pods see it: two `Catalog`s over two `EtcdStore`s.
//!
//! Contract under test: a change made through one is seen by the other, and changes made
//! through both at the same time are all kept (compare-and-swap retries; no lost update).

use std::sync::Arc;
use std::time::Duration;

use sluice_server::catalog::{Catalog, EtcdStore, PrincipalEntry, TableEntry};

use crate::cluster_harness::Etcd;

fn principal(id: &str) -> PrincipalEntry {
    PrincipalEntry {
        client_id: id.into(),
        name: id.into(),
        salt: "00".into(),
        secret_hash: "00".into(),
        admin: false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_pods_sharing_the_etcd_catalog_see_each_others_changes_and_lose_none() {
    let dir = tempfile::tempdir().expect("tempdir");
    let etcd = Etcd::start(dir.path()).await;
    let join = etcd.join.clone();
    let open = |join: String| {
        tokio::task::spawn_blocking(move || {
            Catalog::with_store(Box::new(
                EtcdStore::connect(&join, Default::default()).expect("connect"),
            ))
            .expect("catalog")
        })
    };
    let a = Arc::new(open(join.clone()).await.expect("pod a"));
    let b = Arc::new(open(join.clone()).await.expect("pod b"));

    a.create_table(TableEntry::new(
        "main.s.t",
        "id BIGINT",
        "file:///tmp/t",
        "1",
        0,
    ))
    .expect("create");
    // B learns of the change through its watch (or at the latest on its next conditional write).
    let mut seen = false;
    for _ in 0..100 {
        if b.table("main.s.t").expect("read").is_some() {
            seen = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(seen, "pod b never saw the table created through pod a");

    let writers: Vec<_> = [("a", a.clone()), ("b", b.clone())]
        .into_iter()
        .map(|(name, catalog)| {
            tokio::task::spawn_blocking(move || {
                for i in 0..20 {
                    catalog
                        .add_principal(principal(&format!("{name}-{i}")))
                        .expect("add principal");
                }
            })
        })
        .collect();
    for w in writers {
        w.await.expect("writer");
    }
    let fresh = open(join).await.expect("pod c");
    let ids: Vec<String> = fresh
        .principals()
        .expect("principals")
        .into_iter()
        .map(|p| p.client_id)
        .collect();
    assert_eq!(ids.len(), 40, "every concurrent change kept: {ids:?}");
    assert!(fresh.table("main.s.t").expect("read").is_some());
}
