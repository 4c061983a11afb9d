"""A topology's costs, from calibrations: a message's one-way time and occupancy on each path, a collective's time.

For a path measured by a calibration (``calibration.path_table``):

- ``oneway(s)``: half of pingpong's median round trip at size ``s`` (LogGP's o + L + (s-1)G), interpolated
  log-log between the measured sizes; below the smallest, the smallest's; above the largest, the largest's
  plus the extra bytes at the largest size's bandwidth;
- ``occupancy(s)``: how long one message of ``s`` bytes keeps the path busy when messages stream (LogGP's g and
  G): ``s / bandwidth(s)``, the windowed bandwidth interpolated over log size, never more than ``oneway(s)`` and,
  on an uplink, never less than its wire time ``s*8/rate`` (a lone message may cross faster, in the shaper's
  burst; a stream leaves at the rate).

- ``endpoint(s)``: how long a message keeps each of its two ends busy - the CPU that copies it and runs the
  path's protocol stack, shared by everything a rank sends and receives at once: ``s / bibw(s)``, the
  bidirectional bandwidth (both directions' bytes over the time, both ranks sending at once), never more than
  ``occupancy(s)`` (one direction streams through one end at least that fast). Where the wire limits a path, both
  directions stream at once and ``endpoint(s)`` is half the occupancy, which never binds; where the ends' CPU
  limits it (TCP between two emulated VMs on one host: 1 MiB each way at once took twice as long as one way),
  messages crossing at once in both directions take turns (``replay``). A calibration without bidirectional
  bandwidth gives no endpoint cost.

A shaper counts what crosses the wire - every packet's Ethernet, IP and TCP headers with its payload - where
messages are payload: an uplink's payload leaves at its streamed bandwidth, the calibration's largest size, never
above the rate (``payload_share``: 1448 of every 1514 bytes at a 1500-byte MTU, 0.956; less when the path's own
CPU cost, not its shaper, limits the stream).
  Back-to-back messages on one path queue behind each other's occupancy (``replay``).

A path no calibration of this topology holds is extrapolated (``Costs.extrapolated``) from calibrations of its
parts, in this order: the same path key measured on another topology (``4vm-4vswitch``'s uplinks are
``2vm-2vswitch``'s); ranks inside one emulated VM from the host's shared memory (netns VMs are this host's
memory); an uplink of another rate or delay from a measured uplink of the same switch kinds: its one-way time
with the measured wire time (s*8/rate) replaced by the new rate's, never below one switch's, plus the delay,
and its occupancy the new wire time, never below one switch's. Anything else (a switch kind never calibrated)
is a ``CalibrationError``.

A collective's time: the allreduce table measured on the topology at the same rank count and worst path
(``allreduce``); a barrier is an allreduce of 8 bytes; without a table (another rank count, an extrapolated
path) a p2p decomposition of recursive doubling (ceil(log2 n) rounds of one exchange on the worst path);
other collectives by their p2p decomposition (``collective``).
"""

import bisect
import math

from vnetbench.core.errors import UsageError

from vnetbench.topologies.model import units

from . import paths


class CalibrationError(UsageError):
    """What a prediction needs and no calibration holds (exit 2)."""


class Curve:
    """A measured path: ``oneway(s)`` and ``occupancy(s)`` in seconds from a table of sizes."""

    def __init__(self, rows: list[dict], rate_bps: int | None = None):
        self.rate_bps = rate_bps
        rows = sorted((r for r in rows if r.get("bytes") and r.get("oneway_us") and r.get("bandwidth_mbps")),
                      key=lambda r: r["bytes"])
        if not rows:
            raise CalibrationError("a calibration's path has no measured sizes")
        self.sizes = [float(r["bytes"]) for r in rows]
        self.logs = [math.log(s) for s in self.sizes]
        self.oneways = [r["oneway_us"] * 1e-6 for r in rows]
        self.bandwidths = [r["bandwidth_mbps"] * 1e6 for r in rows]  # bytes/s
        both = [r.get("bibw_mbps") for r in rows]
        self.bibws = [b * 1e6 for b in both] if all(isinstance(b, (int, float)) and b > 0 for b in both) else None

    def _at(self, values, size: float, logy: bool) -> float:
        if size <= self.sizes[0]:
            return values[0]
        i = bisect.bisect_left(self.sizes, size)
        if i >= len(self.sizes):
            return values[-1]
        x0, x1, x = self.logs[i - 1], self.logs[i], math.log(size)
        f = (x - x0) / (x1 - x0)
        if logy:
            return math.exp(math.log(values[i - 1]) * (1 - f) + math.log(values[i]) * f)
        return values[i - 1] * (1 - f) + values[i] * f

    def bandwidth(self, size: float) -> float:
        return self._at(self.bandwidths, max(size, 1.0), False)

    def oneway(self, size: float) -> float:
        if size > self.sizes[-1]:
            return self.oneways[-1] + (size - self.sizes[-1]) / self.bandwidths[-1]
        return self._at(self.oneways, max(size, 1.0), True)

    def occupancy(self, size: float) -> float:
        # never more than the one-way time: a message streams through its path at least as fast as it crosses it
        # alone (a windowed bandwidth that says otherwise was disturbed - other work on a shared machine); never less
        # than an uplink's wire time: a stream leaves at its rate, whatever a lone message's burst did
        occupancy = min(max(size, 1.0) / self.bandwidth(size), self.oneway(size))
        return max(occupancy, max(size, 1.0) * 8.0 / self.rate_bps) if self.rate_bps else occupancy

    def endpoint(self, size: float) -> float:
        if self.bibws is None:
            return 0.0
        return min(max(size, 1.0) / self._at(self.bibws, max(size, 1.0), False), self.occupancy(size))


def payload_share(curve: Curve, rate_bps: int) -> float:
    """The share of a shaped uplink's rate its messages' payload gets: the measured streamed bandwidth (the largest
    size's) over the rate, never above 1."""
    return min(1.0, curve.bandwidths[-1] * 8.0 / rate_bps)


class Rerated:
    """An uplink path at another rate (bits/s) and delay (us), from a measured uplink ``base`` at ``base_rate`` and,
    where measured, one switch of the same kind (``floor``): see the module's docstring."""

    def __init__(self, base: Curve, base_rate: int, base_delay_us: int, rate: int, delay_us: int, floor=None):
        self.base, self.floor = base, floor
        self.base_rate, self.rate = base_rate, rate
        self.shift = (delay_us - base_delay_us) * 1e-6
        # the headers' share of the wire is the MTU's, whatever the rate: the measured uplink's
        self.share = payload_share(base, base_rate)

    def oneway(self, size: float) -> float:
        wire = size * 8.0 * (1.0 / self.rate - 1.0 / self.base_rate) / self.share
        floor = self.floor.oneway(size) if self.floor else 0.0
        return max(floor, self.base.oneway(size) + wire) + self.shift

    def occupancy(self, size: float) -> float:
        wire = max(size, 1.0) * 8.0 / self.rate / self.share
        floor = self.floor.occupancy(size) if self.floor else 0.0
        return max(floor, wire)

    def endpoint(self, size: float) -> float:  # the ends are one switch's, where measured: the rate is the wire's
        return min((self.floor or self.base).endpoint(size), self.occupancy(size))


class Shifted:
    """A curve with a fixed one-way time added (an uplink without its shaper: one switch, plus the uplink's extra
    hops and delay)."""

    def __init__(self, base, extra_s: float):
        self.base, self.extra = base, extra_s

    def oneway(self, size: float) -> float:
        return self.base.oneway(size) + self.extra

    def occupancy(self, size: float) -> float:
        return self.base.occupancy(size)

    def endpoint(self, size: float) -> float:
        return self.base.endpoint(size)


class Costs:
    """What a prediction on ``topology`` at ``ranks`` ranks costs, from ``own`` (its own calibration record, or
    None) and ``others`` (fresh calibrations of other topologies, same MPI): ``p2p``, ``collective``; and what it
    rests on (``rests_on``: calibration run ids; ``extrapolated``; ``notes``: how each path was found)."""

    def __init__(self, topology, ranks: int, own: dict | None, others: list[dict]):
        self.topology, self.ranks = topology, ranks
        self.own, self.others = own, others
        self.pairs = paths.classify(topology, ranks)
        self.curves: dict[str, object] = {}
        self.rests_on: list[str] = []
        self.notes: dict[str, str] = {}
        self.extrapolated = False
        self._worst: dict[tuple, paths.Path] = {}
        self._tables: dict[tuple, Curve] = {}
        self.buckets: dict[str, tuple[float, int]] = {}  # uplink key -> its shaper's (bytes/s, burst bytes)
        for path in {p.key: p for p in self.pairs.values()}.values():
            self.curves[path.key] = self._resolve(path)
            if path.kind == "uplink":
                self._unshape(path)

    def _unshape(self, path: paths.Path) -> None:
        """An uplink emulated here crosses a token bucket (tc tbf: the rate, and a burst of 2 ms at the rate, at least
        128 KiB): a message that finds tokens crosses as over one switch, one that does not waits for them (the
        replay keeps each directed pair's bucket). Where one switch of the uplink's kind is calibrated its costs
        stand for the unshaped path, plus the uplink's extra hops (its 8 B one-way time over one switch's) and delay;
        without one, the uplink's own measured costs stand, shaping included, and no bucket is kept. The bucket
        holds payload bytes: the shaper's rate and burst times the share of the wire the payload gets
        (``payload_share``)."""
        bucket = paths.shaper(path)
        switch = self._measured(f"switch/{path.backend}/{path.switch_kinds[0]}") if len(path.switch_kinds) == 1 \
            else None
        if bucket is None or switch is None:
            return
        record, table = switch
        self._rest_on(record, False)
        one = Curve(table["sizes"])
        uplink = self.curves[path.key]
        extra = max(0.0, uplink.oneway(8) - one.oneway(8)) if not isinstance(uplink, Rerated) \
            else max(0.0, uplink.base.oneway(8) - one.oneway(8)) + uplink.shift
        self.curves[path.key] = Shifted(one, extra)
        share = uplink.share if isinstance(uplink, Rerated) else payload_share(uplink, path.rate)
        self.buckets[path.key] = (bucket[0] * share, int(bucket[1] * share))
        self.notes[path.key] = (f"{self.notes.get(path.key)}; streamed through the uplinks' token bucket "
                                f"({units.format_rate(path.rate)}, burst {bucket[1] >> 10} KiB; payload "
                                f"{share:.3f} of the wire, as streamed), one switch's costs "
                                f"(measured on {record['calibration']['topology']}) +{extra * 1e6:.1f} us otherwise")

    # ---- finding each path ---------------------------------------------------------------

    def _rest_on(self, record: dict, extrapolated: bool) -> None:
        if record["run_id"] not in self.rests_on:
            self.rests_on.append(record["run_id"])
        self.extrapolated |= extrapolated

    def _measured(self, key: str) -> tuple[dict, dict] | None:
        for record in ([self.own] if self.own else []) + self.others:
            table = record["calibration"]["paths"].get(key)
            if table:
                return record, table
        return None

    def _resolve(self, path: paths.Path):
        found = self._measured(path.key)
        if found:
            record, table = found
            own = record is self.own
            self._rest_on(record, not own)
            self.notes[path.key] = "measured" if own else f"measured on {record['calibration']['topology']}"
            return Curve(table["sizes"], table.get("rate_bps"))
        if path.kind == "vm" and path.backend == "netns":
            found = self._measured("host")
            if found:
                self._rest_on(found[0], True)
                self.notes[path.key] = (f"this host's shared memory (calibration of "
                                        f"{found[0]['calibration']['topology']}): an emulated VM's ranks share it")
                return Curve(found[1]["sizes"])
        if path.kind == "uplink":
            rerated = self._rerate(path)
            if rerated is not None:
                return rerated
        raise CalibrationError(
            f"--topology: no calibration holds the path {path.key} ({path.describe()}) of {self.topology.name}; "
            f"calibrate a topology that has it (vnetbench calibrate --topology ...)")

    def _rerate(self, path: paths.Path):
        prefix = f"uplink/{path.backend}/{'+'.join(path.switch_kinds)}/"
        for record in ([self.own] if self.own else []) + self.others:
            for key, table in record["calibration"]["paths"].items():
                if not key.startswith(prefix) or "rate_bps" not in table:
                    continue
                floor = self._measured(f"switch/{path.backend}/{path.switch_kinds[0]}")
                self._rest_on(record, True)
                if floor:
                    self._rest_on(floor[0], True)
                self.notes[path.key] = (f"extrapolated from {key} measured on {record['calibration']['topology']}, "
                                        f"at "
                                        f"{units.format_rate(path.rate)}"
                                        + (f" +{path.delay_us} us" if path.delay_us else "")
                                        + (f", no faster than one switch (measured on "
                                           f"{floor[0]['calibration']['topology']})" if floor else ""))
                return Rerated(Curve(table["sizes"]), table["rate_bps"], table.get("delay_us") or 0, path.rate,
                               path.delay_us or 0, Curve(floor[1]["sizes"]) if floor else None)
        return None

    # ---- costs ---------------------------------------------------------------------------

    def path(self, a: int, b: int) -> paths.Path:
        return self.pairs[(a, b) if a < b else (b, a)]

    def p2p(self, src: int, dst: int, nbytes: int) -> tuple[float, float, str]:
        """(one-way seconds, occupancy seconds, path key) of a message of ``nbytes`` from ``src`` to ``dst``."""
        if src == dst:
            return 0.0, 0.0, "self"
        key = self.path(src, dst).key
        curve = self.curves[key]
        return curve.oneway(nbytes), curve.occupancy(nbytes), key

    def endpoint(self, src: int, dst: int, nbytes: int) -> float:
        """Seconds a message of ``nbytes`` from ``src`` to ``dst`` keeps each of its ends busy (``Curve.endpoint``)."""
        if src == dst:
            return 0.0
        return self.curves[self.path(src, dst).key].endpoint(nbytes)

    def worst(self, members: tuple[int, ...]) -> paths.Path | None:
        """The slowest path (one-way time of 8 bytes) between any two ``members``; None for one member."""
        if members not in self._worst:
            pairs = [self.path(a, b) for i, a in enumerate(members) for b in members[i + 1:]]
            self._worst[members] = max(pairs, key=lambda p: self.curves[p.key].oneway(8)) if pairs else None
        return self._worst[members]

    def _exchange(self, key: str, nbytes: float) -> float:
        curve = self.curves[key]
        return curve.oneway(nbytes) + curve.occupancy(nbytes)

    def allreduce(self, members: tuple[int, ...], nbytes: float) -> float:
        n = len(members)
        path = self.worst(members)
        if path is None:
            return 0.0
        table = self._allreduce_table(n, path.key)
        if table is not None:
            return table.oneway(nbytes)
        return math.ceil(math.log2(n)) * self._exchange(path.key, nbytes)

    def _allreduce_table(self, n: int, key: str):
        for record in ([self.own] if self.own else []) + self.others:
            measured = record["calibration"].get("allreduce", {}).get(str(n))
            if measured and measured["path"] == key:
                self._rest_on(record, record is not self.own)
                if (n, key) not in self._tables:
                    rows = [{"bytes": r["bytes"], "oneway_us": r["us"], "bandwidth_mbps": 1.0} for r in
                            measured["sizes"]]
                    self._tables[(n, key)] = Curve(rows)
                return self._tables[(n, key)]
        return None

    def collective(self, call: str, members: tuple[int, ...], nbytes: float, root: int = -1) -> float:
        """Seconds a collective takes once its last member entered it (``nbytes``: what each member contributes;
        a nonblocking collective is costed as its blocking twin)."""
        n = len(members)
        if n < 2:
            return 0.0
        name = call.lower().removeprefix("pmpi_").removeprefix("mpi_")
        if name.startswith("i") and name[1:].startswith(COLLECTIVES):
            name = name[1:]
        if name.startswith("barrier"):
            return self.allreduce(members, 8)
        curve = self.curves[self.worst(members).key]
        if name.startswith("bcast"):  # a binomial tree: ceil(log2 n) sends one after another
            return math.ceil(math.log2(n)) * curve.oneway(nbytes)
        if name.startswith("alltoall"):  # n-1 pairwise exchanges of a member's share for each peer
            share = nbytes / n
            return (n - 1) * curve.occupancy(share) + curve.oneway(share)
        if name.startswith("allgather"):  # a ring: n-1 steps, each one message of a member's contribution
            return (n - 1) * (curve.oneway(nbytes) + curve.occupancy(nbytes))
        if name.startswith(("gather", "scatter")):  # the root sends or receives n-1 messages, streamed
            return (n - 1) * curve.occupancy(nbytes) + curve.oneway(nbytes)
        return self.allreduce(members, max(nbytes, 8))  # allreduce, reduce, reduce_scatter, scan: as allreduce


COLLECTIVES = ("barrier", "bcast", "alltoall", "allgather", "gather", "scatter", "allreduce", "reduce", "scan",
               "exscan", "neighbor")
