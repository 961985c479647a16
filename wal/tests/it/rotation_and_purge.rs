//! Segment rotation, reading across segments, purging whole segments.

use crate::common::{
    append, append_many, base_lsn, garbage, open, payload, read_all, segment_files, small_segments,
};

#[tokio::test]
async fn given_4_kib_segments_when_many_frames_are_appended_then_the_log_rotates_and_reads_span_every_segment(
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(small_segments(dir.path()));
    let frames = append_many(&wal, 0..600).await;
    let files = segment_files(dir.path());
    assert!(
        files.len() > 5,
        "expected rotation, got {} files",
        files.len()
    );
    for f in &files {
        assert_eq!(std::fs::metadata(f).expect("metadata").len(), 4096);
        let base = base_lsn(f);
        assert!(
            frames.iter().any(|fr| fr.lsn == base) || base == frames[599].end_lsn,
            "every segment starts at a frame boundary"
        );
    }
    assert_eq!(read_all(&wal, 0), frames);
    let middle = frames[300].end_lsn;
    assert_eq!(read_all(&wal, middle), frames[301..]);
    wal.close().expect("close");

    let (wal, recovered) = open(small_segments(dir.path()));
    assert_eq!(recovered.segments, files.len());
    assert_eq!(recovered.end_lsn, frames[599].end_lsn);
    assert_eq!(read_all(&wal, 0), frames);
    let more = append_many(&wal, 600..700).await;
    assert_eq!(read_all(&wal, frames[599].end_lsn), more);
}

#[tokio::test]
async fn a_frame_larger_than_a_segment_gets_a_segment_of_its_own() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(small_segments(dir.path()));
    let big = vec![0xab; 10_000];
    append(&wal, 1, payload(1)).await;
    let end_big = append(&wal, 2, big.clone()).await;
    append(&wal, 3, big.clone()).await;
    let end = append(&wal, 1, payload(2)).await;
    wal.wait_durable(end).await.expect("durable");
    let frames = read_all(&wal, 0);
    assert_eq!(frames.len(), 4);
    assert_eq!(frames[1].payload, big);
    assert_eq!(frames[1].end_lsn, end_big);
    wal.close().expect("close");

    let (wal, recovered) = open(small_segments(dir.path()));
    assert_eq!(recovered.end_lsn, end);
    assert_eq!(read_all(&wal, 0), frames);
}

#[tokio::test]
async fn a_frame_larger_than_a_segment_as_the_very_first_frame_replaces_the_empty_active_segment() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(small_segments(dir.path()));
    let end = append(&wal, 2, vec![7; 9000]).await;
    wal.wait_durable(end).await.expect("durable");
    wal.close().expect("close");
    let (wal, recovered) = open(small_segments(dir.path()));
    assert_eq!(recovered.end_lsn, end);
    assert_eq!(read_all(&wal, 0)[0].payload, vec![7; 9000]);
}

#[tokio::test]
async fn purge_below_deletes_only_whole_segments_below_the_lsn_and_never_the_active_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(small_segments(dir.path()));
    let frames = append_many(&wal, 0..600).await;
    let before = segment_files(dir.path());
    assert!(before.len() > 5);
    assert_eq!(wal.purge_below(0).expect("purge"), 0);

    // An LSN strictly inside the fourth segment: the first three go, the fourth stays.
    let cut = base_lsn(&before[3]) + 1;
    assert_eq!(wal.purge_below(cut).expect("purge"), 3);
    let after = segment_files(dir.path());
    assert_eq!(after, before[3..]);
    let expected: Vec<_> = frames.iter().filter(|f| f.end_lsn > cut).cloned().collect();
    assert_eq!(read_all(&wal, cut), expected);
    assert_eq!(
        read_all(&wal, 0),
        frames[frames.len() - expected.len()..].to_vec()
    );

    // An LSN exactly at a segment's base deletes the segment before it.
    let cut = base_lsn(&after[2]);
    assert_eq!(wal.purge_below(cut).expect("purge"), 2);

    // Even "everything" keeps the active segment, and appending still works.
    let last_end = frames[599].end_lsn;
    wal.purge_below(u64::MAX).expect("purge");
    let remaining = segment_files(dir.path());
    assert_eq!(remaining.len(), 1);
    assert!(base_lsn(&remaining[0]) <= last_end);
    let more = append_many(&wal, 600..610).await;
    assert_eq!(read_all(&wal, last_end), more);
    wal.close().expect("close");

    let (wal, recovered) = open(small_segments(dir.path()));
    assert_eq!(recovered.start_lsn, base_lsn(&remaining[0]));
    assert_eq!(recovered.end_lsn, more[9].end_lsn);
    assert_eq!(read_all(&wal, last_end), more);
}

#[tokio::test]
async fn purge_after_reopen_can_delete_the_recovered_segments_but_not_the_new_active_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(crate::common::options(dir.path()));
    let frames = append_many(&wal, 0..5).await;
    wal.close().expect("close");
    let (wal, _) = open(crate::common::options(dir.path()));
    assert_eq!(segment_files(dir.path()).len(), 2);
    assert_eq!(wal.purge_below(frames[4].end_lsn).expect("purge"), 1);
    let files = segment_files(dir.path());
    assert_eq!(files.len(), 1);
    assert_eq!(base_lsn(&files[0]), frames[4].end_lsn);
}

#[tokio::test]
async fn a_retired_segment_a_crash_left_behind_is_removed_at_open_and_not_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(small_segments(dir.path()));
    let frames = append_many(&wal, 0..50).await;
    wal.close().expect("close");
    // What a crash between a purge's rename and the reaper's removal leaves: a file under
    // the retired name, whole or cut, whatever its bytes.
    let leftover = dir.path().join("retired-00000000000000000000.tmp");
    std::fs::write(&leftover, garbage(5000)).expect("write leftover");

    let (wal, recovered) = open(small_segments(dir.path()));
    assert!(!leftover.exists());
    assert_eq!(recovered.end_lsn, frames[49].end_lsn);
    assert_eq!(read_all(&wal, 0), frames);
}

#[tokio::test]
async fn purged_segments_are_gone_from_the_directory_once_the_log_is_closed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(small_segments(dir.path()));
    append_many(&wal, 0..600).await;
    let before = segment_files(dir.path());
    assert_eq!(wal.purge_below(base_lsn(&before[4])).expect("purge"), 4);
    wal.close().expect("close");
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".wal"))
        .collect();
    names.sort();
    assert_eq!(names, ["LOCK", "wal-id"]);
    assert_eq!(segment_files(dir.path()), before[4..]);
}
