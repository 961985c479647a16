//! The prost structs generated from `proto/zeroparser_bench.proto` (build.rs), and their
//! `Touch` impls, which read every field once.

#![allow(clippy::all, missing_docs)]

use std::collections::HashMap;

use crate::touch::Touch;

include!(concat!(env!("OUT_DIR"), "/sluice.bench.rs"));
include!(concat!(env!("OUT_DIR"), "/touch_impls.rs"));

impl<K: Touch, V: Touch> Touch for HashMap<K, V> {
    fn touch(&self) -> u64 {
        self.iter().fold(0u64, |h, (k, v)| {
            h.wrapping_add(k.touch()).wrapping_add(v.touch())
        })
    }
}
