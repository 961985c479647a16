//! Key-value calls: range (one key or a prefix), put, delete, and transactions guarded by
//! compares on a key's version or mod revision.

use sluice_proto::etcd::etcdserverpb::compare::{CompareResult, CompareTarget, TargetUnion};
use sluice_proto::etcd::etcdserverpb::request_op::Request;
use sluice_proto::etcd::etcdserverpb::{
    Compare, DeleteRangeRequest, PutRequest, RangeRequest, RangeResponse, RequestOp, TxnRequest,
    TxnResponse,
};

use super::client::EtcdClient;
use crate::error::Result;

impl EtcdClient {
    /// Reads `key`.
    pub async fn get(&self, key: impl Into<Vec<u8>>) -> Result<RangeResponse> {
        self.range(RangeRequest {
            key: key.into(),
            ..Default::default()
        })
        .await
    }

    /// Reads every key that starts with `prefix`.
    pub async fn get_prefix(&self, prefix: impl Into<Vec<u8>>) -> Result<RangeResponse> {
        let key = prefix.into();
        self.range(RangeRequest {
            range_end: prefix_end(&key),
            key,
            ..Default::default()
        })
        .await
    }

    async fn range(&self, request: RangeRequest) -> Result<RangeResponse> {
        self.call("range", || {
            let (mut kv, request) = (self.kv.clone(), request.clone());
            async move { kv.range(request).await.map(|r| r.into_inner()) }
        })
        .await
    }

    /// Writes `key`, attached to `lease` (0: no lease).
    pub async fn put(
        &self,
        key: impl Into<Vec<u8>>,
        value: impl Into<Vec<u8>>,
        lease: i64,
    ) -> Result<()> {
        let request = put_request(key, value, lease);
        self.call("put", || {
            let (mut kv, request) = (self.kv.clone(), request.clone());
            async move { kv.put(request).await.map(|_| ()) }
        })
        .await
    }

    /// Deletes `key` (nothing happens if it is absent).
    pub async fn delete(&self, key: impl Into<Vec<u8>>) -> Result<()> {
        let request = DeleteRangeRequest {
            key: key.into(),
            ..Default::default()
        };
        self.call("delete", || {
            let (mut kv, request) = (self.kv.clone(), request.clone());
            async move { kv.delete_range(request).await.map(|_| ()) }
        })
        .await
    }

    /// Applies `success` atomically if every compare holds (else nothing); the response says
    /// which happened and carries the store's revision after it.
    pub async fn txn(&self, compare: Vec<Compare>, success: Vec<RequestOp>) -> Result<TxnResponse> {
        self.txn_else(compare, success, Vec::new()).await
    }

    /// Applies `success` atomically if every compare holds, else `failure` (e.g. a read of
    /// what made a compare fail, in the same round trip); the response says which ran and
    /// carries their answers.
    pub async fn txn_else(
        &self,
        compare: Vec<Compare>,
        success: Vec<RequestOp>,
        failure: Vec<RequestOp>,
    ) -> Result<TxnResponse> {
        let request = TxnRequest {
            compare,
            success,
            failure,
        };
        self.call("txn", || {
            let (mut kv, request) = (self.kv.clone(), request.clone());
            async move { kv.txn(request).await.map(|r| r.into_inner()) }
        })
        .await
    }
}

/// A compare that holds while `key`'s version is `version` (0: the key is absent).
pub fn version_is(key: impl Into<Vec<u8>>, version: i64) -> Compare {
    Compare {
        result: CompareResult::Equal as i32,
        target: CompareTarget::Version as i32,
        key: key.into(),
        target_union: Some(TargetUnion::Version(version)),
        range_end: Vec::new(),
    }
}

/// A compare that holds while `key` was last changed at `revision`.
pub fn mod_revision_is(key: impl Into<Vec<u8>>, revision: i64) -> Compare {
    Compare {
        result: CompareResult::Equal as i32,
        target: CompareTarget::Mod as i32,
        key: key.into(),
        target_union: Some(TargetUnion::ModRevision(revision)),
        range_end: Vec::new(),
    }
}

/// Compare: `key`'s create revision equals `revision` (0: the key is absent).
pub fn create_revision_is(key: impl Into<Vec<u8>>, revision: i64) -> Compare {
    Compare {
        result: CompareResult::Equal as i32,
        target: CompareTarget::Create as i32,
        key: key.into(),
        target_union: Some(TargetUnion::CreateRevision(revision)),
        range_end: Vec::new(),
    }
}

/// Txn operation: put `key` = `value` attached to `lease` (0: none).
pub fn put_leased_op(key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>, lease: i64) -> RequestOp {
    RequestOp {
        request: Some(Request::RequestPut(put_request(key, value, lease))),
    }
}

/// A put of `key` (no lease) as a transaction step.
pub fn put_op(key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> RequestOp {
    RequestOp {
        request: Some(Request::RequestPut(put_request(key, value, 0))),
    }
}

/// Txn operation: read `key`.
pub fn get_op(key: impl Into<Vec<u8>>) -> RequestOp {
    RequestOp {
        request: Some(Request::RequestRange(RangeRequest {
            key: key.into(),
            ..Default::default()
        })),
    }
}

/// Txn operation: delete `key` (nothing if it is absent).
pub fn delete_op(key: impl Into<Vec<u8>>) -> RequestOp {
    RequestOp {
        request: Some(Request::RequestDeleteRange(DeleteRangeRequest {
            key: key.into(),
            ..Default::default()
        })),
    }
}

fn put_request(key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>, lease: i64) -> PutRequest {
    PutRequest {
        key: key.into(),
        value: value.into(),
        lease,
        ..Default::default()
    }
}

/// The end of the range of keys that start with `prefix`: the prefix with its last byte
/// below 0xff raised by one (trailing 0xff bytes dropped); `[0]` (every key) if there is none.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_range_ends_after_the_last_key_with_that_prefix() {
        assert_eq!(prefix_end(b"/sluice/pods/"), b"/sluice/pods0".to_vec());
        assert_eq!(prefix_end(b"a\xff"), b"b".to_vec());
        assert_eq!(prefix_end(b"\xff\xff"), vec![0]);
        assert_eq!(prefix_end(b""), vec![0]);
    }

    #[test]
    fn compares_name_the_target_they_hold_on() {
        let absent = version_is("k", 0);
        assert_eq!(absent.target(), CompareTarget::Version);
        assert_eq!(absent.target_union, Some(TargetUnion::Version(0)));
        let unchanged = mod_revision_is("k", 7);
        assert_eq!(unchanged.target(), CompareTarget::Mod);
        assert_eq!(unchanged.result(), CompareResult::Equal);
        assert_eq!(unchanged.target_union, Some(TargetUnion::ModRevision(7)));
    }
}
