#!/usr/bin/env python3
"""A passthrough FUSE file system with two faults: failing fsyncs (the WAL's EIO test) and
power cuts (the local warehouse's durability test).

Usage: faulty_fs.py BACKING MOUNTPOINT

Mirrors the directory BACKING at MOUNTPOINT (runs in the foreground until unmounted) with
the operations the write-ahead log and object_store's LocalFileSystem use:
create/open/read/write (pwritev arrives as write), truncate/ftruncate, unlink, rename, link,
mkdir/rmdir, readdir, getattr, statfs, fsync/fsyncdir, flush/release. fusepy has no
`fallocate` callback: the kernel answers EOPNOTSUPP and the WAL falls back to `set_len`. fusepy has no `flock` callback either, so the kernel keeps `flock`
locks itself (the WAL's lock on `{dir}/LOCK` works as on any local file system).

Fault control: while the file `BACKING.fail-fsync` exists (a sibling of BACKING, outside the
mount), every fsync or fdatasync of a regular file returns EIO (the WAL's fdatasync reaches
us as `fsync` with datasync=1) — or, if the file holds text, of each regular file whose
path contains that text; text of the form `dirs:TEXT` fails only the fsyncs of directories
whose path contains TEXT (files sync). Writes still reach BACKING: the fault says only that
the data was not made durable, as a failing disk would. Each refused sync is logged to
stderr. As on Linux, a failed sync poisons the file's data written so far: a later fsync of
the same file that succeeds does not make it durable (the kernel marked those pages clean
without writing them), only a new file renamed over it does.

Stalls: while the file `BACKING.stall-fsync` exists, an fsync of a regular file whose path
contains its text waits (a slow disk), logged once as `faulty_fs: fsync PATH: stalled`; it
goes on when the file is removed, or fails with EIO if the power was cut meanwhile.

Power cuts: the file system keeps what a power cut could take — the files written (or
truncated) since their last fsync, and the names added to a directory (create, mkdir, rename
or link into it) since its last fsync. When the file `BACKING.power-cut` appears, a thread
polling for it every 50 ms cuts the power: each such name is removed (a directory with all it
holds), each such file that is left is truncated to zero bytes (the outcome delayed
allocation gives), the control file is deleted and one line `faulty_fs: power cut: lost N names, M
files' data: ...` is logged. If the control file holds `names-journaled`, the journal is
taken to have committed every name just before the cut (ext4 commits metadata every few
seconds, while a file written with delayed allocation has no data blocks yet): no name is
lost, unsynced data is, so a file renamed or linked into place before its data was synced
comes back empty. The caller then stops whatever used the mount and mounts it anew
(a reboot: no kernel cache of the old state survives). Unsynced removals are not undone (a
name removed is gone), a simplification that never loses less than a real power cut.

Used by server/tests/it/wal_eio.rs and warehouse_power_cut.rs (PyPI `fusepy`, Debian
`libfuse2`; scripts/test.sh installs both).
"""

import errno
import os
import shutil
import sys
import threading
import time

from fuse import FUSE, FuseOSError, Operations

STAT_FIELDS = (
    "st_atime",
    "st_ctime",
    "st_gid",
    "st_mode",
    "st_mtime",
    "st_nlink",
    "st_size",
    "st_uid",
    "st_blocks",
    "st_blksize",
)
STATVFS_FIELDS = (
    "f_bavail",
    "f_bfree",
    "f_blocks",
    "f_bsize",
    "f_favail",
    "f_ffree",
    "f_files",
    "f_flag",
    "f_frsize",
    "f_namemax",
)


class FaultyFs(Operations):
    """Passthrough to `backing`; fsync fails with EIO while `control` exists; `cut` makes a
    power cut."""

    def __init__(self, backing, control, cut, stall):
        self.backing = backing
        self.control = control
        self.cut = cut
        self.stall = stall
        # Power cuts so far (a stalled sync that outlives one fails).
        self.cuts = 0
        self.lock = threading.Lock()
        # Backing paths of files written since their last fsync.
        self.unsynced_data = set()
        # Backing directory -> names added to it since its last fsync.
        self.unsynced_names = {}
        # Backing paths of files whose fsync failed: their data stays unsynced until the
        # name holds another file.
        self.poisoned = set()

    def __call__(self, op, path, *args):
        # Every callback gets the path inside the backing directory (rename's and link's
        # second paths are mapped in `rename` and `link`); the root is `backing` itself,
        # without a trailing slash.
        return super().__call__(op, self.backing + path.rstrip("/"), *args)

    # What a power cut would take.

    def _added(self, path):
        with self.lock:
            parent, name = os.path.split(path)
            self.unsynced_names.setdefault(parent, set()).add(name)

    def _removed(self, path):
        with self.lock:
            parent, name = os.path.split(path)
            self.unsynced_names.get(parent, set()).discard(name)
            self.unsynced_data.discard(path)
            self.unsynced_names.pop(path, None)
            self.poisoned.discard(path)

    def _written(self, path):
        with self.lock:
            self.unsynced_data.add(path)

    def _moved(self, old, new):
        with self.lock:
            parent, name = os.path.split(old)
            self.unsynced_names.get(parent, set()).discard(name)
            prefix = old + "/"
            # What `new` held before is replaced: its unsynced data goes with it.
            self.unsynced_data = {
                new + p[len(old):] if p == old or p.startswith(prefix) else p
                for p in self.unsynced_data
                if p != new and not p.startswith(new + "/")
            }
            self.unsynced_names = {
                new + d[len(old):] if d == old or d.startswith(prefix) else d: names
                for d, names in self.unsynced_names.items()
            }
            # The file renamed over `new` replaces whatever poisoned the old one.
            self.poisoned = {
                new + p[len(old):] if p == old or p.startswith(prefix) else p
                for p in self.poisoned
                if p != new and not p.startswith(new + "/")
            }
        self._added(new)

    def power_cut(self):
        with self.lock:
            try:
                with open(self.cut) as control:
                    names_journaled = control.read().strip() == "names-journaled"
            except FileNotFoundError:
                names_journaled = False
            if names_journaled:
                self.unsynced_names = {}
            lost_names = []
            for parent in sorted(self.unsynced_names, key=lambda d: -d.count("/")):
                for name in sorted(self.unsynced_names[parent]):
                    path = os.path.join(parent, name)
                    if os.path.isdir(path) and not os.path.islink(path):
                        shutil.rmtree(path)
                    elif os.path.lexists(path):
                        os.unlink(path)
                    else:
                        continue
                    lost_names.append(path[len(self.backing):])
            lost_data = []
            for path in sorted(self.unsynced_data):
                if os.path.isfile(path):
                    os.truncate(path, 0)
                    lost_data.append(path[len(self.backing):])
            self.unsynced_names = {}
            self.unsynced_data = set()
            self.poisoned = set()
            self.cuts += 1
            if os.path.exists(self.stall):
                os.remove(self.stall)
            os.remove(self.cut)
        print(
            f"faulty_fs: power cut{' (names journaled)' if names_journaled else ''}: lost {len(lost_names)} names, {len(lost_data)} files' data: "
            f"names {lost_names} data {lost_data}",
            file=sys.stderr,
            flush=True,
        )

    def watch_for_power_cuts(self):
        while True:
            time.sleep(0.05)
            if os.path.exists(self.cut):
                self.power_cut()

    def getattr(self, path, fh=None):
        st = os.lstat(path)
        return {k: getattr(st, k) for k in STAT_FIELDS}

    def readdir(self, path, fh):
        return [".", ".."] + os.listdir(path)

    def statfs(self, path):
        st = os.statvfs(path)
        return {k: getattr(st, k) for k in STATVFS_FIELDS}

    def access(self, path, mode):
        if not os.access(path, mode):
            raise FuseOSError(errno.EACCES)

    def chmod(self, path, mode):
        os.chmod(path, mode)

    def chown(self, path, uid, gid):
        os.chown(path, uid, gid)

    def utimens(self, path, times=None):
        os.utime(path, times)

    def mkdir(self, path, mode):
        os.mkdir(path, mode)
        self._added(path)

    def rmdir(self, path):
        os.rmdir(path)
        self._removed(path)

    def unlink(self, path):
        os.unlink(path)
        self._removed(path)

    def rename(self, old, new):
        os.rename(old, self.backing + new)
        self._moved(old, self.backing + new)

    def link(self, target, source):
        # fusepy passes the new name first (mapped by __call__), then the existing one.
        os.link(self.backing + source, target)
        self._added(target)
        with self.lock:
            if self.backing + source in self.unsynced_data:
                self.unsynced_data.add(target)

    def create(self, path, mode, fi=None):
        fd = os.open(path, os.O_RDWR | os.O_CREAT, mode)
        self._added(path)
        self._written(path)
        return fd

    def open(self, path, flags):
        return os.open(path, flags)

    def read(self, path, size, offset, fh):
        return os.pread(fh, size, offset)

    def write(self, path, data, offset, fh):
        self._written(path)
        return os.pwrite(fh, data, offset)

    def truncate(self, path, length, fh=None):
        os.truncate(path if fh is None else fh, length)
        self._written(path)

    def flush(self, path, fh):
        return 0

    def release(self, path, fh):
        os.close(fh)

    def _needle(self, control):
        """The text of control file `control`, or None while it does not exist."""
        try:
            with open(control) as f:
                return f.read()
        except FileNotFoundError:
            return None

    def _refused(self, path, directory=False):
        """Whether the fault control refuses a sync of `path` (a directory or not) now."""
        needle = self._needle(self.control)
        if needle is None:
            return False
        if needle.startswith("dirs:"):
            return directory and needle[len("dirs:"):] in path[len(self.backing):]
        return not directory and (needle == "" or needle in path[len(self.backing):])

    def _stall(self, path):
        """Waits while the stall control names `path`; False if the power was cut meanwhile."""
        needle = self._needle(self.stall)
        if not needle or needle not in path[len(self.backing):]:
            return True
        cuts = self.cuts
        print(f"faulty_fs: fsync {path}: stalled", file=sys.stderr, flush=True)
        while os.path.exists(self.stall) and self.cuts == cuts:
            time.sleep(0.01)
        return self.cuts == cuts

    def fsync(self, path, datasync, fh):
        if not self._stall(path):
            raise FuseOSError(errno.EIO)
        if self._refused(path):
            with self.lock:
                self.poisoned.add(path)
            print(f"faulty_fs: fsync(datasync={datasync}) {path}: EIO", file=sys.stderr, flush=True)
            raise FuseOSError(errno.EIO)
        if datasync:
            os.fdatasync(fh)
        else:
            os.fsync(fh)
        with self.lock:
            if path not in self.poisoned:
                self.unsynced_data.discard(path)

    def fsyncdir(self, path, datasync, fh):
        if self._refused(path, directory=True):
            print(f"faulty_fs: fsyncdir {path}: EIO", file=sys.stderr, flush=True)
            raise FuseOSError(errno.EIO)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        with self.lock:
            self.unsynced_names.pop(path, None)


def main():
    if len(sys.argv) != 3:
        sys.exit(f"usage: {sys.argv[0]} BACKING MOUNTPOINT")
    backing = os.path.realpath(sys.argv[1])
    mountpoint = sys.argv[2]
    control = backing + ".fail-fsync"
    cut = backing + ".power-cut"
    stall = backing + ".stall-fsync"
    print(
        f"faulty_fs: {backing} at {mountpoint}; fault control {control}, power cut {cut}, "
        f"stall {stall}",
        file=sys.stderr,
        flush=True,
    )
    fs = FaultyFs(backing, control, cut, stall)
    threading.Thread(target=fs.watch_for_power_cuts, daemon=True).start()
    FUSE(
        fs,
        mountpoint,
        foreground=True,
        nothreads=False,
        big_writes=True,
        fsname="sluice-faulty-fs",
    )


if __name__ == "__main__":
    main()
