//! S3 and S3-compatible warehouses (MinIO, moto, …) for deltalake without
//! its `s3` feature.
//!
//! deltalake's `deltalake-aws` crate would bring the AWS SDK (DynamoDB
//! locking, STS) into the build; Sluice needs none of it. Instead this module
//! registers, for `s3://` and `s3a://`, an object store built by
//! `object_store`'s own S3 client and deltalake's *default* log store. That
//! log store commits `_delta_log/<version>.json` with `PutMode::Create`,
//! which the S3 client sends as `If-None-Match: *` (conditional put
//! `etag`, set explicitly below): the store itself refuses the second writer
//! of a version, deltalake turns that into `VersionAlreadyExists` and retries
//! at the next version. No lock service, no unsafe rename.
//!
//! Settings: flags (`--s3-endpoint`, `--s3-region`, `--s3-access-key-id`,
//! `--s3-secret-access-key`, `--s3-allow-http`, each also read from the
//! standard `AWS_*` variable), then every other `AWS_*` variable
//! `object_store` knows (session token, virtual-hosted style, …).

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::{Arc, Once};

use deltalake::logstore::{
    default_logstore, logstore_factories, object_store_factories, LogStore, LogStoreFactory,
    ObjectStoreFactory, ObjectStoreRef, StorageConfig,
};
use deltalake::{DeltaResult, DeltaTableError};
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey, S3ConditionalPut};
use object_store::path::Path;
use url::Url;

/// S3 settings of `sluice serve` (flags, or the standard AWS variables).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct S3Settings {
    /// S3 endpoint of an S3-compatible server, e.g. http://127.0.0.1:9000.
    #[arg(long = "s3-endpoint", env = "AWS_ENDPOINT_URL")]
    pub endpoint: Option<String>,
    /// S3 region.
    #[arg(long = "s3-region", env = "AWS_REGION")]
    pub region: Option<String>,
    /// S3 access key id.
    #[arg(long = "s3-access-key-id", env = "AWS_ACCESS_KEY_ID")]
    pub access_key_id: Option<String>,
    /// S3 secret access key.
    #[arg(
        long = "s3-secret-access-key",
        env = "AWS_SECRET_ACCESS_KEY",
        hide_env_values = true
    )]
    pub secret_access_key: Option<String>,
    /// Allow plain-HTTP endpoints (local S3-compatible servers).
    #[arg(long = "s3-allow-http", env = "AWS_ALLOW_HTTP")]
    pub allow_http: bool,
}

impl S3Settings {
    /// The settings as deltalake / object_store storage options (the keys
    /// Python `deltalake` and `polars` take too).
    pub fn storage_options(&self) -> HashMap<String, String> {
        let mut o = HashMap::new();
        let mut put = |k: &str, v: &Option<String>| {
            if let Some(v) = v.as_ref().filter(|v| !v.is_empty()) {
                o.insert(k.to_string(), v.clone());
            }
        };
        put("aws_endpoint", &self.endpoint);
        put("aws_region", &self.region);
        put("aws_access_key_id", &self.access_key_id);
        put("aws_secret_access_key", &self.secret_access_key);
        if self.allow_http {
            o.insert("aws_allow_http".into(), "true".into());
        }
        o.insert("aws_conditional_put".into(), "etag".into());
        o
    }
}

/// Registers the S3 object store and log store factories with deltalake
/// (once per process).
pub fn register() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for scheme in ["s3://", "s3a://"] {
            if let Ok(url) = Url::parse(scheme) {
                object_store_factories().insert(url.clone(), Arc::new(S3StoreFactory));
                logstore_factories().insert(url, Arc::new(PutIfAbsentLogStoreFactory));
            }
        }
    });
}

/// `object_store`'s S3 client for `url` (`s3://bucket/…`; the bucket is
/// taken from it, the path is not) configured by the `AWS_*` environment,
/// then by `options` (a warehouse's storage options), with conditional put
/// `etag`. Every Delta table on S3 uses it, and so does `sluice doctor`.
pub fn client_builder(url: &Url, options: &HashMap<String, String>) -> AmazonS3Builder {
    let mut builder = AmazonS3Builder::from_env().with_url(url.as_str());
    for (key, value) in options {
        if let Ok(key) = AmazonS3ConfigKey::from_str(&key.to_ascii_lowercase()) {
            builder = builder.with_config(key, value);
        }
    }
    // Put-if-absent is what makes concurrent Delta commits safe; never let
    // an option switch it off.
    builder.with_conditional_put(S3ConditionalPut::ETagMatch)
}

/// Builds `object_store`'s S3 client for a table URL.
struct S3StoreFactory;

impl ObjectStoreFactory for S3StoreFactory {
    fn parse_url_opts(
        &self,
        url: &Url,
        config: &StorageConfig,
    ) -> DeltaResult<(ObjectStoreRef, Path)> {
        let store = client_builder(url, &config.raw).build()?;
        let path = Path::from_url_path(url.path())
            .map_err(|e| DeltaTableError::InvalidTableLocation(format!("{url}: {e}")))?;
        Ok((Arc::new(store), path))
    }
}

/// deltalake's default log store: commits by put-if-absent.
struct PutIfAbsentLogStoreFactory;

impl LogStoreFactory for PutIfAbsentLogStoreFactory {
    fn with_options(
        &self,
        prefixed_store: ObjectStoreRef,
        root_store: ObjectStoreRef,
        location: &Url,
        options: &StorageConfig,
    ) -> DeltaResult<Arc<dyn LogStore>> {
        Ok(default_logstore(
            prefixed_store,
            root_store,
            location,
            options,
        ))
    }
}
