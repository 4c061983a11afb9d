"""The results store: JSON Lines, one record per run and repetition, appended atomically.

Appends take an exclusive lock and write each record with a single write() of one whole
line, then fsync, so concurrent writers never interleave and a crash leaves at most a
truncated last line, which readers skip with a warning.
"""

import errno
import fcntl
import json
import os
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

from .errors import StoreError, UsageError
from .records import check_record

DEFAULT_PATH = Path("vnetbench-results") / "results.jsonl"


@dataclass
class BadLine:
    line: int
    reason: str


class Store:
    """A JSONL file of records. ``Store(path).append(record)``; ``Store(path).read()``."""

    def __init__(self, path: str | os.PathLike = DEFAULT_PATH):
        self.path = Path(path)

    def check_writable(self) -> None:
        """UsageError naming --store when the store cannot be created or appended to.

        Probes by creating what is missing and removing it again, so nothing is left behind.
        """
        target = self.path
        if target.is_dir():
            raise UsageError(f"--store: {target} is a directory; give a file such as {target / 'results.jsonl'}")
        if target.exists():
            if not os.access(target, os.W_OK):
                raise UsageError(f"--store: {target} is not writable")
            return
        created = []
        try:
            for parent in reversed(target.parents):
                if not parent.exists():
                    parent.mkdir()
                    created.append(parent)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.close(fd)
            target.unlink()
        except OSError as exc:
            raise UsageError(f"--store: cannot create {target}: {exc.strerror}") from None
        finally:
            for parent in reversed(created):
                try:
                    parent.rmdir()
                except OSError:
                    pass

    def append(self, record: dict) -> None:
        problems = check_record(record)
        if problems:
            raise StoreError(f"refusing to store a malformed record: {'; '.join(problems)}")
        line = (json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n").encode()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StoreError(f"cannot open store {self.path}: {exc.strerror}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            if size and _last_byte(fd, size) != b"\n":
                # a writer died mid-line: end that line so this record stays whole and readable
                line = b"\n" + line
            written = os.write(fd, line)
            while written < len(line):  # a short write: the rest fits, or the error says why not
                written += os.write(fd, line[written:])
            os.fsync(fd)
        except OSError as exc:
            try:
                os.ftruncate(fd, size)  # never leave half a line behind
            except (OSError, UnboundLocalError):
                pass
            reason = "disk full (no space left on device)" if exc.errno in (errno.ENOSPC, errno.EDQUOT) \
                else exc.strerror
            raise StoreError(f"cannot write store {self.path}: {reason}; earlier records are intact, "
                             f"this one was not stored") from exc
        finally:
            os.close(fd)

    def scan(self) -> tuple[list[dict], list[BadLine]]:
        """All sound records, and the lines that are not (with their numbers and why)."""
        if not self.path.exists():
            raise UsageError(f"--store: {self.path} does not exist")
        if self.path.is_dir():
            raise UsageError(f"--store: {self.path} is a directory, not a store file")
        records, bad = [], []
        try:
            raw = self.path.read_bytes()
        except OSError as exc:
            raise StoreError(f"cannot read store {self.path}: {exc.strerror}") from exc
        lines = raw.split(b"\n")
        truncated_tail = raw and not raw.endswith(b"\n")
        for number, text in enumerate(lines, start=1):
            if not text.strip():
                continue
            last = number == len(lines)
            try:
                record = json.loads(text)
            except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
                reason = ("truncated last line (a writer was killed mid-write)" if last and truncated_tail
                          else f"not JSON ({exc.__class__.__name__})")
                bad.append(BadLine(number, reason))
                continue
            problems = check_record(record)
            if problems:
                bad.append(BadLine(number, "not a vnetbench record: " + "; ".join(problems[:3])))
                continue
            records.append(record)
        return records, bad

    def read(self) -> list[dict]:
        """The sound records; each unreadable line becomes a warning naming the file and line."""
        records, bad = self.scan()
        for item in bad:
            warnings.warn(f"{self.path}:{item.line}: skipped: {item.reason}", StoreWarning, stacklevel=2)
        return records


def append_or_show(store: Store, record: dict) -> None:
    """``store.append(record)``; when the store cannot take it (a full disk), the record goes to
    stderr as one JSON line (to save and ``vnetbench ingest`` later) before the StoreError."""
    try:
        store.append(record)
    except StoreError:
        print(f"vnetbench: the record of this run could not be stored; it follows as one JSON line "
              f"(save it and 'vnetbench ingest FILE --store {store.path}' once there is room):",
              file=sys.stderr)
        print(json.dumps(record, sort_keys=True, separators=(",", ":")), file=sys.stderr, flush=True)
        raise


class StoreWarning(UserWarning):
    pass


def _last_byte(fd: int, size: int) -> bytes:
    return os.pread(fd, 1, size - 1)
