//! Benchmarks of Sluice: each binary under `src/bin` runs one scenario and
//! prints a table. This library holds what they share: percentiles and table
//! printing, and (feature `e2e`) the helpers of the end-to-end runs and a
//! `sluice serve` process to drive.

#[cfg(feature = "e2e")]
pub mod e2e;
#[cfg(feature = "e2e")]
pub mod server;
pub mod stats;
pub mod table;
