//! `webpki-roots` 1.0.11 as asked for by the official Rust SDK 3.0.0: every public item of the
//! real `webpki-roots` 1.0.10 (Mozilla's CA roots), re-exported unchanged.
#![no_std]

pub use webpki_roots_real::*;
