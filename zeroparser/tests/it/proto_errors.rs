//! Every protobuf decode error kind, with its path and byte offset, and the atomic-append
//! contract: a rejected record leaves the builder exactly as before.

use serde_json::json;
use sluice_zeroparser::{DecodeErrorKind, WireType};

use crate::support::{minimal, rows, telemetry, Enc};

fn decode_error(record: &[u8]) -> sluice_zeroparser::DecodeError {
    let (_, plan, mut builder) = telemetry();
    let error = builder
        .append_proto(&plan, record)
        .expect_err("record is bad");
    assert!(builder.is_empty(), "a failed append must not add a row");
    error
}

#[test]
fn a_record_cut_inside_a_value_is_truncated() {
    let mut record = minimal(1).double(4, 1.0).build();
    record.truncate(record.len() - 3);
    let error = decode_error(&record);
    assert_eq!(error.kind(), &DecodeErrorKind::Truncated);
    assert_eq!(error.path().to_string(), "temp");
    assert_eq!(error.offset(), Some(3));
}

#[test]
fn a_varint_longer_than_ten_bytes_overflows() {
    let record = Enc::new().tag(1, 0).raw(&[0xff; 11]).build();
    let error = decode_error(&record);
    assert_eq!(error.kind(), &DecodeErrorKind::VarintOverflow);
    assert_eq!(error.offset(), Some(1));
    assert_eq!(
        error.to_string(),
        "field `id` at byte 1: varint is longer than 10 bytes or overflows 64 bits"
    );
}

#[test]
fn a_known_field_with_the_wrong_wire_type_names_path_and_offset() {
    let record = minimal(1).message(7, Enc::new().varint(1, 5)).build();
    let error = decode_error(&record);
    assert_eq!(
        error.kind(),
        &DecodeErrorKind::WrongWireType {
            expected: WireType::I64,
            found: WireType::Varint
        }
    );
    assert_eq!(error.path().to_string(), "loc.lat");
    assert_eq!(error.offset(), Some(4));
    assert_eq!(
        error.to_string(),
        "field `loc.lat` at byte 4: wrong wire type: expected I64, found VARINT"
    );
}

#[test]
fn a_string_that_is_not_utf8_is_rejected_with_its_list_index() {
    let record = minimal(1).string(5, "ok").bytes(5, &[0xff, 0xfe]).build();
    let error = decode_error(&record);
    assert_eq!(error.kind(), &DecodeErrorKind::InvalidUtf8);
    assert_eq!(error.path().to_string(), "tags[1]");
    assert_eq!(error.offset(), Some(8));
}

#[test]
fn a_bad_map_value_names_its_key() {
    let record = minimal(1)
        .message(6, Enc::new().string(1, "home").bytes(2, &[0xc3]))
        .build();
    let error = decode_error(&record);
    assert_eq!(error.kind(), &DecodeErrorKind::InvalidUtf8);
    assert_eq!(error.path().to_string(), "attrs{home}");
}

#[test]
fn a_length_beyond_the_enclosing_message_is_rejected() {
    let record = minimal(1).tag(2, 2).raw_varint(100).raw(b"short").build();
    let error = decode_error(&record);
    assert!(matches!(
        error.kind(),
        DecodeErrorKind::LengthPastEnd {
            length: 100,
            remaining: 5
        }
    ));
    assert_eq!(error.path().to_string(), "device");
}

#[test]
fn a_length_beyond_a_nested_message_is_rejected_even_if_the_record_is_longer() {
    let inner = Enc::new().tag(9, 2).raw_varint(20).build();
    let record = minimal(1)
        .message(7, Enc(inner))
        .string(2, "padding padding padding")
        .build();
    let error = decode_error(&record);
    assert!(matches!(
        error.kind(),
        DecodeErrorKind::LengthPastEnd { .. }
    ));
    assert_eq!(error.path().to_string(), "loc");
}

#[test]
fn messages_or_groups_nested_beyond_the_limit_are_rejected() {
    let mut record = minimal(1);
    for _ in 0..100 {
        record = record.tag(50, 3);
    }
    let error = decode_error(&record.build());
    assert!(matches!(
        error.kind(),
        DecodeErrorKind::DepthExceeded { limit: 64 }
    ));
}

#[test]
fn an_end_group_without_its_start_is_an_invalid_group() {
    let error = decode_error(&minimal(1).tag(50, 4).build());
    assert_eq!(error.kind(), &DecodeErrorKind::InvalidGroup);
    let error = decode_error(&minimal(1).tag(50, 3).varint(1, 1).tag(51, 4).build());
    assert_eq!(error.kind(), &DecodeErrorKind::InvalidGroup);
    let error = decode_error(&minimal(1).tag(50, 3).varint(1, 1).build());
    assert_eq!(error.kind(), &DecodeErrorKind::InvalidGroup);
}

#[test]
fn a_missing_not_null_column_is_rejected() {
    let error = decode_error(&Enc::new().string(2, "no id").build());
    assert_eq!(error.kind(), &DecodeErrorKind::NotNull);
    assert_eq!(error.path().to_string(), "id");
    let error = decode_error(&minimal(1).message(7, Enc::new().double(1, 1.0)).build());
    assert_eq!(error.kind(), &DecodeErrorKind::NotNull);
    assert_eq!(error.path().to_string(), "loc.lon");
    assert_eq!(error.offset(), Some(2));
    let error = decode_error(&minimal(1).message(21, Enc::new()).build());
    assert_eq!(error.path().to_string(), "path[0].lon");
}

#[test]
fn values_outside_the_column_range_are_rejected() {
    let error = decode_error(&minimal(1).int(12, 300).build());
    assert_eq!(
        error.kind(),
        &DecodeErrorKind::OutOfRange {
            value: "300".into(),
            target: "TINYINT"
        }
    );
    assert_eq!(error.path().to_string(), "t");
    let error = decode_error(&minimal(1).sint(13, 40_000).build());
    assert!(matches!(
        error.kind(),
        DecodeErrorKind::OutOfRange {
            target: "SMALLINT",
            ..
        }
    ));
    let error = decode_error(&minimal(1).varint(14, u64::from(u32::MAX)).build());
    assert!(matches!(
        error.kind(),
        DecodeErrorKind::OutOfRange { target: "INT", .. }
    ));
    let error = decode_error(&minimal(1).fixed64(23, u64::MAX).build());
    assert!(matches!(
        error.kind(),
        DecodeErrorKind::OutOfRange {
            target: "BIGINT",
            ..
        }
    ));
}

#[test]
fn a_variant_string_must_hold_json() {
    let error = decode_error(&minimal(1).string(10, "{not json").build());
    assert!(matches!(
        error.kind(),
        DecodeErrorKind::InvalidVariant { .. }
    ));
    assert_eq!(error.path().to_string(), "v");
}

#[test]
fn invalid_field_numbers_and_wire_types_are_rejected() {
    let error = decode_error(&minimal(1).raw(&[0x07]).build());
    assert!(matches!(
        error.kind(),
        DecodeErrorKind::InvalidFieldNumber { number: 0 }
    ));
    let error = decode_error(&minimal(1).raw(&[0x0e]).build());
    assert!(matches!(
        error.kind(),
        DecodeErrorKind::InvalidWireType { value: 6 }
    ));
}

#[test]
fn a_failed_append_leaves_the_builder_exactly_as_before() {
    let (_, plan, mut builder) = telemetry();
    let good = |id: i64| {
        minimal(id)
            .string(5, "t")
            .message(6, Enc::new().string(1, "k").string(2, "v"))
            .message(7, Enc::new().double(1, 1.0).double(2, 2.0))
            .message(21, Enc::new().double(2, 0.5))
            .message(
                22,
                Enc::new().int(1, 1).message(2, Enc::new().double(2, 1.0)),
            )
            .build()
    };
    builder.append_proto(&plan, &good(1)).expect("good");
    // Fails only at its last field, after lists, maps and structs were decoded.
    let bad = Enc(good(2)).int(12, 1000).build();
    assert!(builder.append_proto(&plan, &bad).is_err());
    // Fails in the validation pass (NOT NULL inside a list element).
    let bad = Enc(good(3)).message(21, Enc::new().double(1, 1.0)).build();
    assert!(builder.append_proto(&plan, &bad).is_err());
    assert!(builder
        .append_json(r#"{"id": 4, "tags": ["x", 5]}"#)
        .is_err());
    builder.append_proto(&plan, &good(5)).expect("good");
    assert_eq!(builder.len(), 2);
    let batch = builder.finish();
    let rows = rows(&batch);
    assert_eq!(rows.len(), 2);
    for (row, id) in rows.iter().zip([1, 5]) {
        assert_eq!(row["id"], json!(id));
        assert_eq!(row["tags"], json!(["t"]));
        assert_eq!(row["attrs"], json!([["k", "v"]]));
        assert_eq!(row["path"], json!([{"lat": null, "lon": 0.5}]));
        assert_eq!(row["places"], json!([[1, {"lat": null, "lon": 1.0}]]));
    }
}

#[test]
fn a_deeply_nested_variant_string_is_checked_without_overflowing_the_stack() {
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let (_, plan, mut builder) = telemetry();
    builder
        .append_proto(&plan, &minimal(1).string(10, &deep).build())
        .expect("deep but valid JSON");
    let unbalanced = format!("{}{}", "[".repeat(100_000), "]".repeat(99_999));
    let error = decode_error(&minimal(1).string(10, &unbalanced).build());
    assert!(matches!(
        error.kind(),
        DecodeErrorKind::InvalidVariant { .. }
    ));
}

#[test]
fn corrupted_records_never_panic_and_never_leave_partial_rows() {
    use proptest::prelude::*;
    use std::cell::RefCell;
    let (_, plan, builder) = telemetry();
    let builder = RefCell::new(builder);
    let valid = minimal(1)
        .string(2, "device")
        .string(5, "tag")
        .message(6, Enc::new().string(1, "k").string(2, "v"))
        .message(7, Enc::new().double(1, 1.0).double(2, 2.0))
        .message(21, Enc::new().double(2, 0.5))
        .message(
            22,
            Enc::new().int(1, 1).message(2, Enc::new().double(2, 1.0)),
        )
        .string(10, "[1]")
        .sint(15, 3)
        .build();
    let mutations = prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4);
    proptest!(ProptestConfig::with_cases(2000), |(edits in mutations, cut in any::<prop::sample::Index>(), random in prop::collection::vec(any::<u8>(), 0..32))| {
        let mut record = valid.clone();
        for (at, byte) in edits {
            let at = at.index(record.len());
            record[at] = byte;
        }
        record.truncate(cut.index(record.len() + 1));
        for bytes in [record, random] {
            let mut builder = builder.borrow_mut();
            let before = builder.len();
            let accepted = builder.append_proto(&plan, &bytes).is_ok();
            prop_assert_eq!(builder.len(), before + usize::from(accepted));
        }
    });
    let batch = builder.borrow_mut().finish();
    assert!(batch.num_rows() > 0);
}
