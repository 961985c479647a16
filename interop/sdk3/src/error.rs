//! The one error type of the interop harness.

/// Why starting, driving or reading Sluice failed.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// A process or file operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// `sluice serve` exited or never answered `/healthz`.
    #[error("sluice serve did not come up: {reason}\n--- server log ---\n{log}")]
    ServerStart {
        /// What was seen.
        reason: String,
        /// The server's log so far.
        log: String,
    },
    /// A `sluice` CLI command exited with an error.
    #[error("`sluice {args}` failed: {stderr}")]
    Cli {
        /// The CLI arguments.
        args: String,
        /// Its standard error.
        stderr: String,
    },
    /// The Python reader failed or printed something unexpected.
    #[error("python delta reader: {0}")]
    Reader(String),
    /// The official SDK refused to build a client.
    #[error("sdk: {0}")]
    Sdk(#[from] databricks_zerobus_ingest_sdk::ZerobusError),
}

impl HarnessError {
    /// An [`HarnessError::Io`] saying what was being done.
    pub fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> HarnessError {
        let what = what.into();
        move |source| HarnessError::Io { what, source }
    }
}
