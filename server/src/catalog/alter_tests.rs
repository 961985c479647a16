//! Unit tests of the catalog's alter records: who owns a pending alter, and when
//! `finish_alter` may complete one.

use super::*;
use crate::evolve::{under_way_elsewhere, ALTER_ABANDONED_AFTER};

const T: &str = "main.s.t";

fn catalog_with_table(dir: &Path) -> Catalog {
    let catalog = Catalog::open(dir).expect("catalog");
    catalog
        .create_table(TableEntry::new(T, "id BIGINT", "file:///tmp/t", "1", 0))
        .expect("create");
    catalog
}

fn entry(catalog: &Catalog) -> TableEntry {
    catalog.table(T).expect("read").expect("the table")
}

#[test]
fn a_pending_alter_records_its_pod_and_finishing_it_clears_the_record() {
    let dir = tempfile::tempdir().expect("tempdir");
    let catalog = catalog_with_table(dir.path());
    catalog
        .begin_alter(T, "id BIGINT", "id BIGINT, a INT", "pod-0")
        .expect("begin");
    let pending = entry(&catalog);
    assert_eq!(pending.pending_owner.as_deref(), Some("pod-0"));
    assert!(pending.pending_since_ms.is_some());
    // A second alter, from any pod, is refused while it is pending, naming the first's pod.
    let refused = catalog.begin_alter(T, "id BIGINT", "id BIGINT, b INT", "pod-2");
    assert!(
        matches!(&refused, Err(ServerError::FailedPrecondition(m))
            if m.contains("meanwhile") && m.contains("an alter by pod pod-0 is under way")),
        "{refused:?}"
    );
    let done = catalog
        .finish_alter(T, "id BIGINT", "id BIGINT, a INT", 7)
        .expect("finish");
    assert_eq!(
        (done.columns.as_str(), done.schema_version),
        ("id BIGINT, a INT", 7)
    );
    assert!(done.pending_columns.is_none() && done.pending_owner.is_none());
    assert!(done.pending_since_ms.is_none());
}

#[test]
fn finishing_an_alter_another_pod_already_completed_keeps_its_version() {
    let dir = tempfile::tempdir().expect("tempdir");
    let catalog = catalog_with_table(dir.path());
    catalog
        .begin_alter(T, "id BIGINT", "id BIGINT, a INT", "pod-0")
        .expect("begin");
    // Another pod's settle found the Delta commit (at version 9, appends since).
    catalog
        .finish_alter(T, "id BIGINT", "id BIGINT, a INT", 9)
        .expect("settled elsewhere");
    let done = catalog
        .finish_alter(T, "id BIGINT", "id BIGINT, a INT", 7)
        .expect("the owner's own finish");
    assert_eq!(
        (done.columns.as_str(), done.schema_version),
        ("id BIGINT, a INT", 9)
    );
}

/// Found by the full suite (`committer_cluster::concurrent_rewriting_alters…`): pod 2's
/// alter committed to Delta; pod 0's next alter settled it (completed in the catalog) and
/// began its own; pod 2's own finish then answered "changed meanwhile", so a change that
/// landed was reported as refused.
#[test]
fn an_alter_settled_by_another_pod_that_then_began_its_own_is_done_for_its_owner() {
    let dir = tempfile::tempdir().expect("tempdir");
    let catalog = catalog_with_table(dir.path());
    catalog
        .begin_alter(T, "id BIGINT", "id BIGINT, a INT", "pod-2")
        .expect("begin");
    catalog
        .finish_alter(T, "id BIGINT", "id BIGINT, a INT", 9)
        .expect("settled by pod 0");
    catalog
        .begin_alter(T, "id BIGINT, a INT", "id BIGINT, a INT, b INT", "pod-0")
        .expect("pod 0's own alter");
    let done = catalog
        .finish_alter(T, "id BIGINT", "id BIGINT, a INT", 7)
        .expect("the owner's finish: its change is in");
    assert_eq!(
        (done.columns.as_str(), done.schema_version),
        ("id BIGINT, a INT", 9)
    );
    // Pod 0's alter stays pending, untouched.
    let now = entry(&catalog);
    assert_eq!(
        (now.pending_columns.as_deref(), now.pending_owner.as_deref()),
        (Some("id BIGINT, a INT, b INT"), Some("pod-0"))
    );
    // A finish whose columns the table does not hold is still refused.
    let refused = catalog.finish_alter(T, "id BIGINT", "id BIGINT, c INT", 8);
    assert!(
        matches!(&refused, Err(ServerError::FailedPrecondition(m)) if m.contains("changed meanwhile")),
        "{refused:?}"
    );
}

#[test]
fn an_alter_forgotten_as_abandoned_while_it_committed_is_completed_by_its_owner() {
    let dir = tempfile::tempdir().expect("tempdir");
    let catalog = catalog_with_table(dir.path());
    catalog
        .begin_alter(T, "id BIGINT", "id BIGINT, a INT", "pod-0")
        .expect("begin");
    catalog.abort_alter(T).expect("forgotten by another pod");
    let done = catalog
        .finish_alter(T, "id BIGINT", "id BIGINT, a INT", 7)
        .expect("finish");
    assert_eq!(done.columns, "id BIGINT, a INT");
}

#[test]
fn an_alter_whose_record_another_alter_replaced_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let catalog = catalog_with_table(dir.path());
    catalog
        .begin_alter(T, "id BIGINT", "id BIGINT, a INT", "pod-0")
        .expect("begin");
    catalog.abort_alter(T).expect("forgotten");
    catalog
        .begin_alter(T, "id BIGINT", "id BIGINT, b INT", "pod-2")
        .expect("another alter");
    let refused = catalog.finish_alter(T, "id BIGINT", "id BIGINT, a INT", 7);
    assert!(
        matches!(&refused, Err(ServerError::FailedPrecondition(m)) if m.contains("changed meanwhile")),
        "{refused:?}"
    );
    // The other alter's record is untouched.
    assert_eq!(
        entry(&catalog).pending_columns.as_deref(),
        Some("id BIGINT, b INT")
    );
}

#[test]
fn another_pods_recent_alter_is_under_way_ours_or_an_old_one_is_not() {
    let dir = tempfile::tempdir().expect("tempdir");
    let catalog = catalog_with_table(dir.path());
    catalog
        .begin_alter(T, "id BIGINT", "id BIGINT, a INT", "pod-0")
        .expect("begin");
    let mut e = entry(&catalog);
    assert_eq!(under_way_elsewhere(&e, "pod-2"), Some("pod-0"));
    assert_eq!(under_way_elsewhere(&e, "pod-0"), None, "our own: cut short");
    let abandoned = ALTER_ABANDONED_AFTER.as_millis() as i64 + 1_000;
    e.pending_since_ms = e.pending_since_ms.map(|t| t - abandoned);
    assert_eq!(under_way_elsewhere(&e, "pod-2"), None, "abandoned");
    e.pending_owner = None;
    e.pending_since_ms = None;
    assert_eq!(
        under_way_elsewhere(&e, "pod-2"),
        None,
        "a catalog that did not record the owner"
    );
}
