"""The profiler's event trace (``--profile trace``): its format and its reader.

``load_trace(path_or_record, store=None) -> Trace``; ``Trace.ranks``, ``Trace.truncated``, ``Trace.elapsed[rank]``,
``Trace.events(rank) -> list[Event]`` (time order). A truncated or corrupt file raises ``TraceError`` (a
``UsageError``: one line, exit 2). ``python -m vnetbench.profile.trace FILE`` prints a file's outline.

The stored file (``<store>.profiles/<run_id>.trace.gz``, its path in the record relative to the store's folder)
is gzip of::

    b"VNBTRACE", u32 version (1), u32 ranks, then per rank (in rank order): u64 length, that rank's blob

and a rank's blob is what the interposer (interposer.c, ``write_trace``) wrote at MPI_Finalize, little endian::

    b"VNBTRC01", u32 version (1), i32 rank, i32 world size, u32 flags (1: truncated), u64 events,
    u64 dropped (events and items the cap left out), f64 elapsed (MPI_Init's return to MPI_Finalize's entry)
    u32 call names, each: u8 length, the name ("MPI_Send", ...): an event's ``call`` indexes them
    u32 communicators, u64 their bytes, each: i32 n, n x i32 members as WORLD ranks (by communicator rank)
    u64 events' bytes, the events, each: u16 call, u16 items, i32 communicator (-1: none), f64 t0, f64 t1,
        i64 nbytes, i32 root (WORLD rank, -1), i32 pad, then ``items`` items, each: i8 kind (0 send, 1 recv,
        2 complete), 3 pad, i32 peer (WORLD rank; -1 unknown), i64 bytes, i32 tag, i32 pad, i64 request id
    b"VNBTRCND"

An event's times are seconds since that rank's MPI_Init returned (CLOCK_MONOTONIC). ``sends``: messages the
call posts (blocking or not; a persistent request's at its MPI_Start); ``recvs``: receives it posts (a blocking
receive with its actual source and bytes; a nonblocking one with the posted source, -1 for MPI_ANY_SOURCE,
and the posted buffer's bytes); ``completes``: requests it completed, with a receive's actual source and bytes
(a send's completion has peer -1 and 0 bytes: its post has them). Request ids count per rank from 0; blocking
calls' messages have -1. A collective's ``nbytes`` is the data its arguments give on this rank: Bcast, Reduce,
Allreduce, Scan, Exscan count x type size; Gather(v), Allgather(v) this rank's block; Scatter(v) the block
this rank receives; Alltoall(v) all this rank sends; Reduce_scatter(_block) the whole input vector.
"""

import gzip
import struct
import sys
import zlib
from collections import namedtuple
from pathlib import Path

from vnetbench.core.errors import UsageError

MAGIC, RANK_MAGIC, END_MAGIC = b"VNBTRACE", b"VNBTRC01", b"VNBTRCND"
VERSION = 1
EVENT = struct.Struct("<HHiddqii")  # 40 bytes
ITEM = struct.Struct("<b3xiqi4xq")  # 32 bytes
HEADER = struct.Struct("<8sIiiIQQd")
MAX_EXPANDED = 16 << 30  # a stored trace is refused beyond this many bytes uncompressed


class TraceError(UsageError):
    """A trace that cannot be read whole: truncated, corrupt, or of another format."""


Event = namedtuple("Event", "call t0 t1 sends recvs completes comm nbytes root")
Event.__doc__ = "One MPI call of one rank (see the module's docstring for the fields)."


class Trace:
    """A whole job's trace: ``ranks`` (the world size), ``truncated`` (some rank's cap was hit: events are
    missing), ``elapsed[rank]`` (seconds), ``dropped[rank]``, and ``events(rank)``."""

    def __init__(self, path, blobs: list[bytes]):
        self.path = str(path)
        self._ranks = [_Rank(blob, f"{path}: rank {i}") for i, blob in enumerate(blobs)]
        self.ranks = len(self._ranks)
        for i, rank in enumerate(self._ranks):
            if rank.rank != i or rank.size != self.ranks:
                raise TraceError(f"{path}: rank {i}'s part says rank {rank.rank} of {rank.size}, not {i} of "
                                 f"{self.ranks}")
        self.truncated = any(rank.truncated for rank in self._ranks)
        self.elapsed = [rank.elapsed for rank in self._ranks]
        self.dropped = [rank.dropped for rank in self._ranks]

    def events(self, rank: int) -> list[Event]:
        return self._ranks[rank].decode()

    def __repr__(self) -> str:
        return f"Trace({self.path!r}, ranks={self.ranks}, truncated={self.truncated})"


class _Rank:
    def __init__(self, blob: bytes, where: str):
        self.blob, self.where = blob, where
        try:
            magic, version, self.rank, self.size, flags, self.count, self.dropped, self.elapsed = \
                HEADER.unpack_from(blob, 0)
            if magic != RANK_MAGIC or version != VERSION:
                raise TraceError(f"{where}: not a vnetbench rank trace of version {VERSION}")
            self.truncated = bool(flags & 1)
            at = HEADER.size
            (names,) = struct.unpack_from("<I", blob, at)
            at += 4
            self.names = []
            for _ in range(names):
                length = blob[at]
                self.names.append(blob[at + 1:at + 1 + length].decode("ascii"))
                at += 1 + length
            comms, comm_bytes = struct.unpack_from("<IQ", blob, at)
            at += 12
            table, self.comms = blob[at:at + comm_bytes], []
            at += comm_bytes
            pos = 0
            for _ in range(comms):
                (n,) = struct.unpack_from("<i", table, pos)
                self.comms.append(tuple(struct.unpack_from(f"<{n}i", table, pos + 4)))
                pos += 4 * (1 + n)
            (event_bytes,) = struct.unpack_from("<Q", blob, at)
            at += 8
            self.start, self.end = at, at + event_bytes
            if blob[self.end:self.end + 8] != END_MAGIC or self.end + 8 != len(blob):
                raise TraceError(f"{where}: truncated or corrupt (no end mark after the events)")
        except (struct.error, IndexError, UnicodeDecodeError, ValueError) as exc:
            raise TraceError(f"{where}: truncated or corrupt ({exc})") from None

    def decode(self) -> list[Event]:
        blob, at, out = self.blob, self.start, []
        try:
            while at < self.end:
                call, items, comm, t0, t1, nbytes, root, _ = EVENT.unpack_from(blob, at)
                at += EVENT.size
                sends, recvs, completes = [], [], []
                for kind, peer, size, tag, req in ITEM.iter_unpack(blob[at:at + items * ITEM.size]):
                    if kind == 0:
                        sends.append((peer, size, tag, req))
                    elif kind == 1:
                        recvs.append((peer, size, tag, req))
                    else:
                        completes.append((req, peer, size))
                at += items * ITEM.size
                out.append(Event(self.names[call], t0, t1, tuple(sends), tuple(recvs), tuple(completes),
                                 self.comms[comm] if comm >= 0 else None, nbytes, root))
        except (struct.error, IndexError) as exc:
            raise TraceError(f"{self.where}: corrupt events ({exc})") from None
        if at != self.end:
            raise TraceError(f"{self.where}: corrupt events (they overrun their section)")
        return out


def pack(blobs: list[bytes], target) -> int:
    """Write the ranks' blobs (in rank order) as one stored trace at ``target``; its size in bytes."""
    with gzip.open(target, "wb", compresslevel=6) as out:
        out.write(MAGIC + struct.pack("<II", VERSION, len(blobs)))
        for blob in blobs:
            out.write(struct.pack("<Q", len(blob)))
            out.write(blob)
    return Path(target).stat().st_size


def trace_path(path_or_record, store=None) -> Path:
    """Where a record's trace is (its ``profile.trace.path`` relative to ``store``'s folder), or the path given."""
    if isinstance(path_or_record, dict):
        trace = (path_or_record.get("profile") or {}).get("trace") or {}
        if not trace.get("path"):
            raise TraceError(f"run {path_or_record.get('run_id')}: no trace (profiled with --profile trace?)")
        folder = Path(store).parent if store is not None else Path.cwd()
        return folder / trace["path"]
    return Path(path_or_record)


def load_trace(path_or_record, store=None) -> Trace:
    """The trace at a path, or of a record (``store``: the store it came from)."""
    path = trace_path(path_or_record, store)
    try:
        with gzip.open(path, "rb") as handle:
            data = handle.read(MAX_EXPANDED + 1)
    except FileNotFoundError:
        raise TraceError(f"{path}: no such trace file") from None
    except (OSError, EOFError, zlib.error) as exc:
        raise TraceError(f"{path}: truncated or corrupt trace ({exc})") from None
    if len(data) > MAX_EXPANDED:
        raise TraceError(f"{path}: more than {MAX_EXPANDED >> 30} GiB uncompressed")
    if data[:8] != MAGIC:
        raise TraceError(f"{path}: not a vnetbench trace")
    try:
        version, ranks = struct.unpack_from("<II", data, 8)
        if version != VERSION:
            raise TraceError(f"{path}: trace version {version}; this vnetbench reads {VERSION}")
        at, blobs = 16, []
        for rank in range(ranks):
            (length,) = struct.unpack_from("<Q", data, at)
            at += 8
            if at + length > len(data):
                raise TraceError(f"{path}: truncated (rank {rank}'s part is cut short)")
            blobs.append(data[at:at + length])
            at += length
    except struct.error:
        raise TraceError(f"{path}: truncated (the ranks' parts are cut short)") from None
    if at != len(data):
        raise TraceError(f"{path}: corrupt ({len(data) - at} bytes after the last rank's part)")
    return Trace(path, blobs)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m vnetbench.profile.trace FILE", file=sys.stderr)
        return 2
    try:
        trace = load_trace(argv[0])
        print(f"{trace.path}: {trace.ranks} ranks{', truncated' if trace.truncated else ''}")
        for rank in range(trace.ranks):
            events = trace.events(rank)
            print(f"  rank {rank}: {len(events)} events, {trace.elapsed[rank]:.6f} s")
    except UsageError as exc:
        print(f"vnetbench: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
