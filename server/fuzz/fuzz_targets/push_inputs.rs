//! The on-disk inputs of Sluice's own producer tools, compiled here as they are: the
//! readers of `sluice push` (`server/src/cli/push_input.rs`: JSON lines, CSV, Parquet,
//! Avro object container files) and a persistent stream's state file with its batch plan
//! (`sdk/src/state_file.rs`, `sdk/src/plan.rs`). The first byte picks the reader, the rest
//! is the file; any bytes must give records or reasons — never panic. A state file that
//! parses must give a plan that places every request from its base on without panicking.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../src/cli/push_input.rs"]
#[allow(dead_code)]
mod push_input;

/// The SDK's error type, as far as `state_file.rs` uses it.
#[allow(dead_code)]
mod error {
    #[derive(Debug)]
    pub enum SdkError {
        State { path: String, message: String },
    }
    pub type Result<T, E = SdkError> = std::result::Result<T, E>;
}

#[path = "../../../sdk/src/plan.rs"]
#[allow(dead_code)]
mod plan;

#[path = "../../../sdk/src/state_file.rs"]
#[allow(dead_code)]
mod state_file;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, file)) = data.split_first() else {
        return;
    };
    use push_input::InputFormat;
    let format = match pick % 5 {
        0 => {
            if let Ok(state) = state_file::parse(file) {
                if let Ok(plan) = state.plan() {
                    let base = plan.base().wire;
                    for wire in base..base.saturating_add(64) {
                        let _ = plan.last_seq_of(wire);
                    }
                }
            }
            return;
        }
        1 => InputFormat::Jsonl,
        2 => InputFormat::Csv,
        3 => InputFormat::Parquet,
        _ => InputFormat::Avro,
    };
    let reader = Box::new(std::io::Cursor::new(file.to_vec()));
    if let Ok(input) = push_input::read(reader, format, Some(file.len() as u64)) {
        for _ in input.items.take(10_000) {}
    }
});
