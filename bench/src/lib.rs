//! Benchmarks of Sluice: each binary under `src/bin` runs one scenario and
//! prints a table. This library holds what they share: percentiles and table
//! printing, and (feature `e2e`) a `sluice serve` process to drive.

#[cfg(feature = "e2e")]
pub mod server;
pub mod stats;
pub mod table;
