//! Recovery policy: torn tails, corruption in the middle, torn headers, stale frames.

use std::path::Path;

use sluice_wal::{Frame, RecoveryMode, Wal, WalError, WalOptions};

use crate::common::{
    append_many, base_lsn, flip_byte, garbage, offset_of, open, read_all, segment_files,
    segment_holding, small_segments, truncate, write_at, FRAME_HEADER_LEN,
};

fn absolute(mut opts: WalOptions) -> WalOptions {
    opts.recovery = RecoveryMode::AbsoluteConsistency;
    opts
}

/// Writes `n` frames into one segment, closes, and returns them with the segment's path.
async fn one_closed_segment(dir: &Path, n: usize) -> (Vec<Frame>, std::path::PathBuf) {
    let (wal, _) = open(crate::common::options(dir));
    let frames = append_many(&wal, 0..n).await;
    wal.close().expect("close");
    let path = segment_holding(dir, frames[0].lsn);
    assert_eq!(segment_holding(dir, frames[n - 1].lsn), path);
    (frames, path)
}

fn expect_corrupt(
    result: Result<(Wal, sluice_wal::Recovered), WalError>,
) -> (std::path::PathBuf, u64, String) {
    match result {
        Err(WalError::Corrupt {
            segment,
            offset,
            reason,
        }) => (segment, offset, reason),
        Err(other) => panic!("expected Corrupt, got {other}"),
        Ok(_) => panic!("expected Corrupt, the log opened"),
    }
}

#[tokio::test]
async fn given_a_last_segment_cut_mid_frame_when_reopened_then_the_torn_tail_is_cut_and_later_appends_and_reads_work(
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (frames, path) = one_closed_segment(dir.path(), 10).await;
    truncate(&path, offset_of(&path, frames[7].lsn) + 5);

    let refused = expect_corrupt(Wal::open(absolute(crate::common::options(dir.path()))));
    assert_eq!(
        refused.0, path,
        "absolute consistency refuses the torn tail"
    );

    let (wal, recovered) = open(crate::common::options(dir.path()));
    assert!(recovered.truncated_bytes > 0);
    assert_eq!(recovered.end_lsn, frames[6].end_lsn);
    assert_eq!(read_all(&wal, 0), frames[..7]);
    let more = append_many(&wal, 100..103).await;
    assert_eq!(more[0].lsn, frames[6].end_lsn);
    wal.close().expect("close");

    let (wal, recovered) = open(absolute(crate::common::options(dir.path())));
    assert_eq!(
        recovered.truncated_bytes, 0,
        "the repaired log is consistent"
    );
    let all: Vec<_> = frames[..7].iter().cloned().chain(more).collect();
    assert_eq!(read_all(&wal, 0), all);
}

#[tokio::test]
async fn given_garbage_after_the_last_frame_when_reopened_then_it_is_cut_away_and_no_frame_is_lost()
{
    let dir = tempfile::tempdir().expect("tempdir");
    let (frames, path) = one_closed_segment(dir.path(), 10).await;
    write_at(&path, offset_of(&path, frames[9].end_lsn), &garbage(100));

    let refused = expect_corrupt(Wal::open(absolute(crate::common::options(dir.path()))));
    assert_eq!(refused.0, path);
    assert_eq!(refused.1, offset_of(&path, frames[9].end_lsn));

    let (wal, recovered) = open(crate::common::options(dir.path()));
    assert!(recovered.truncated_bytes > 0);
    assert_eq!(recovered.end_lsn, frames[9].end_lsn);
    assert_eq!(read_all(&wal, 0), frames);
}

#[tokio::test]
async fn given_garbage_appended_past_the_end_of_the_last_file_when_reopened_then_it_is_cut_away() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (frames, path) = one_closed_segment(dir.path(), 5).await;
    let len = std::fs::metadata(&path).expect("metadata").len();
    write_at(&path, len, &garbage(37));

    let (wal, recovered) = open(crate::common::options(dir.path()));
    assert_eq!(
        recovered.truncated_bytes,
        len + 37 - offset_of(&path, frames[4].end_lsn)
    );
    assert_eq!(read_all(&wal, 0), frames);
}

#[tokio::test]
async fn given_a_torn_batch_with_a_bad_frame_before_a_good_one_when_reopened_then_tolerate_mode_cuts_at_the_bad_frame_and_absolute_mode_refuses(
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (frames, path) = one_closed_segment(dir.path(), 10).await;
    let damaged = offset_of(&path, frames[4].lsn) + FRAME_HEADER_LEN + 1;
    flip_byte(&path, damaged);

    let (segment, offset, reason) =
        expect_corrupt(Wal::open(absolute(crate::common::options(dir.path()))));
    assert_eq!(segment, path);
    assert_eq!(offset, offset_of(&path, frames[4].lsn));
    assert!(reason.contains("torn tail"), "{reason}");

    let (wal, recovered) = open(crate::common::options(dir.path()));
    assert_eq!(recovered.end_lsn, frames[3].end_lsn);
    assert!(recovered.truncated_bytes > 0);
    assert_eq!(read_all(&wal, 0), frames[..4]);
    let more = append_many(&wal, 100..102).await;
    assert_eq!(more[0].lsn, frames[3].end_lsn);
}

#[tokio::test]
async fn given_a_bad_frame_followed_by_a_good_frame_further_than_one_batch_can_span_then_open_fails_in_both_modes(
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(crate::common::options(dir.path()));
    // 80 frames of 64 KiB: 5 MiB, more than one batch (4 MiB) can span.
    let mut last = 0;
    let mut lsns = Vec::new();
    for i in 0..80u8 {
        let mut record = garbage(64 << 10);
        record[0] = i;
        let end = crate::common::append(&wal, 1, record).await;
        lsns.push(end - FRAME_HEADER_LEN - (64 << 10));
        last = end;
    }
    wal.wait_durable(last).await.expect("durable");
    wal.close().expect("close");
    let path = segment_holding(dir.path(), lsns[0]);
    assert_eq!(segment_holding(dir.path(), lsns[79]), path);
    flip_byte(&path, offset_of(&path, lsns[1]) + FRAME_HEADER_LEN + 7);
    for opts in [
        crate::common::options(dir.path()),
        absolute(crate::common::options(dir.path())),
    ] {
        let (segment, offset, reason) = expect_corrupt(Wal::open(opts));
        assert_eq!(segment, path);
        assert_eq!(offset, offset_of(&path, lsns[1]));
        assert!(reason.contains("valid frame follows"), "{reason}");
    }
}

#[tokio::test]
async fn given_a_flipped_byte_in_a_middle_segment_when_reopened_then_open_fails_naming_the_segment_and_offset(
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(small_segments(dir.path()));
    let frames = append_many(&wal, 0..600).await;
    wal.close().expect("close");
    let files = segment_files(dir.path());
    assert!(files.len() > 4);
    let middle = &files[2];
    let victim = frames
        .iter()
        .find(|f| f.lsn > base_lsn(middle) && f.end_lsn < base_lsn(&files[3]))
        .expect("a frame inside the middle segment");
    flip_byte(middle, offset_of(middle, victim.lsn) + FRAME_HEADER_LEN + 3);

    for opts in [
        small_segments(dir.path()),
        absolute(small_segments(dir.path())),
    ] {
        let (segment, offset, reason) = expect_corrupt(Wal::open(opts));
        assert_eq!(&segment, middle);
        assert_eq!(offset, offset_of(middle, victim.lsn));
        assert!(reason.contains("crc"), "{reason}");
    }
}

#[tokio::test]
async fn given_garbage_after_the_frames_of_a_sealed_segment_when_reopened_then_open_fails_in_both_modes(
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(small_segments(dir.path()));
    append_many(&wal, 0..600).await;
    wal.close().expect("close");
    let files = segment_files(dir.path());
    let sealed = &files[1];
    let len = std::fs::metadata(sealed).expect("metadata").len();
    flip_byte(sealed, len - 1);
    for opts in [
        small_segments(dir.path()),
        absolute(small_segments(dir.path())),
    ] {
        let (segment, _, reason) = expect_corrupt(Wal::open(opts));
        assert_eq!(&segment, sealed);
        assert!(reason.contains("non-zero"), "{reason}");
    }
}

#[tokio::test]
async fn given_a_missing_middle_segment_when_reopened_then_open_fails_naming_the_gap() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(small_segments(dir.path()));
    append_many(&wal, 0..600).await;
    wal.close().expect("close");
    let files = segment_files(dir.path());
    std::fs::remove_file(&files[2]).expect("remove");
    let (segment, _, reason) = expect_corrupt(Wal::open(small_segments(dir.path())));
    assert_eq!(segment, files[1]);
    assert!(reason.contains("next segment"), "{reason}");
}

#[tokio::test]
async fn stale_frames_from_before_a_cut_never_come_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (old, path) = one_closed_segment(dir.path(), 10).await;
    // Crash mid-way through frame 4: frames 4..10 are gone for good.
    truncate(&path, offset_of(&path, old[4].lsn) + 3);
    let (wal, recovered) = open(crate::common::options(dir.path()));
    assert_eq!(recovered.end_lsn, old[3].end_lsn);
    let new = append_many(&wal, 500..502).await;
    wal.close().expect("close");

    for _ in 0..2 {
        let (wal, recovered) = open(crate::common::options(dir.path()));
        assert_eq!(recovered.truncated_bytes, 0);
        assert_eq!(recovered.end_lsn, new[1].end_lsn);
        let all = read_all(&wal, 0);
        let expected: Vec<_> = old[..4].iter().cloned().chain(new.clone()).collect();
        assert_eq!(all, expected);
        for stale in &old[4..] {
            assert!(all.iter().all(|f| f.payload != stale.payload));
        }
        wal.close().expect("close");
    }
}

#[tokio::test]
async fn given_a_newest_segment_with_a_torn_header_when_reopened_then_it_is_removed_in_tolerate_mode_only(
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (frames, _) = one_closed_segment(dir.path(), 5).await;
    let end = frames[4].end_lsn;
    // Reopening creates a new, empty, newest segment at the end: tear its header.
    let (wal, _) = open(crate::common::options(dir.path()));
    wal.close().expect("close");
    let newest = dir.path().join(format!("{end:020}.wal"));
    assert!(newest.exists());
    write_at(&newest, 0, b"SLUICE");
    truncate(&newest, 20);

    let (segment, offset, _) =
        expect_corrupt(Wal::open(absolute(crate::common::options(dir.path()))));
    assert_eq!((segment, offset), (newest.clone(), 0));

    let (wal, recovered) = open(crate::common::options(dir.path()));
    assert_eq!(recovered.end_lsn, end);
    assert!(recovered.truncated_bytes > 0);
    assert_eq!(read_all(&wal, 0), frames);
    let more = append_many(&wal, 5..7).await;
    assert_eq!(more[0].lsn, end);
}

#[tokio::test]
async fn a_torn_header_in_front_of_written_frames_is_corrupt_even_in_tolerate_mode() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, path) = one_closed_segment(dir.path(), 5).await;
    assert_eq!(
        segment_files(dir.path()).len(),
        1,
        "the segment is the newest"
    );
    flip_byte(&path, 3);
    let (segment, offset, _) = expect_corrupt(Wal::open(crate::common::options(dir.path())));
    assert_eq!((segment, offset), (path, 0));
}

#[tokio::test]
async fn an_empty_directory_opens_at_lsn_zero() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, recovered) = open(crate::common::options(dir.path().join("fresh")));
    assert_eq!(recovered.start_lsn, 0);
    assert_eq!(recovered.end_lsn, 0);
    assert_eq!(recovered.segments, 0);
    assert_eq!(recovered.truncated_bytes, 0);
    assert_eq!(wal.durable_lsn(), 0);
}
