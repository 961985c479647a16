//! Raw gRPC refusals of the internal `sluice.cluster.v1.Committer/HandOff` (real etcd,
//! two pods, a router): no token, a user token, a peer token naming another pod, a pod
//! that is not the committer or a stale epoch, a duplicate hand-off (answered covered, the
//! rows once), a file that is not in the store (NOT_FOUND), a user-facing API refusing a
//! peer token (403), and the router refusing to relay (UNIMPLEMENTED).

use std::sync::Arc;
use std::time::Duration;

use arrow_array::{Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use sluice_proto::cluster::committer_client::CommitterClient;
use sluice_proto::cluster::HandOffRequest;
use sluice_server::auth::{Kek, TokenSigner};
use sluice_server::catalog::{Catalog, EtcdStore};
use sluice_server::cluster::peer_auth::peer_token;
use tonic::Code;

use crate::cluster_harness::{wait_for_pods, Etcd, Router};
use crate::elect_harness::{start_pod, wait_for_committer};
use crate::harness::{admin_json_stream, read_delta, CLUSTER_KEK};

const TABLE: &str = "main.elect.raw";

/// A peer token for `pod`, signed with the cluster's key (read from the catalog in etcd,
/// opened with the cluster's KEK) — what a pod presents.
async fn peer(join: &str, pod: &str) -> String {
    let join = join.to_string();
    let pod = pod.to_string();
    tokio::task::spawn_blocking(move || {
        let store = EtcdStore::connect(&join, Default::default()).expect("catalog store");
        let catalog = Catalog::with_store(Box::new(store)).expect("catalog");
        let kek = Kek::from_base64(CLUSTER_KEK, "test KEK").expect("kek");
        let signer =
            TokenSigner::load_or_create(&catalog, Duration::from_secs(60), kek).expect("signer");
        peer_token(&signer, &pod).expect("peer token")
    })
    .await
    .expect("peer token task")
}

async fn client(addr: &str) -> CommitterClient<tonic::transport::Channel> {
    CommitterClient::connect(addr.to_string())
        .await
        .expect("connect")
}

fn request(handoff: &HandOffRequest, token: Option<&str>) -> tonic::Request<HandOffRequest> {
    let mut r = tonic::Request::new(handoff.clone());
    if let Some(t) = token {
        r.metadata_mut().insert(
            "authorization",
            format!("Bearer {t}").parse().expect("header"),
        );
    }
    r
}

/// A hand-off from WAL `wal` of pod `pod` naming `adds`.
fn handoff(pod: &str, wal: &str, adds: Vec<String>, epoch: u64) -> HandOffRequest {
    HandOffRequest {
        table: TABLE.to_string(),
        pod_id: pod.to_string(),
        wal_id: wal.to_string(),
        from_lsn: 0,
        to_lsn: 10,
        adds_json: adds,
        streams: Vec::new(),
        epoch,
        schema_id: String::new(),
    }
}

/// Writes one Parquet file of `ids` into the table; returns its Add action's JSON.
async fn parquet_add(location: &str, ids: Vec<i64>) -> String {
    let table = deltalake::open_table(url::Url::parse(location).expect("url"))
        .await
        .expect("open table");
    let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
    let batch = RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(ids))]).expect("batch");
    let adds = sluice_server::sink::write_files(&table, [Ok(batch)])
        .await
        .expect("write parquet");
    serde_json::to_string(&adds[0]).expect("add json")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hand_off_refusals_over_raw_grpc() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    let warehouse = root.join("warehouse");
    let etcd = Etcd::start(&root.join("etcd")).await;
    let pods = [
        start_pod(root, "pod-0", &etcd.join, &warehouse).await,
        start_pod(root, "pod-1", &etcd.join, &warehouse).await,
    ];
    wait_for_pods(&etcd.join, Duration::from_secs(10), "2 pods", |p| {
        p.len() == 2
    })
    .await;
    pods[0].create_table(TABLE, "id BIGINT NOT NULL");
    let location = pods[0].table_info(TABLE).await["storage_location"]
        .as_str()
        .expect("location")
        .to_string();
    // One record makes a committer (elected on the table's first hand-off).
    let mut stream = admin_json_stream(&pods[0].sdk(), TABLE).await;
    stream
        .ingest_record_offset(databricks_zerobus_ingest_sdk::JsonString(
            r#"{"id": 1}"#.to_string(),
        ))
        .await
        .expect("ingest");
    stream.flush().await.expect("flush");
    stream.close().await.expect("close");
    let (holder, holder_addr, epoch) =
        wait_for_committer(&etcd.join, TABLE, Duration::from_secs(20), |_| true).await;
    let other = pods
        .iter()
        .find(|p| !p.data_dir.ends_with(&holder))
        .expect("a pod that is not the committer");
    let token = peer(&etcd.join, "tester").await;
    let add = parquet_add(&location, vec![100, 101, 102]).await;
    let good = handoff("tester", "raw-wal", vec![add.clone()], epoch);
    let mut committer = client(&holder_addr).await;

    // No token; a user token; a peer token handing off for another pod.
    let none = committer
        .hand_off(request(&good, None))
        .await
        .expect_err("no token");
    assert_eq!(none.code(), Code::Unauthenticated, "{none:?}");
    let user = pods[0].token().await;
    let denied = committer
        .hand_off(request(&good, Some(&user)))
        .await
        .expect_err("user token");
    assert_eq!(denied.code(), Code::PermissionDenied, "{denied:?}");
    let impostor = handoff("pod-0", "raw-wal", vec![add.clone()], epoch);
    let denied = committer
        .hand_off(request(&impostor, Some(&token)))
        .await
        .expect_err("another pod's hand-off");
    assert_eq!(denied.code(), Code::PermissionDenied, "{denied:?}");

    // Not the committer: the pod that is not, and the committer asked with a stale epoch.
    let mut not_committer = client(&other.url).await;
    let refused = not_committer
        .hand_off(request(
            &handoff("tester", "raw-wal", vec![add.clone()], 0),
            Some(&token),
        ))
        .await
        .expect_err("not the committer");
    assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
    assert!(
        refused.message().contains(&holder),
        "names the holder: {refused:?}"
    );
    let stale = committer
        .hand_off(request(
            &handoff("tester", "raw-wal", vec![add.clone()], epoch - 1),
            Some(&token),
        ))
        .await
        .expect_err("stale epoch");
    assert_eq!(stale.code(), Code::FailedPrecondition, "{stale:?}");

    // A hand-off commits once; sent again it is answered covered.
    let first = committer
        .hand_off(request(&good, Some(&token)))
        .await
        .expect("hand-off")
        .into_inner();
    assert!(!first.covered);
    assert_eq!(first.epoch, epoch);
    let again = committer
        .hand_off(request(&good, Some(&token)))
        .await
        .expect("duplicate hand-off")
        .into_inner();
    assert!(again.covered, "a duplicate is answered covered: {again:?}");
    assert!(again.version >= first.version);

    // A file that is not in the store.
    let mut missing: serde_json::Value = serde_json::from_str(&add).expect("add json");
    missing["path"] = "not-there.parquet".into();
    let gone = handoff("tester", "raw-wal-2", vec![missing.to_string()], epoch);
    let refused = committer
        .hand_off(request(&gone, Some(&token)))
        .await
        .expect_err("missing file");
    assert_eq!(refused.code(), Code::NotFound, "{refused:?}");
    assert!(
        refused.message().contains("not-there.parquet"),
        "{refused:?}"
    );

    // Files written under another schema than the table's (an alter committed since).
    let mut outdated = handoff("tester", "raw-wal-3", vec![add.clone()], epoch);
    outdated.schema_id = "00000000000000000000000000000000".into();
    let refused = committer
        .hand_off(request(&outdated, Some(&token)))
        .await
        .expect_err("outdated schema");
    assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
    assert_eq!(
        refused
            .metadata()
            .get("sluice-refusal")
            .and_then(|v| v.to_str().ok()),
        Some("stale-schema"),
        "{refused:?}"
    );
    assert!(
        refused.message().contains("written under schema 0000"),
        "{refused:?}"
    );

    let ids: Vec<i64> = crate::rows::rows_as_json(&read_delta(&location).await)
        .iter()
        .map(|r| r["id"].as_i64().expect("id"))
        .collect();
    for id in [100, 101, 102] {
        assert_eq!(
            ids.iter().filter(|i| **i == id).count(),
            1,
            "id {id} once: {ids:?}"
        );
    }

    // User-facing gates refuse a peer token.
    let api = reqwest::Client::new()
        .get(format!(
            "{}/api/2.1/unity-catalog/tables/{TABLE}",
            pods[0].url
        ))
        .bearer_auth(&token)
        .send()
        .await
        .expect("tables API");
    assert_eq!(api.status(), reqwest::StatusCode::FORBIDDEN);
    assert!(api.text().await.expect("body").contains("peer token"));

    // The router never relays the internal service.
    let router = Router::start(&root.join("router"), &etcd.join).await;
    let relayed = client(&router.url)
        .await
        .hand_off(request(&good, Some(&token)))
        .await
        .expect_err("through the router");
    assert_eq!(relayed.code(), Code::Unimplemented, "{relayed:?}");
    drop(pods);
    drop(etcd);
}
