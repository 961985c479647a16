#!/usr/bin/env python3
"""A passthrough FUSE file system whose fsync can be made to fail, for the WAL's EIO test.

Usage: faulty_fs.py BACKING MOUNTPOINT

Mirrors the directory BACKING at MOUNTPOINT (runs in the foreground until unmounted) with
the operations the write-ahead log uses: create/open/read/write (pwritev arrives as write),
truncate/ftruncate, unlink, rename, mkdir/rmdir, readdir, getattr, statfs, fsync/fsyncdir,
flush/release. fusepy has no `fallocate` callback: the kernel answers EOPNOTSUPP and the WAL
falls back to `set_len`. fusepy has no `flock` callback either, so the kernel keeps `flock`
locks itself (the WAL's lock on `{dir}/LOCK` works as on any local file system).

Fault control: while the file `BACKING.fail-fsync` exists (a sibling of BACKING, outside the
mount), every fsync or fdatasync of a regular file returns EIO (the WAL's fdatasync reaches
us as `fsync` with datasync=1). Writes still reach BACKING: the fault says only that the
data was not made durable, as a failing disk would. Each refused sync is logged to stderr.

Used by server/tests/it/wal_eio.rs (PyPI `fusepy`, Debian `libfuse2`; scripts/test.sh
installs both).
"""

import errno
import os
import sys

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
    """Passthrough to `backing`; fsync fails with EIO while `control` exists."""

    def __init__(self, backing, control):
        self.backing = backing
        self.control = control

    def __call__(self, op, path, *args):
        # Every callback gets the path inside the backing directory (rename's second path
        # is mapped in `rename`).
        return super().__call__(op, self.backing + path, *args)

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

    def rmdir(self, path):
        os.rmdir(path)

    def unlink(self, path):
        os.unlink(path)

    def rename(self, old, new):
        os.rename(old, self.backing + new)

    def create(self, path, mode, fi=None):
        return os.open(path, os.O_RDWR | os.O_CREAT, mode)

    def open(self, path, flags):
        return os.open(path, flags)

    def read(self, path, size, offset, fh):
        return os.pread(fh, size, offset)

    def write(self, path, data, offset, fh):
        return os.pwrite(fh, data, offset)

    def truncate(self, path, length, fh=None):
        os.truncate(path if fh is None else fh, length)

    def flush(self, path, fh):
        return 0

    def release(self, path, fh):
        os.close(fh)

    def fsync(self, path, datasync, fh):
        if os.path.exists(self.control):
            print(f"faulty_fs: fsync(datasync={datasync}) {path}: EIO", file=sys.stderr, flush=True)
            raise FuseOSError(errno.EIO)
        if datasync:
            os.fdatasync(fh)
        else:
            os.fsync(fh)

    def fsyncdir(self, path, datasync, fh):
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def main():
    if len(sys.argv) != 3:
        sys.exit(f"usage: {sys.argv[0]} BACKING MOUNTPOINT")
    backing = os.path.realpath(sys.argv[1])
    mountpoint = sys.argv[2]
    control = backing + ".fail-fsync"
    print(f"faulty_fs: {backing} at {mountpoint}; fault control {control}", file=sys.stderr, flush=True)
    FUSE(
        FaultyFs(backing, control),
        mountpoint,
        foreground=True,
        nothreads=False,
        big_writes=True,
        fsname="sluice-faulty-fs",
    )


if __name__ == "__main__":
    main()
