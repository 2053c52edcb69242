"""One writer per store: an exclusive ``flock`` on ``<store>/writer.lock``.

The engine takes it when it starts its first write-side worker (the indexing pipeline, the
document writer, retention, a deletion) and keeps it until it closes. The holder's pid is
written inside, so a refused writer can name the process holding the store. The operating
system releases a flock when its file is closed, including when the process dies (kill -9),
so a crashed writer never leaves the store locked; a stale pid in the file means nothing.
Readers never take it: any number of them read while one process writes.
"""
from __future__ import annotations

import fcntl
import os
from pathlib import Path

from ..errors import StoreError

LOCK_NAME = "writer.lock"


class WriterLock:
    """``WriterLock(store_dir).acquire()`` or StoreError naming the store and the holder's pid.

    A flock belongs to one open file: a second ``WriterLock`` on the same store is refused even
    inside the same process, so two writing engines there conflict as two processes would."""

    def __init__(self, store_dir: str | os.PathLike):
        self.path = Path(store_dir) / LOCK_NAME
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> "WriterLock":
        if self._fd is not None:
            return self
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            who = f"pid {holder}" if holder is not None else "a process that has not written its pid yet"
            raise StoreError(f"{self.path.parent}: another process ({who}) is writing this store; one process "
                             f"writes a store at a time (reading it meanwhile is fine): wait for it to finish "
                             f"or stop it") from None
        except BaseException:
            os.close(fd)
            raise
        # Only the holder writes the file: a refused writer never truncates the holder's pid.
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing drops the flock; the file stays (removing it would race a new holder)

    def __enter__(self) -> "WriterLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
