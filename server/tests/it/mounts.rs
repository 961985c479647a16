//! Real file systems mounted under a test's temporary directory, for the tests that put the
//! WAL on a disk that misbehaves: a size-limited tmpfs (a disk that fills,
//! `disk_full.rs`) and a FUSE passthrough whose fsync can be made to fail with EIO and whose
//! power can be cut, dropping what was not synced (`tests/fuse/faulty_fs.py`, `wal_eio.rs`,
//! `warehouse_power_cut.rs`). Both are lazily unmounted on drop.
//!
//! Mounting needs root (CAP_SYS_ADMIN), which CI and the development machines have; the FUSE
//! mount also needs `/dev/fuse`, Debian's `libfuse2` and PyPI's `fusepy` in `.venv` (both
//! installed by `scripts/test.sh`). Where mounting fails the tests fail saying why;
//! `SLUICE_SKIP_MOUNT_TESTS=1` skips them knowingly.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::harness::Server;
use crate::moto::{repo_root, venv_bin};

/// Whether the mount tests are to be skipped (`SLUICE_SKIP_MOUNT_TESTS` is set); says so.
pub fn skip_mount_test(what: &str) -> bool {
    let skip = std::env::var_os("SLUICE_SKIP_MOUNT_TESTS").is_some();
    if skip {
        eprintln!("SKIPPED (SLUICE_SKIP_MOUNT_TESTS is set): {what}");
    }
    skip
}

/// The mounted file system, or a panic saying what the test needs (`needs`) and why the
/// mount at `wal_dir` failed.
pub fn mounted_or_fail<M>(
    mounted: Result<M, impl std::fmt::Display>,
    needs: &str,
    wal_dir: &Path,
) -> M {
    mounted.unwrap_or_else(|e| {
        panic!(
            "this test mounts {needs} at {} as the WAL directory; the mount failed: {e}\nSet \
             SLUICE_SKIP_MOUNT_TESTS=1 to skip it knowingly.",
            wal_dir.display()
        )
    })
}

/// Starts `sluice serve` on `dir` (its WAL directory `{dir}/wal` is the test's mount) with
/// WAL segments of `segment_bytes`, and creates `table`; returns the server and the table's
/// location.
pub async fn serve_on_mount(
    dir: &Path,
    flush_interval: &str,
    segment_bytes: u64,
    table: &str,
    columns: &str,
) -> (Server, String) {
    let segment = segment_bytes.to_string();
    let server =
        Server::start_with_args(dir, flush_interval, &["--wal-segment-bytes", &segment]).await;
    let location = server.create_table_at(table, columns).await;
    (server, location)
}

/// `path` as a C string for libc calls.
pub fn c_path(path: &Path) -> CString {
    CString::new(path.as_os_str().as_bytes()).expect("no NUL in a test path")
}

/// `umount2(MNT_DETACH)`: also works while files are open or the FUSE daemon is gone.
fn unmount_lazily(path: &Path) {
    let target = c_path(path);
    // SAFETY: a live NUL-terminated path.
    unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
}

/// A size-limited tmpfs mounted at a path.
pub struct TmpfsMount {
    path: PathBuf,
}

impl TmpfsMount {
    pub fn mount(path: &Path, bytes: u64) -> std::io::Result<TmpfsMount> {
        std::fs::create_dir_all(path)?;
        let c = |s: &[u8]| CString::new(s).expect("no NUL");
        let target = c_path(path);
        let (source, fstype) = (c(b"tmpfs"), c(b"tmpfs"));
        let options = c(format!("size={bytes},mode=0700").as_bytes());
        // SAFETY: every pointer is a live NUL-terminated string for the duration of the call.
        let rc = unsafe {
            libc::mount(
                source.as_ptr(),
                target.as_ptr(),
                fstype.as_ptr(),
                0,
                options.as_ptr().cast(),
            )
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(TmpfsMount {
            path: path.to_path_buf(),
        })
    }
}

impl Drop for TmpfsMount {
    fn drop(&mut self) {
        unmount_lazily(&self.path);
    }
}

/// `tests/fuse/faulty_fs.py` mirroring `backing` at `mountpoint`, run as a child process.
pub struct FaultyFuse {
    child: Child,
    mountpoint: PathBuf,
    /// While this file exists, every fsync/fdatasync of a regular file on the mount fails
    /// (of those whose path contains its text, if it holds any).
    control: PathBuf,
    /// Created to cut the power; the daemon removes it once it has.
    cut: PathBuf,
    /// While this file exists, fsyncs of regular files whose path contains its text wait.
    stall: PathBuf,
    log: PathBuf,
}

impl FaultyFuse {
    /// Starts the file system and waits (up to 20 s) until the mount is in place. `Err`
    /// says why it is not, with the daemon's log.
    pub fn mount(backing: &Path, mountpoint: &Path) -> Result<FaultyFuse, String> {
        for dir in [backing, mountpoint] {
            std::fs::create_dir_all(dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
        }
        let name = |suffix: &str| {
            let mut p = backing.as_os_str().to_owned();
            p.push(suffix);
            PathBuf::from(p)
        };
        let (control, cut, stall, log) = (
            name(".fail-fsync"),
            name(".power-cut"),
            name(".stall-fsync"),
            name(".log"),
        );
        let log_file = std::fs::File::create(&log).map_err(|e| format!("create log: {e}"))?;
        let stderr = log_file.try_clone().map_err(|e| format!("log: {e}"))?;
        let child = Command::new(venv_bin("python", "SLUICE_PYTHON"))
            .arg(repo_root().join("tests/fuse/faulty_fs.py"))
            .arg(backing)
            .arg(mountpoint)
            .stdout(log_file)
            .stderr(stderr)
            .stdin(Stdio::null())
            .spawn()
            .map_err(|e| format!("spawn faulty_fs.py: {e}"))?;
        let mut fuse = FaultyFuse {
            child,
            mountpoint: mountpoint.to_path_buf(),
            control,
            cut,
            stall,
            log,
        };
        let parent = mountpoint.parent().unwrap_or(Path::new("/"));
        let device = |p: &Path| std::fs::metadata(p).map(|m| m.dev()).ok();
        let deadline = Instant::now() + Duration::from_secs(20);
        while device(mountpoint).is_none() || device(mountpoint) == device(parent) {
            if let Ok(Some(status)) = fuse.child.try_wait() {
                return Err(format!("faulty_fs.py exited ({status}):\n{}", fuse.log()));
            }
            if Instant::now() >= deadline {
                return Err(format!("not mounted after 20 s:\n{}", fuse.log()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(fuse)
    }

    /// From now on every fsync/fdatasync of a regular file on the mount returns EIO.
    pub fn arm(&self) {
        std::fs::write(&self.control, b"").expect("create the fault control file");
    }

    /// From now on every fsync/fdatasync of a regular file whose path on the mount contains
    /// `needle` returns EIO (and poisons that file's data, as on Linux: see faulty_fs.py).
    pub fn arm_for(&self, needle: &str) {
        std::fs::write(&self.control, needle).expect("create the fault control file");
    }

    /// Syncs succeed again.
    pub fn disarm(&self) {
        std::fs::remove_file(&self.control).expect("remove the fault control file");
    }

    /// From now on every fsync of a directory whose path on the mount contains `needle`
    /// returns EIO (files still sync).
    pub fn arm_dirs_for(&self, needle: &str) {
        std::fs::write(&self.control, format!("dirs:{needle}"))
            .expect("create the fault control file");
    }

    /// From now on fsyncs of regular files whose path on the mount contains `needle` wait
    /// (until the next power cut, which fails them).
    pub fn stall_for(&self, needle: &str) {
        std::fs::write(&self.stall, needle).expect("create the stall control file");
    }

    /// How many fsyncs are (or were) stalled so far.
    pub fn stalled_syncs(&self) -> usize {
        self.log()
            .lines()
            .filter(|l| l.ends_with(": stalled"))
            .count()
    }

    /// Cuts the power: whatever was not synced (file data, names in a directory) is lost
    /// from the backing directory. Stop every user of the mount first, and mount it anew
    /// after (drop this one). Returns the daemon's report of what was lost.
    pub fn power_cut(&self) -> String {
        self.cut_the_power(b"")
    }

    /// Cuts the power just after the file system's journal committed every name: unsynced
    /// data is lost, names are not (a file named before its data was synced comes back
    /// empty, as after a crash of ext4 with delayed allocation).
    pub fn power_cut_with_names_journaled(&self) -> String {
        self.cut_the_power(b"names-journaled")
    }

    fn cut_the_power(&self, how: &[u8]) -> String {
        // Written whole, then renamed into place: the daemon never reads it half written.
        let mut staged = self.cut.as_os_str().to_owned();
        staged.push(".tmp");
        std::fs::write(&staged, how).expect("write the power-cut control file");
        std::fs::rename(&staged, &self.cut).expect("create the power-cut control file");
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.cut.exists() {
            assert!(
                Instant::now() < deadline,
                "faulty_fs.py did not cut the power in 20 s:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let log = self.log();
        log.lines()
            .rfind(|l| l.starts_with("faulty_fs: power cut"))
            .unwrap_or_else(|| panic!("no power-cut report in the log:\n{log}"))
            .to_string()
    }

    /// The daemon's log: one line per refused sync.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// How many fsync/fdatasync calls got EIO so far.
    pub fn refused_syncs(&self) -> usize {
        self.log().lines().filter(|l| l.ends_with(": EIO")).count()
    }
}

impl Drop for FaultyFuse {
    fn drop(&mut self) {
        unmount_lazily(&self.mountpoint);
        // The daemon's loop ends once the kernel drops the connection.
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
