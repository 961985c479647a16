//! [`RecordPlan`]: how a stream's records become rows, compiled from what its
//! stream-open frame holds (record format and descriptor) against the table:
//! once at stream creation and again at replay, from the same bytes.

use sluice_zeroparser::{
    AvroPlan, DecodeError, ProtoPlan, RecordBatchBuilder, SchemaError, TableSchema,
};

use super::frames::RecordFormat;

/// A stream's compiled record plan.
#[derive(Debug)]
pub enum RecordPlan {
    /// JSON records need none.
    Json,
    /// Protobuf: the compiled descriptor.
    Proto(ProtoPlan),
    /// Avro: the compiled writer schema.
    Avro(Box<AvroPlan>),
    /// Arrow batches are fitted by `flight::conform`, not here.
    Arrow,
}

/// Why a descriptor does not give a plan.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The descriptor (or writer schema) does not fit the table.
    #[error("{0}")]
    Schema(#[from] SchemaError),
    /// An Avro writer schema that is not UTF-8 text.
    #[error("the Avro schema is not UTF-8 text")]
    NotUtf8,
}

impl RecordPlan {
    /// Compiles `descriptor` (encoded DescriptorProto, Avro schema JSON, or nothing) of
    /// a `format` stream against `schema`; `rescued_data`: the table keeps
    /// `_rescued_data` (Avro fields with no column are rescued, not refused).
    pub fn compile(
        format: RecordFormat,
        descriptor: &[u8],
        schema: &TableSchema,
        rescued_data: bool,
    ) -> Result<RecordPlan, PlanError> {
        Ok(match format {
            RecordFormat::Json => RecordPlan::Json,
            RecordFormat::Arrow => RecordPlan::Arrow,
            RecordFormat::Proto => RecordPlan::Proto(ProtoPlan::compile(descriptor, schema)?),
            RecordFormat::Avro => {
                let json = std::str::from_utf8(descriptor).map_err(|_| PlanError::NotUtf8)?;
                RecordPlan::Avro(Box::new(AvroPlan::compile(json, schema, rescued_data)?))
            }
        })
    }

    /// Appends one record to `builder` under this plan (None: Arrow streams' records are
    /// not parsed here, and a JSON record that is not UTF-8 is none).
    pub fn append_to(
        &self,
        builder: &mut RecordBatchBuilder,
        record: &[u8],
    ) -> Option<Result<(), DecodeError>> {
        match self {
            RecordPlan::Proto(plan) => Some(builder.append_proto(plan, record)),
            RecordPlan::Avro(plan) => Some(builder.append_avro(plan, record)),
            RecordPlan::Json => std::str::from_utf8(record)
                .ok()
                .map(|text| builder.append_json(text)),
            RecordPlan::Arrow => None,
        }
    }
}
