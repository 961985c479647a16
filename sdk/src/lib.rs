//! Sluice's own Rust producer client (in-flight buffer, ack loop, reconnect). Until it exists, producers use the official Zerobus SDKs.
