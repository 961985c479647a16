//! The meta store: a thin, typed layer over etcd. Key layout (all under `/sluice/`):
//!
//! | key | value | lifetime |
//! |---|---|---|
//! | `pods/<id>` | [`PodRecord`] JSON, rewritten every second | the pod's lease (dies with the pod) |
//! | `drain/<id>` | empty; present = "drain this pod" | until the pod starts again |
//! | `catalog` | the whole catalog (tables, principals, grants, keys) as JSON | permanent |
//!
//! The catalog is one key so that every change is one compare-and-swap on its mod revision:
//! pods never see half a change, and two pods creating tables at once cannot lose one.

use etcd_client::{Client, Compare, CompareOp, GetOptions, PutOptions, Txn, TxnOp, WatchOptions};

use crate::error::{Result, RouterError};
use crate::pod_record::PodRecord;

/// Key prefix of pod records.
pub const PODS_PREFIX: &str = "/sluice/pods/";
/// Key prefix of drain requests.
pub const DRAIN_PREFIX: &str = "/sluice/drain/";
/// Key of the shared catalog.
pub const CATALOG_KEY: &str = "/sluice/catalog";

/// A value and the etcd revision that last changed it.
#[derive(Clone, Debug)]
pub struct Versioned {
    /// Raw value.
    pub value: Vec<u8>,
    /// Its mod revision (> 0).
    pub revision: i64,
}

/// A connection to the meta store. Cheap to clone (one HTTP/2 channel underneath).
#[derive(Clone)]
pub struct Meta {
    client: Client,
}

/// Parses `etcd://HOST:PORT[,HOST:PORT…]` into the endpoints the client dials.
pub fn parse_join_url(url: &str) -> Result<Vec<String>> {
    let bad = |reason: &str| RouterError::BadUrl {
        url: url.to_string(),
        reason: reason.to_string(),
    };
    let rest = url
        .strip_prefix("etcd://")
        .ok_or_else(|| bad("expected etcd://HOST:PORT"))?;
    let endpoints: Vec<String> = rest
        .trim_end_matches('/')
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|hp| format!("http://{hp}"))
        .collect();
    if endpoints.is_empty() {
        return Err(bad("no HOST:PORT"));
    }
    Ok(endpoints)
}

impl Meta {
    /// Connects to the etcd cluster named by `etcd://HOST:PORT[,…]`.
    pub async fn connect(join_url: &str) -> Result<Meta> {
        let endpoints = parse_join_url(join_url)?;
        let options = etcd_client::ConnectOptions::new()
            .with_connect_timeout(std::time::Duration::from_secs(5))
            .with_timeout(std::time::Duration::from_secs(5));
        let client = Client::connect(endpoints, Some(options)).await?;
        Ok(Meta { client })
    }

    /// The underlying etcd client (for leases and watches owned by other modules).
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// Every registered pod, ordered by id. Records that do not decode are skipped (and
    /// logged): one bad writer must not hide the others.
    pub async fn pods(&self) -> Result<Vec<PodRecord>> {
        let mut client = self.client.clone();
        let resp = client
            .get(PODS_PREFIX, Some(GetOptions::new().with_prefix()))
            .await?;
        let mut pods = Vec::with_capacity(resp.kvs().len());
        for kv in resp.kvs() {
            match serde_json::from_slice::<PodRecord>(kv.value()) {
                Ok(p) => pods.push(p),
                Err(e) => {
                    tracing::warn!(key = ?String::from_utf8_lossy(kv.key()), "undecodable pod record: {e}")
                }
            }
        }
        pods.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(pods)
    }

    /// Writes a pod's record under `lease`.
    pub async fn put_pod(&self, record: &PodRecord, lease: i64) -> Result<()> {
        let value = serde_json::to_vec(record).map_err(|e| RouterError::Decode {
            key: format!("{PODS_PREFIX}{}", record.id),
            reason: e.to_string(),
        })?;
        let mut client = self.client.clone();
        client
            .put(
                format!("{PODS_PREFIX}{}", record.id),
                value,
                Some(PutOptions::new().with_lease(lease)),
            )
            .await?;
        Ok(())
    }

    /// Asks pod `id` to drain; fails if no such pod is registered.
    pub async fn request_drain(&self, id: &str) -> Result<()> {
        if !self.pods().await?.iter().any(|p| p.id == id) {
            return Err(RouterError::UnknownPod(id.to_string()));
        }
        let mut client = self.client.clone();
        client.put(format!("{DRAIN_PREFIX}{id}"), "", None).await?;
        Ok(())
    }

    /// Forgets an earlier drain request for `id` (a pod does this when it starts).
    pub async fn clear_drain(&self, id: &str) -> Result<()> {
        let mut client = self.client.clone();
        client.delete(format!("{DRAIN_PREFIX}{id}"), None).await?;
        Ok(())
    }

    /// Resolves when a drain of `id` is requested (at once if it already is).
    pub async fn drain_requested(&self, id: &str) -> Result<()> {
        let key = format!("{DRAIN_PREFIX}{id}");
        let mut client = self.client.clone();
        let resp = client.get(key.as_str(), None).await?;
        if !resp.kvs().is_empty() {
            return Ok(());
        }
        let start = resp.header().map(|h| h.revision() + 1).unwrap_or(0);
        let mut stream = client
            .watch(
                key.as_str(),
                Some(WatchOptions::new().with_start_revision(start)),
            )
            .await?;
        while let Some(msg) = stream.message().await? {
            if msg
                .events()
                .iter()
                .any(|e| e.event_type() == etcd_client::EventType::Put)
            {
                return Ok(());
            }
        }
        Err(RouterError::Decode {
            key,
            reason: "watch ended".into(),
        })
    }

    /// Reads `key`, with its mod revision.
    pub async fn get(&self, key: &str) -> Result<Option<Versioned>> {
        let mut client = self.client.clone();
        let resp = client.get(key, None).await?;
        Ok(resp.kvs().first().map(|kv| Versioned {
            value: kv.value().to_vec(),
            revision: kv.mod_revision(),
        }))
    }

    /// Writes `key` only if its mod revision is still `expected` (0: only if absent).
    /// Returns the new revision, or `None` when someone else changed it first.
    pub async fn compare_and_put(
        &self,
        key: &str,
        expected: i64,
        value: Vec<u8>,
    ) -> Result<Option<i64>> {
        let guard = if expected == 0 {
            Compare::version(key, CompareOp::Equal, 0)
        } else {
            Compare::mod_revision(key, CompareOp::Equal, expected)
        };
        let txn = Txn::new()
            .when([guard])
            .and_then([TxnOp::put(key, value, None)]);
        let mut client = self.client.clone();
        let resp = client.txn(txn).await?;
        if !resp.succeeded() {
            return Ok(None);
        }
        Ok(resp.header().map(|h| h.revision()))
    }

    /// Watches `key` and calls `on_change(mod_revision)` on every put, until the watch fails.
    pub async fn watch_revisions(&self, key: &str, mut on_change: impl FnMut(i64)) -> Result<()> {
        let mut client = self.client.clone();
        let mut stream = client.watch(key, None).await?;
        while let Some(msg) = stream.message().await? {
            for event in msg.events() {
                if let Some(kv) = event.kv() {
                    on_change(kv.mod_revision());
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_urls_name_one_or_more_endpoints() {
        assert_eq!(
            parse_join_url("etcd://127.0.0.1:2379").ok(),
            Some(vec!["http://127.0.0.1:2379".to_string()])
        );
        assert_eq!(
            parse_join_url("etcd://a:1,b:2/").ok(),
            Some(vec!["http://a:1".to_string(), "http://b:2".to_string()])
        );
        assert!(parse_join_url("http://a:1").is_err());
        assert!(parse_join_url("etcd://").is_err());
    }
}
