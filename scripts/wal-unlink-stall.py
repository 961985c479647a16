#!/usr/bin/env python3
"""Does removing a written 64 MiB file stall an fdatasync beside it on this file system?

The reason for the WAL's reaper (wal/src/reaper.rs): a thread appends 8 KiB and fdatasyncs a
log file every 0.5 ms while the main thread removes six written 64 MiB files, 0.4 s apart,
either with one unlink each (what a purge did before) or shrinking each STEP_MIB at a time,
PAUSE_MS apart, then unlinking (what the reaper does). Prints the removal times and the
fdatasync latencies of each way. On ext4 mounted with `discard` (this project's VM) the
unlinks took 12-17 ms and each stalled an fdatasync by 9-15 ms; shrinking kept every
fdatasync under 2.2 ms.

Usage: scripts/wal-unlink-stall.py [DIR (a fresh temporary directory under /tmp)]
"""

import os
import sys
import tempfile
import threading
import time

FILE_MIB = 64
FILES = 6
STEP_MIB = 2
PAUSE_MS = 3


def written_file(path):
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    os.posix_fallocate(fd, 0, FILE_MIB << 20)
    block = b"x" * (1 << 20)
    for i in range(FILE_MIB):
        os.pwrite(fd, block, i << 20)
    os.fdatasync(fd)
    os.close(fd)


def shrink_then_unlink(path):
    fd = os.open(path, os.O_WRONLY)
    size = FILE_MIB << 20
    while size > STEP_MIB << 20:
        size -= STEP_MIB << 20
        os.ftruncate(fd, size)
        time.sleep(PAUSE_MS / 1000)
    os.close(fd)
    os.unlink(path)


def run(directory, remove):
    paths = [os.path.join(directory, f"seg{i}") for i in range(FILES)]
    for p in paths:
        written_file(p)
    latencies, stop = [], threading.Event()

    def syncer():
        fd = os.open(os.path.join(directory, "log"), os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
        os.posix_fallocate(fd, 0, 256 << 20)
        offset, block = 0, b"y" * 8192
        while not stop.is_set():
            os.pwrite(fd, block, offset)
            offset += len(block)
            started = time.perf_counter()
            os.fdatasync(fd)
            latencies.append(time.perf_counter() - started)
            time.sleep(0.0005)
        os.close(fd)
        os.unlink(os.path.join(directory, "log"))

    thread = threading.Thread(target=syncer)
    thread.start()
    time.sleep(0.5)
    removals = []
    for p in paths:
        started = time.perf_counter()
        remove(p)
        removals.append((time.perf_counter() - started) * 1000)
        time.sleep(0.4)
    stop.set()
    thread.join()
    latencies.sort()
    n = len(latencies)
    ms = lambda q: latencies[min(n - 1, int(n * q))] * 1000
    return removals, n, ms(0.5), ms(0.99), ms(0.999), latencies[-1] * 1000, sum(x > 0.005 for x in latencies)


def main():
    given = len(sys.argv) > 1
    directory = sys.argv[1] if given else tempfile.mkdtemp(prefix="wal-unlink-stall-")
    os.makedirs(directory, exist_ok=True)
    print(f"in {directory}: {FILES} written {FILE_MIB} MiB files removed beside an 8 KiB append + fdatasync loop")
    print("| removal | each removal ms | fdatasyncs | p50 ms | p99 ms | p999 ms | max ms | > 5 ms |")
    print("|---|---|---|---|---|---|---|---|")
    for label, remove in [("unlink", os.unlink), (f"shrink {STEP_MIB} MiB steps, {PAUSE_MS} ms apart", shrink_then_unlink)]:
        removals, n, p50, p99, p999, most, slow = run(directory, remove)
        each = " ".join(f"{r:.1f}" for r in removals)
        print(f"| {label} | {each} | {n} | {p50:.2f} | {p99:.2f} | {p999:.2f} | {most:.2f} | {slow} |")
    if not given:
        os.rmdir(directory)


if __name__ == "__main__":
    main()
