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

use crate::error::{Result, RouterError};
use crate::etcd::kv::{mod_revision_is, put_op, version_is};
use crate::etcd::{EtcdClient, EtcdOptions};
use crate::pod_record::PodRecord;
use sluice_proto::etcd::mvccpb::event::EventType;

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
    client: EtcdClient,
}

/// Parses `etcd://HOST:PORT[,HOST:PORT…]` (plain text) or `etcds://HOST:PORT[,…]` (TLS)
/// into the endpoints the client dials (`http://…` or `https://…`).
pub fn parse_join_url(url: &str) -> Result<Vec<String>> {
    let bad = |reason: &str| RouterError::BadUrl {
        url: url.to_string(),
        reason: reason.to_string(),
    };
    let (scheme, rest) = if let Some(rest) = url.strip_prefix("etcds://") {
        ("https", rest)
    } else if let Some(rest) = url.strip_prefix("etcd://") {
        ("http", rest)
    } else {
        return Err(bad("expected etcd://HOST:PORT (or etcds:// for TLS)"));
    };
    let endpoints: Vec<String> = rest
        .trim_end_matches('/')
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|hp| format!("{scheme}://{hp}"))
        .collect();
    if endpoints.is_empty() {
        return Err(bad("no HOST:PORT"));
    }
    Ok(endpoints)
}

impl Meta {
    /// Connects to the etcd cluster named by `etcd://HOST:PORT[,…]` (`etcds://` for TLS)
    /// with `options` (TLS material, credentials). TLS material with a plain `etcd://` URL
    /// is refused rather than silently unused.
    pub async fn connect(join_url: &str, options: &EtcdOptions) -> Result<Meta> {
        let endpoints = parse_join_url(join_url)?;
        if options.tls.is_set() && !join_url.starts_with("etcds://") {
            return Err(RouterError::Tls(format!(
                "a CA or client certificate is given but {join_url} is plain text; \
                 use etcds://HOST:PORT for TLS"
            )));
        }
        let client = EtcdClient::connect(&endpoints, options)?;
        Ok(Meta { client })
    }

    /// The underlying etcd client (for leases owned by other modules).
    pub fn client(&self) -> &EtcdClient {
        &self.client
    }

    /// Every registered pod, ordered by id. Records that do not decode are skipped (and
    /// logged): one bad writer must not hide the others.
    pub async fn pods(&self) -> Result<Vec<PodRecord>> {
        let resp = self.client.get_prefix(PODS_PREFIX).await?;
        let mut pods = Vec::with_capacity(resp.kvs.len());
        for kv in &resp.kvs {
            match serde_json::from_slice::<PodRecord>(&kv.value) {
                Ok(p) => pods.push(p),
                Err(e) => {
                    tracing::warn!(key = ?String::from_utf8_lossy(&kv.key), "undecodable pod record: {e}")
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
        self.client
            .put(format!("{PODS_PREFIX}{}", record.id), value, lease)
            .await
    }

    /// Asks pod `id` to drain on behalf of `requested_by` (who the pod's audit trail names);
    /// fails if no such pod is registered.
    pub async fn request_drain(&self, id: &str, requested_by: &str) -> Result<()> {
        if !self.pods().await?.iter().any(|p| p.id == id) {
            return Err(RouterError::UnknownPod(id.to_string()));
        }
        self.client
            .put(format!("{DRAIN_PREFIX}{id}"), requested_by, 0)
            .await
    }

    /// Forgets an earlier drain request for `id` (a pod does this when it starts).
    pub async fn clear_drain(&self, id: &str) -> Result<()> {
        self.client.delete(format!("{DRAIN_PREFIX}{id}")).await
    }

    /// Resolves when a drain of `id` is requested (at once if it already is), with who
    /// requested it (empty if the request did not say).
    pub async fn drain_requested(&self, id: &str) -> Result<String> {
        let key = format!("{DRAIN_PREFIX}{id}");
        let resp = self.client.get(key.as_str()).await?;
        if let Some(kv) = resp.kvs.first() {
            return Ok(String::from_utf8_lossy(&kv.value).into_owned());
        }
        let start = resp.header.map(|h| h.revision + 1).unwrap_or(0);
        let mut stream = self.client.watch(&key, start).await?;
        while let Some(msg) = stream.message().await? {
            let put = msg.events.iter().find(|e| e.r#type() == EventType::Put);
            if let Some(event) = put {
                let by = event
                    .kv
                    .as_ref()
                    .map(|kv| kv.value.as_slice())
                    .unwrap_or_default();
                return Ok(String::from_utf8_lossy(by).into_owned());
            }
        }
        Err(RouterError::Watch {
            key,
            reason: "etcd closed the watch".into(),
        })
    }

    /// Reads `key`, with its mod revision.
    pub async fn get(&self, key: &str) -> Result<Option<Versioned>> {
        let resp = self.client.get(key).await?;
        Ok(resp.kvs.into_iter().next().map(|kv| Versioned {
            value: kv.value,
            revision: kv.mod_revision,
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
            version_is(key, 0)
        } else {
            mod_revision_is(key, expected)
        };
        let resp = self
            .client
            .txn(vec![guard], vec![put_op(key, value)])
            .await?;
        if !resp.succeeded {
            return Ok(None);
        }
        Ok(resp.header.map(|h| h.revision))
    }

    /// Watches `key` and calls `on_change(mod_revision)` on every put, until the watch fails.
    pub async fn watch_revisions(&self, key: &str, mut on_change: impl FnMut(i64)) -> Result<()> {
        let mut stream = self.client.watch(key, 0).await?;
        while let Some(msg) = stream.message().await? {
            for event in &msg.events {
                if let Some(kv) = &event.kv {
                    on_change(kv.mod_revision);
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
        assert_eq!(
            parse_join_url("etcds://a:1,b:2").ok(),
            Some(vec!["https://a:1".to_string(), "https://b:2".to_string()])
        );
        assert!(parse_join_url("http://a:1").is_err());
        assert!(parse_join_url("etcd://").is_err());
    }
}
