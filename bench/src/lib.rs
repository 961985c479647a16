//! Benchmarks of Sluice: each binary under `src/bin` runs one scenario and
//! prints a table. This library holds what they share: percentiles and table
//! printing, single-thread throughput contests (`contest`), the host's description
//! (`host`), and (feature `e2e`)
//! the helpers of the end-to-end runs, a `sluice serve` process to drive, other
//! processes' CPU from /proc (`procstat`) and per-row freshness read from a Delta
//! log (`freshness`).

pub mod contest;
#[cfg(feature = "e2e")]
pub mod e2e;
#[cfg(feature = "e2e")]
pub mod freshness;
pub mod host;
#[cfg(feature = "e2e")]
pub mod procstat;
#[cfg(feature = "e2e")]
pub mod server;
pub mod stats;
pub mod table;
