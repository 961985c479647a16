//! Benchmarks of Sluice: each binary under `src/bin` runs one scenario and
//! prints a table. This library holds what they share: percentiles and table
//! printing.

pub mod stats;
pub mod table;
