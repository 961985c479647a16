//! Benchmarks: load generators and comparisons against peers.
