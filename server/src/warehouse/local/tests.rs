use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use deltalake::arrow::array::Int64Array;
use deltalake::arrow::datatypes::{DataType, Field, Schema};
use deltalake::arrow::record_batch::RecordBatch;
use deltalake::writer::{DeltaWriter, RecordBatchWriter};
use object_store::{ObjectStore, ObjectStoreExt};

use super::*;

/// A store on `root` whose syncs are recorded (and really done) in order.
fn recording(root: &FsPath) -> (DurableLocal, Arc<Mutex<Vec<PathBuf>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let sync: SyncFn = Arc::new(move |p: &FsPath| {
        log.lock().expect("log").push(p.to_path_buf());
        fsync(p)
    });
    (DurableLocal::with_sync(root.to_path_buf(), sync), seen)
}

/// A temporary directory holding a table folder `t`, and a recording store rooted there.
fn table_folder() -> (tempfile::TempDir, DurableLocal, Arc<Mutex<Vec<PathBuf>>>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("t");
    std::fs::create_dir(&root).expect("root");
    let (store, seen) = recording(&root);
    (dir, store, seen)
}

fn taken(seen: &Mutex<Vec<PathBuf>>) -> Vec<PathBuf> {
    std::mem::take(&mut *seen.lock().expect("log"))
}

/// A store on a temporary folder whose syncs are `sync`, and the path of its
/// `_delta_log/00000000000000000001.json`.
fn store_and_commit_1(sync: SyncFn) -> (tempfile::TempDir, DurableLocal, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DurableLocal::with_sync(dir.path().to_path_buf(), sync);
    let file = dir
        .path()
        .join("_delta_log")
        .join("00000000000000000001.json");
    (dir, store, file)
}

/// A create-if-absent put (how deltalake writes a commit).
fn create() -> PutOptions {
    PutOptions {
        mode: PutMode::Create,
        ..PutOptions::default()
    }
}

/// Whether `synced` is `file` written under a staging name (`{file}#{digits}`).
fn staged_for(synced: &FsPath, file: &FsPath) -> bool {
    let (synced, file) = (synced.to_string_lossy(), file.to_string_lossy());
    synced
        .strip_prefix(&*file)
        .and_then(|rest| rest.strip_prefix('#'))
        .is_some_and(|digits| !digits.is_empty() && digits.bytes().all(|c| c.is_ascii_digit()))
}

/// The object path of a file system path (the store is rooted at `/`).
fn object(path: &FsPath) -> Path {
    Path::from_absolute_path(path).expect("object path")
}

/// Creates a Delta table of one `id BIGINT` column at `url` through `store`.
async fn create_table(
    store: Arc<dyn object_store::ObjectStore>,
    url: &Url,
) -> deltalake::DeltaTable {
    deltalake::DeltaTableBuilder::from_url(url.clone())
        .expect("builder")
        .with_storage_backend(store, url.clone())
        .build()
        .expect("table")
        .create()
        .with_columns(vec![deltalake::kernel::StructField::new(
            "id",
            deltalake::kernel::DataType::LONG,
            false,
        )])
        .await
        .expect("create")
}

/// Commits `actions` to `table` as an append (deltalake's own committer).
async fn append(
    table: &deltalake::DeltaTable,
    actions: Vec<deltalake::kernel::Action>,
) -> Result<deltalake::kernel::transaction::FinalizedCommit, deltalake::DeltaTableError> {
    deltalake::kernel::transaction::CommitBuilder::default()
        .with_actions(actions)
        .build(
            Some(table.snapshot()?),
            table.log_store(),
            deltalake::protocol::DeltaOperation::Write {
                mode: deltalake::protocol::SaveMode::Append,
                partition_by: None,
                predicate: None,
            },
        )
        .await
}

#[tokio::test]
async fn a_put_returns_once_its_file_and_each_folder_up_to_the_table_root_are_synced() {
    let (dir, store, seen) = table_folder();
    let root = dir.path().join("t");
    let file = root.join("a").join("b").join("part.parquet");

    let put = store
        .put(&object(&file), PutPayload::from_static(b"rows"))
        .await
        .expect("put");

    assert_eq!(std::fs::read(&file).expect("read"), b"rows");
    let order = taken(&seen);
    assert!(
        staged_for(&order[0], &file),
        "the bytes are synced under a staging name first: {order:?}"
    );
    assert_eq!(
        order[1..],
        [root.join("a").join("b"), root.join("a"), root.clone()]
    );
    assert_eq!(names(&root.join("a").join("b")), vec!["part.parquet"]);
    let head = store.head(&object(&file)).await.expect("head");
    assert_eq!(put.e_tag, head.e_tag, "the put's e-tag is the file's");
}

/// A create-if-absent put (how deltalake writes a commit) of a name that exists answers
/// `AlreadyExists` (deltalake's sign that another writer took the version) and changes nothing.
#[tokio::test]
async fn a_create_put_of_an_existing_name_is_already_exists_and_changes_nothing() {
    let (dir, store, seen) = table_folder();
    let file = dir
        .path()
        .join("t")
        .join("_delta_log")
        .join("00000000000000000001.json");
    store
        .put_opts(&object(&file), PutPayload::from_static(b"first"), create())
        .await
        .expect("absent: created");
    let err = store
        .put_opts(&object(&file), PutPayload::from_static(b"second"), create())
        .await
        .expect_err("exists");
    assert!(
        matches!(err, object_store::Error::AlreadyExists { .. }),
        "{err}"
    );
    assert_eq!(std::fs::read(&file).expect("read"), b"first");
    assert_eq!(
        names(&dir.path().join("t").join("_delta_log")),
        vec!["00000000000000000001.json"]
    );
    taken(&seen);
    let update = store
        .put_opts(
            &object(&file),
            PutPayload::from_static(b"x"),
            PutOptions {
                mode: PutMode::Update(object_store::UpdateVersion {
                    e_tag: None,
                    version: None,
                }),
                ..PutOptions::default()
            },
        )
        .await
        .expect_err("not supported on a local folder");
    assert!(
        matches!(update, object_store::Error::NotImplemented { .. }),
        "{update}"
    );
}

#[tokio::test]
async fn a_multipart_upload_is_synced_when_it_completes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, seen) = recording(dir.path());
    let file = dir.path().join("big.parquet");

    let mut upload = store.put_multipart(&object(&file)).await.expect("start");
    upload
        .put_part(PutPayload::from(vec![7u8; 1 << 20]))
        .await
        .expect("part");
    upload
        .put_part(PutPayload::from_static(b"tail"))
        .await
        .expect("part");
    assert!(taken(&seen).is_empty(), "nothing is synced before complete");
    upload.complete().await.expect("complete");

    assert_eq!(taken(&seen), vec![file.clone(), dir.path().to_path_buf()]);
    assert_eq!(std::fs::metadata(&file).expect("stat").len(), (1 << 20) + 4);
}

#[tokio::test]
async fn a_rename_syncs_the_target_with_its_folders_and_the_source_folder() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, seen) = recording(dir.path());
    let from = dir.path().join("staging").join("f");
    let to = dir.path().join("log").join("f");
    store
        .put(&object(&from), PutPayload::from_static(b"x"))
        .await
        .expect("put");
    taken(&seen);

    store
        .rename(&object(&from), &object(&to))
        .await
        .expect("rename");

    assert_eq!(
        taken(&seen),
        vec![
            to.clone(),
            dir.path().join("log"),
            dir.path().to_path_buf(),
            dir.path().join("staging")
        ]
    );
    assert!(!from.exists());
}

/// deltalake's own writer and committer go through the store's puts: every Parquet file a
/// commit names was synced before the commit file was.
#[tokio::test]
async fn a_delta_commit_is_synced_after_every_file_it_names() {
    let (dir, store, seen) = table_folder();
    let root = dir.path().join("t");
    let url = Url::from_directory_path(&root).expect("url");
    let table = create_table(Arc::new(store), &url).await;
    let created = taken(&seen);
    let first = root.join("_delta_log").join("00000000000000000000.json");
    assert!(created.iter().any(|p| staged_for(p, &first)), "{created:?}");

    let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
    let batch = RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(vec![1, 2, 3]))])
        .expect("batch");
    let mut writer = RecordBatchWriter::for_table(&table).expect("writer");
    writer.write(batch).await.expect("write");
    let adds = writer.flush().await.expect("flush");
    let files: Vec<PathBuf> = adds.iter().map(|a| root.join(&a.path)).collect();
    assert!(!files.is_empty());
    append(
        &table,
        adds.into_iter()
            .map(deltalake::kernel::Action::Add)
            .collect(),
    )
    .await
    .expect("commit");

    let order = taken(&seen);
    let at = |p: &PathBuf| order.iter().position(|s| s == p || staged_for(s, p));
    let commit = at(&root.join("_delta_log").join("00000000000000000001.json"))
        .unwrap_or_else(|| panic!("commit file not synced: {order:?}"));
    for file in &files {
        let synced = at(file).unwrap_or_else(|| panic!("{} not synced: {order:?}", file.display()));
        assert!(
            synced < commit,
            "{} after the commit: {order:?}",
            file.display()
        );
    }
}

#[tokio::test]
async fn the_warehouse_opens_local_tables_through_the_durable_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let w = super::super::Warehouse::parse(None, dir.path(), &super::super::S3Settings::default())
        .expect("parse");
    let url = w.table_url("c", "s", "t").expect("url");
    let table = w.open_or_empty(&url).await.expect("open");
    let store = table.log_store().root_object_store(None).to_string();
    assert!(store.starts_with("DurableLocal("), "{store}");
}

#[test]
fn create_dir_durable_makes_every_missing_folder() {
    let dir = tempfile::tempdir().expect("tempdir");
    let deep = dir.path().join("w").join("c").join("s").join("t");
    create_dir_durable(&deep).expect("create");
    assert!(deep.is_dir());
    create_dir_durable(&deep).expect("again: nothing to do");
}

/// A sync that fails with EIO for paths containing `needle` while `failing` is set.
fn failing_for(needle: &'static str, failing: Arc<AtomicBool>) -> SyncFn {
    Arc::new(move |p: &FsPath| {
        if failing.load(Ordering::SeqCst) && p.to_string_lossy().contains(needle) {
            Err(io::Error::from_raw_os_error(5))
        } else {
            fsync(p)
        }
    })
}

/// A sync that fails with EIO for folders whose path contains `needle` while `failing` is
/// set (files sync): a put's bytes are durable, its name may not be.
fn failing_dirs(needle: &'static str, failing: Arc<AtomicBool>) -> SyncFn {
    Arc::new(move |p: &FsPath| {
        if failing.load(Ordering::SeqCst) && p.is_dir() && p.to_string_lossy().contains(needle) {
            Err(io::Error::from_raw_os_error(5))
        } else {
            fsync(p)
        }
    })
}

/// Every name in `dir`, sorted.
pub(super) fn names(dir: &FsPath) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn a_put_whose_sync_fails_is_written_again_and_returns_once_the_new_file_is_synced() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("part.parquet");
    // The first staging file's sync fails; the second (a new file) syncs.
    let calls = Arc::new(Mutex::new(Vec::<PathBuf>::new()));
    let seen = Arc::clone(&calls);
    let target = file.clone();
    let sync: SyncFn = Arc::new(move |p: &FsPath| {
        let mut seen = seen.lock().expect("log");
        seen.push(p.to_path_buf());
        if staged_for(p, &target) && seen.iter().filter(|s| staged_for(s, &target)).count() == 1 {
            Err(io::Error::from_raw_os_error(5))
        } else {
            fsync(p)
        }
    });
    let store = DurableLocal::with_sync(dir.path().to_path_buf(), sync);

    store
        .put(&object(&file), PutPayload::from_static(b"rows"))
        .await
        .expect("the second try synced");

    assert_eq!(std::fs::read(&file).expect("read"), b"rows");
    assert_eq!(
        names(dir.path()),
        vec!["part.parquet"],
        "no staging file left"
    );
    let order = taken(&calls);
    assert!(
        order.len() == 3 && staged_for(&order[0], &file) && staged_for(&order[1], &file),
        "two staging files synced, then the folder: {order:?}"
    );
    assert_ne!(
        order[0], order[1],
        "the second try syncs a new file, not the failed one again"
    );
    assert_eq!(order[2], dir.path().to_path_buf(), "then the folder");
    assert_eq!(store.unsynced.len(), 0);
}

/// A folder sync that fails once the name is placed: the next try writes the bytes to a new
/// file, renames it over the name and syncs the folder again.
#[tokio::test]
async fn a_put_whose_folder_sync_fails_once_is_placed_again_over_its_name() {
    let calls = Arc::new(Mutex::new(Vec::<PathBuf>::new()));
    let seen = Arc::clone(&calls);
    let sync: SyncFn = Arc::new(move |p: &FsPath| {
        let mut seen = seen.lock().expect("log");
        seen.push(p.to_path_buf());
        if p.is_dir() && seen.iter().filter(|s| s.is_dir()).count() == 1 {
            Err(io::Error::from_raw_os_error(5))
        } else {
            fsync(p)
        }
    });
    let (dir, store, file) = store_and_commit_1(sync);

    store
        .put_opts(&object(&file), PutPayload::from_static(b"{}"), create())
        .await
        .expect("the second try synced the folder");

    assert_eq!(std::fs::read(&file).expect("read"), b"{}");
    let log = dir.path().join("_delta_log");
    assert_eq!(names(&log), vec!["00000000000000000001.json"]);
    let order = taken(&calls);
    assert!(
        order.len() >= 4
            && staged_for(&order[0], &file)
            && order[1] == log
            && staged_for(&order[2], &file)
            && order[0] != order[2]
            && order[3] == log,
        "staging file, folder (failed), a new staging file, the folder again: {order:?}"
    );
    assert_eq!(store.unsynced.len(), 0);
}

/// Bytes that never sync never get their name: no commit file stands for data a power cut
/// could take, and nothing is kept.
#[tokio::test]
async fn a_log_file_whose_bytes_never_sync_is_never_named() {
    let failing = Arc::new(AtomicBool::new(true));
    // Every try's new file (`….json#…`) fails too.
    let (dir, store, file) = store_and_commit_1(failing_for(".json", Arc::clone(&failing)));

    let err = store
        .put_opts(&object(&file), PutPayload::from_static(b"{}"), create())
        .await
        .expect_err("no try synced");
    let text = err.to_string();
    assert!(
        text.contains("fsync")
            && text.contains(&file.display().to_string())
            && text.contains("os error 5"),
        "{text}"
    );
    assert_eq!(store.unsynced.len(), 0);
    store
        .put(
            &object(&dir.path().join("part.parquet")),
            PutPayload::from_static(b"x"),
        )
        .await
        .expect("other files still sync");
    assert_eq!(
        names(&dir.path().join("_delta_log")),
        Vec::<String>::new(),
        "neither the file nor a staging file"
    );

    failing.store(false, Ordering::SeqCst);
    store
        .put_opts(&object(&file), PutPayload::from_static(b"{}"), create())
        .await
        .expect("the version is still free");
    assert_eq!(std::fs::read(&file).expect("read"), b"{}");
}

/// A log file whose name is placed but whose folder never syncs: kept, unreadable to Sluice
/// until a try holds.
#[tokio::test]
async fn a_log_file_whose_folder_never_syncs_is_unreadable_until_one_does() {
    let failing = Arc::new(AtomicBool::new(true));
    let (dir, store, file) = store_and_commit_1(failing_dirs("_delta_log", Arc::clone(&failing)));
    let location = object(&file);

    let err = store
        .put(&location, PutPayload::from_static(b"{\"commitInfo\":{}}"))
        .await
        .expect_err("no try synced the folder");
    let text = err.to_string();
    assert!(
        text.contains("fsync")
            && text.contains("a folder of")
            && text.contains("00000000000000000001.json"),
        "{text}"
    );
    assert_eq!(store.unsynced.len(), 1);
    assert_eq!(
        names(&dir.path().join("_delta_log")),
        vec!["00000000000000000001.json"],
        "the file is there, no staging file left"
    );

    for read in [
        store.get(&location).await.map(|_| ()),
        store.head(&location).await.map(|_| ()),
        store.get_range(&location, 0..2).await.map(|_| ()),
    ] {
        let text = read.expect_err("not durable: not read").to_string();
        assert!(
            text.contains("not durable") && text.contains("os error 5"),
            "{text}"
        );
    }
    let listed: Vec<_> = futures::TryStreamExt::try_collect::<Vec<_>>(ObjectStore::list(
        &store,
        Some(&object(&dir.path().join("_delta_log"))),
    ))
    .await
    .expect("list");
    assert_eq!(
        listed.len(),
        1,
        "listings show the file, not the staging ones: {listed:?}"
    );

    failing.store(false, Ordering::SeqCst);
    let read = store
        .get(&location)
        .await
        .expect("a rewrite synced")
        .bytes()
        .await;
    assert_eq!(read.expect("bytes").as_ref(), b"{\"commitInfo\":{}}");
    assert_eq!(store.unsynced.len(), 0);
    assert_eq!(
        names(&dir.path().join("_delta_log")),
        vec!["00000000000000000001.json"]
    );
}

#[tokio::test]
async fn a_data_file_no_try_can_sync_fails_its_put_and_is_not_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    let failing = Arc::new(AtomicBool::new(true));
    let store = DurableLocal::with_sync(dir.path().to_path_buf(), failing_for(".parquet", failing));
    let file = dir.path().join("part-0.parquet");

    store
        .put(&object(&file), PutPayload::from_static(b"rows"))
        .await
        .expect_err("no try synced");

    assert_eq!(
        store.unsynced.len(),
        0,
        "no commit names a file whose put failed"
    );
    assert_eq!(names(dir.path()), Vec::<String>::new(), "nothing placed");
}

/// The committer's view of a commit whose file cannot be made durable. Its bytes do not
/// sync: the commit fails and the version stays free. Its folder does not sync: the commit
/// fails and loading the table fails too until a try holds. Either way the commit is never
/// counted as landed (and the WAL that holds its rows is kept).
#[tokio::test]
async fn a_delta_commit_whose_file_cannot_be_synced_is_not_loaded_until_it_can() {
    for dirs_only in [false, true] {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("t");
        std::fs::create_dir(&root).expect("root");
        let failing = Arc::new(AtomicBool::new(false));
        let sync = if dirs_only {
            failing_dirs("_delta_log", Arc::clone(&failing))
        } else {
            failing_for("_delta_log", Arc::clone(&failing))
        };
        let store: Arc<dyn object_store::ObjectStore> =
            Arc::new(DurableLocal::with_sync(root.clone(), sync));
        let url = Url::from_directory_path(&root).expect("url");
        let open = || {
            deltalake::DeltaTableBuilder::from_url(url.clone())
                .expect("builder")
                .with_storage_backend(Arc::clone(&store), url.clone())
        };
        let table = create_table(Arc::clone(&store), &url).await;

        failing.store(true, Ordering::SeqCst);
        let committed = append(&table, vec![]).await;
        assert!(committed.is_err(), "the commit file was not made durable");
        let commit = root.join("_delta_log").join("00000000000000000001.json");
        if dirs_only {
            assert!(commit.exists());
            let refused = open()
                .load()
                .await
                .expect_err("version 1 is not read while it is not durable")
                .to_string();
            assert!(refused.contains("not durable"), "{refused}");
            failing.store(false, Ordering::SeqCst);
            let loaded = open().load().await.expect("loads once a rewrite synced");
            assert_eq!(loaded.version(), Some(1));
        } else {
            assert!(!commit.exists(), "bytes that did not sync got no name");
            let loaded = open().load().await.expect("loads");
            assert_eq!(loaded.version(), Some(0));
            failing.store(false, Ordering::SeqCst);
            let again = append(&loaded, vec![])
                .await
                .expect("commits once it syncs");
            assert_eq!(again.version(), 1);
        }
    }
}
