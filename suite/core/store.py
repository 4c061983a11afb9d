"""The results store: JSON Lines, one record per run and repetition, appended atomically.

Appends take an exclusive lock and write each record with a single write() of one whole
line, then fsync, so concurrent writers never interleave and a crash leaves at most a
truncated last line, which readers skip with a warning. The lock is flock(2) on the store;
where the file system has no flock (Lustre mounted without it, some NFS setups) it is a lock
file beside the store (filelock's SoftFileLock: created exclusively, names its holder, so a
dead holder's lock is taken over).

Reading streams the file a bounded line at a time (suite/core/files.py), so memory follows
the longest line, not the store's size, and a device or FIFO given as a store is refused.
"""

import errno
import fcntl
import json
import os
import sys
import warnings
from collections import namedtuple
from pathlib import Path

from .errors import StoreError, UsageError
from .records import check_record

DEFAULT_PATH = Path("vnetbench-results") / "results.jsonl"


# flock(2) errors that mean "this file system cannot", not "someone holds it"
NO_FLOCK = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)
# how long an append waits for another writer's lock file before giving up
LOCK_FILE_WAIT_S = 120.0


class BadLine(namedtuple("BadLine", "line reason schema_version", defaults=(None,))):
    """A line of a store that is not a record: its number, why, and what a JSON object that is not a record
    says it is (``schema_version``). A named tuple, not a dataclass (``vnetbench.cli`` says why)."""

    __slots__ = ()


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
            if not target.is_file():  # a device or FIFO would take records and keep none
                raise UsageError(f"--store: {target} is not a regular file")
            if not os.access(target, os.W_OK):
                raise UsageError(f"--store: {target} is not writable")
            return
        created = []
        try:
            created = _make_parents(target)
            # a probe beside the store, not the store itself: a concurrent writer may create and open the
            # store meanwhile, and must neither meet "exists" here nor have its file unlinked under it
            probe = target.with_name(f".{target.name}.probe-{os.getpid()}")
            fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.close(fd)
            probe.unlink()
        except OSError as exc:
            raise UsageError(f"--store: cannot create {target}: {exc.strerror}") from None
        finally:
            _remove_folders(created)

    def append(self, record: dict) -> None:
        problems = check_record(record)
        if problems:
            raise StoreError(f"refusing to store a malformed record: {'; '.join(problems)}")
        line = (json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n").encode()
        folders = []
        try:
            folders = _make_parents(self.path)
            fd, created = _open_or_create(self.path)
        except OSError as exc:
            _remove_folders(folders)
            raise StoreError(f"cannot open store {self.path}: {exc.strerror}") from exc
        fallback = None
        try:
            try:
                fallback = self._lock(fd)
            except StoreError:
                # neither lock works: what this append created goes again. Empty, nobody wrote to it: a writer
                # that held the lock file meanwhile writes as soon as it has it
                if created and os.fstat(fd).st_size == 0:
                    self.path.unlink(missing_ok=True)
                    _remove_folders(folders)
                raise
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
            os.close(fd)  # releases the flock
            if fallback is not None:
                fallback.release()

    @property
    def lock_path(self) -> Path:
        """The lock file beside the store, used only where flock is unavailable."""
        return self.path.with_name(self.path.name + ".lock")

    def _lock(self, fd: int):
        """Hold the store exclusively: flock on ``fd`` (None returned), or where the file system has
        no flock, the lock file beside the store (returned, to release after the write)."""
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            return None
        except OSError as exc:
            if exc.errno not in NO_FLOCK:
                raise
            why = exc.strerror
        import filelock  # here: only file systems without flock need it, and its import costs every run start

        lock = filelock.SoftFileLock(self.lock_path, timeout=LOCK_FILE_WAIT_S)
        try:
            lock.acquire()
        except filelock.Timeout:
            raise StoreError(f"cannot lock store {self.path}: flock is unavailable here ({why}) and the lock file "
                             f"{self.lock_path} was held for {LOCK_FILE_WAIT_S:.0f} s; if no vnetbench is "
                             f"writing, remove it") from None
        except OSError as exc:
            raise StoreError(f"cannot lock store {self.path}: flock is unavailable here ({why}) and the lock file "
                             f"{self.lock_path} cannot be created ({exc.strerror or exc}); store on a file system "
                             f"with flock or a writable directory") from None
        return lock

    def entries(self, option: str = "--store"):
        """Each non-blank line of the store in order, streamed: (line number, record), or a BadLine
        for a line that is not a sound record (not JSON, not a record, longer than MAX_LINE).

        UsageError naming ``option`` when the store is missing or not a regular file.
        """
        # here: the bounded readers' module imports PyYAML, which a run that only appends does not need
        from vnetbench.core.files import MAX_LINE, bounded_lines, open_regular

        if not self.path.exists():
            raise UsageError(f"{option}: {self.path} does not exist")
        with open_regular(self.path, option, UsageError) as handle:
            try:
                for number, text in bounded_lines(handle):
                    if text is None:
                        yield BadLine(number, f"longer than {MAX_LINE >> 20} MiB; not read")
                    elif text.strip():
                        yield _parse(number, text)
            except OSError as exc:
                raise StoreError(f"cannot read store {self.path}: {exc.strerror}") from exc

    def scan(self) -> tuple[list[dict], list[BadLine]]:
        """All sound records, and the lines that are not (with their numbers and why)."""
        records, bad = [], []
        for entry in self.entries():
            if isinstance(entry, BadLine):
                bad.append(entry)
            else:
                records.append(entry[1])
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


def _parse(number: int, text: bytes):
    try:
        record = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        reason = ("truncated last line (a writer was killed mid-write)" if not text.endswith(b"\n")
                  else f"not JSON ({exc.__class__.__name__})")
        return BadLine(number, reason)
    problems = check_record(record)
    if problems:
        version = record.get("schema_version") if isinstance(record, dict) else None
        return BadLine(number, "not a vnetbench record: " + "; ".join(problems[:3]), version)
    return number, record


def _make_parents(target: Path) -> list[Path]:
    """Create the folders missing above ``target``; those created, outermost first."""
    created = []
    for parent in reversed(target.parents):
        if not parent.exists():
            try:
                parent.mkdir()
            except FileExistsError:  # another writer made it meanwhile
                continue
            except OSError:
                _remove_folders(created)
                raise
            created.append(parent)
    return created


def _remove_folders(created: list[Path]) -> None:
    for parent in reversed(created):
        try:
            parent.rmdir()
        except OSError:  # no longer empty: another writer uses it
            pass


def _open_or_create(path: Path) -> tuple[int, bool]:
    """(fd open for appending, whether this call created the file)."""
    while True:
        try:
            return os.open(path, os.O_RDWR | os.O_APPEND), False
        except FileNotFoundError:
            pass
        try:
            return os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o644), True
        except FileExistsError:  # another writer created it meanwhile
            continue


def _last_byte(fd: int, size: int) -> bytes:
    return os.pread(fd, 1, size - 1)
