//! A Kafka client's bytes as the pod's Kafka listener reads them: one request frame
//! (header and body of the APIs served) and, for a Produce, each partition's record batch
//! with its records decompressed by Sluice's bounded readers. `server/src/kafka/decode.rs`
//! (with `bounds.rs`) is compiled here as is. The first byte picks the entry (a whole request, or a bare
//! record batch), the rest is the input; nothing may panic, a batch never inflates past
//! the limit, and a decoded batch holds no more records than its bytes can carry.

#![no_main]

use bytes::Bytes;
use kafka_protocol::messages::RequestKind;
use libfuzzer_sys::fuzz_target;

#[path = "../../src/kafka/bounds.rs"]
#[allow(dead_code)]
mod bounds;
#[path = "../../src/kafka/decode.rs"]
#[allow(dead_code)]
mod decode;
/// The versions the pod serves: its own table, so the target decodes what the pod decodes.
#[path = "../../src/kafka/versions.rs"]
#[allow(dead_code)]
mod versions;

const LIMIT: usize = 1 << 20;

fn check_batch(data: Bytes) {
    let len = data.len();
    if let Ok(batch) = decode::decode_batch(data, LIMIT) {
        let inflated: usize = batch
            .records
            .iter()
            .map(|r| r.value.as_ref().map_or(0, |v| v.len()) + r.key.as_ref().map_or(0, |k| k.len()))
            .sum();
        assert!(inflated <= LIMIT);
        assert!(batch.records.len() * decode::MIN_RECORD_BYTES <= LIMIT.max(len));
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let input = Bytes::copy_from_slice(rest);
    if mode % 2 == 1 {
        check_batch(input);
        return;
    }
    if let Ok(request) = decode::decode_request(input, versions::served) {
        if let Some(RequestKind::Produce(produce)) = request.body {
            for topic in produce.topic_data {
                for partition in topic.partition_data {
                    if let Some(records) = partition.records {
                        check_batch(records);
                    }
                }
            }
        }
    }
});
