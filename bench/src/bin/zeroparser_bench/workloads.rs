//! The benchmark workloads: which message, how big its records are, and the compiled
//! per-decoder state (descriptor, official registry, Sluice plan and schema).

use prost_reflect::{DescriptorPool, MessageDescriptor};

use crate::generate::{records, Shape};

/// The descriptor set of `proto/zeroparser_bench.proto`, compiled by build.rs.
const DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/zeroparser_bench.bin"));

/// Which generated prost struct decodes the workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Message {
    AirQuality,
    AllTypes,
    WideRecord,
    NeowiseRow,
    TelemetryList,
    TelemetryNested,
    TelemetryMap,
}

impl Message {
    fn full_name(self) -> &'static str {
        match self {
            Message::AirQuality => "sluice.bench.AirQuality",
            Message::AllTypes => "sluice.bench.AllTypes",
            Message::WideRecord => "sluice.bench.WideRecord",
            Message::NeowiseRow => "sluice.bench.NeowiseRow",
            Message::TelemetryList => "sluice.bench.TelemetryList",
            Message::TelemetryNested => "sluice.bench.TelemetryNested",
            Message::TelemetryMap => "sluice.bench.TelemetryMap",
        }
    }
}

/// One workload: its records, all encoded up front.
pub struct Workload {
    pub name: &'static str,
    pub message: Message,
    pub descriptor: MessageDescriptor,
    pub records: Vec<Vec<u8>>,
}

impl Workload {
    pub fn bytes(&self) -> usize {
        self.records.iter().map(Vec::len).sum()
    }

    pub fn mean_record_bytes(&self) -> f64 {
        self.bytes() as f64 / self.records.len().max(1) as f64
    }
}

const NO_SHORT: &[&str] = &[];
const NEOWISE_SHORT: &[&str] = &["satnum", "cc_flags", "ph_qual", "moon_masked", "scan_id"];

/// All workloads, `count` records each.
pub fn all(count: usize) -> anyhow::Result<Vec<Workload>> {
    let pool = DescriptorPool::decode(DESCRIPTOR_SET)?;
    let shape = |string_len, list_len, int32_max| Shape {
        string_len,
        short_strings: NO_SHORT,
        list_len,
        element_len: 16,
        int32_max,
    };
    // Telemetry with nested columns: device name length, list length, element length.
    let telemetry = |string_len, list_len, element_len| Shape {
        string_len,
        short_strings: NO_SHORT,
        list_len,
        element_len,
        int32_max: 100,
    };
    let specs: [(&'static str, Message, Shape); 15] = [
        ("AirQuality ~32 B", Message::AirQuality, shape(22, 0, 100)),
        ("AirQuality ~200 B", Message::AirQuality, shape(190, 0, 100)),
        ("AirQuality ~1 KB", Message::AirQuality, shape(1010, 0, 100)),
        (
            "all types, optional ~1 KB",
            Message::AllTypes,
            shape(200, 7, 1 << 20),
        ),
        (
            "wide 100 fields ~1 KB",
            Message::WideRecord,
            shape(24, 0, 1 << 20),
        ),
        (
            "NEOWISE-like row",
            Message::NeowiseRow,
            Shape {
                string_len: 20,
                short_strings: NEOWISE_SHORT,
                list_len: 0,
                element_len: 16,
                int32_max: 64,
            },
        ),
        ("lists ~32 B", Message::TelemetryList, telemetry(2, 1, 4)),
        ("lists ~200 B", Message::TelemetryList, telemetry(60, 8, 12)),
        (
            "lists ~1 KB",
            Message::TelemetryList,
            telemetry(200, 40, 16),
        ),
        (
            "structs smallest",
            Message::TelemetryNested,
            telemetry(2, 0, 4),
        ),
        (
            "structs ~200 B",
            Message::TelemetryNested,
            telemetry(20, 3, 12),
        ),
        (
            "structs ~1 KB",
            Message::TelemetryNested,
            telemetry(40, 18, 16),
        ),
        ("maps ~40 B", Message::TelemetryMap, telemetry(2, 1, 2)),
        ("maps ~200 B", Message::TelemetryMap, telemetry(20, 4, 12)),
        ("maps ~1 KB", Message::TelemetryMap, telemetry(40, 18, 24)),
    ];
    specs
        .into_iter()
        .map(|(name, message, shape)| {
            let descriptor = pool
                .get_message_by_name(message.full_name())
                .ok_or_else(|| anyhow::anyhow!("{} missing", message.full_name()))?;
            let records = records(&descriptor, shape, count);
            Ok(Workload {
                name,
                message,
                descriptor,
                records,
            })
        })
        .collect()
}
