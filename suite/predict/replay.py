"""The replay: a profiled program's per-rank events, run again over a model of a topology's costs.

Each rank keeps its own clock. Between two calls it computes for as long as it did when it was profiled (the gap
between one call's exit and the next one's entry, measured); a call takes what the model says, given what the
trace says it waits for:

- a send posts its messages at the call's entry. A message starts when its path is free (messages on one
  directed pair of ranks queue behind each other's occupancy) and, on an uplink shaped by a token bucket, when
  the bucket holds its bytes (``model.Costs.buckets``); it arrives one one-way time later. Each rank's end of
  its paths (the CPU that copies messages and runs the stack) is busy ``endpoint(s)`` per message it sends or
  receives, filling the end's free time from the message's start: a message has left no sooner than both its ends
  are done with it, and arrives as much later (two 1 MiB messages crossing at once between two emulated VMs
  take twice one's time). A blocking send returns when its message has left (start + occupancy, or its ends'
  turns); a nonblocking one completes then, at its Wait;
- a receive completes when its message arrived: a blocking one at max(its entry, the arrival); a nonblocking
  one at its Wait: max(the Wait's entry, the arrival). Messages match as MPI matches them: the k-th receive
  of rank b from rank a with tag t takes the k-th message a sent b with tag t (a receive from any source is
  matched by the source the trace recorded when it completed);
- a collective starts when its last member entered it and takes the model's time (``model.Costs.collective``);
  every member leaves it then;
- a call with nothing of the above (MPI_Comm_rank, a failed Test) takes as long as it did.

The program ends on each rank at its last call's exit plus the time it then computed until MPI_Finalize. The
replay's elapsed time is the latest rank's. What the replay does not model is in docs/predict.md.
"""

import bisect
from collections import defaultdict, namedtuple

from vnetbench.core.errors import UsageError


class Event(namedtuple("Event", "call t0 t1 sends recvs completes comm nbytes root",
                       defaults=((), (), (), None, 0, -1))):
    """One MPI call of one rank, as the trace reader gives it (docs/predict.md, the contract with the profiler):
    ``sends``/``recvs`` (peer, nbytes, tag, req), ``completes`` (req, peer, nbytes), ``comm`` the collective's
    members as world ranks."""

    __slots__ = ()


class ReplayError(UsageError):
    """A trace that cannot be replayed (a receive no send matches, a collective some member never enters)."""


class Stats:
    """The breakdown's counters, filled by the replay."""

    def __init__(self):
        self.calls = defaultdict(lambda: {"calls": 0, "bytes": 0, "seconds": 0.0})
        self.paths = defaultdict(lambda: {"messages": 0, "bytes": 0, "transfer_s": 0.0, "overlapped_s": 0.0})
        self.compute_s = 0.0

    def to_dict(self, ranks: int) -> dict:
        return {"calls": {k: dict(v) for k, v in sorted(self.calls.items())},
                "paths": {k: dict(v) for k, v in sorted(self.paths.items())},
                "compute_s_per_rank": self.compute_s / max(ranks, 1)}


class _Ends:
    """One rank's end of its paths: the stretches it is busy with messages. A message's work at an end fills the
    end's free time from the message's start, in as many pieces as it takes (an end interleaves what it carries,
    packet by packet: ``book``)."""

    __slots__ = ("busy",)

    def __init__(self):
        self.busy: list[list[float]] = []  # sorted, disjoint, merged [begin, end]

    def book(self, start: float, length: float) -> float:
        """Fill ``length`` seconds of free time from ``start``; when the last piece ends."""
        i = bisect.bisect_right(self.busy, [start, float("inf")]) - 1
        t, left = start, length
        if i >= 0 and self.busy[i][1] > t:
            t = self.busy[i][1]
        i += 1
        while True:
            nxt = self.busy[i][0] if i < len(self.busy) else float("inf")
            if nxt - t >= left:
                self.busy.insert(i, [t, t + left])
                end = t + left
                break
            if nxt > t:
                self.busy.insert(i, [t, nxt])
                i += 1
                left -= nxt - t
            t = self.busy[i][1]
            i += 1
        self._merge()
        return end

    def _merge(self) -> None:
        merged: list[list[float]] = []
        for begin, end in self.busy:
            if merged and begin <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([begin, end])
        self.busy = merged

    def forget(self, before: float) -> None:
        """Drop what ended before ``before`` (no message starts earlier any more)."""
        if len(self.busy) > 64:
            self.busy = [iv for iv in self.busy if iv[1] >= before]


class _Message:
    __slots__ = ("nbytes", "start", "left", "arrival", "path")

    def __init__(self, nbytes, start, left, arrival, path):
        self.nbytes, self.start, self.left, self.arrival, self.path = nbytes, start, left, arrival, path


class _Call:
    """A call being replayed: its entry, the blocking sends' messages, the blocking receives' claims, the
    requests it completes, its collective."""

    __slots__ = ("entry", "sent", "claims", "coll")

    def __init__(self, entry):
        self.entry, self.sent, self.claims, self.coll = entry, [], [], None


class Replay:
    """``Replay(events, elapsed, costs).run() -> (elapsed_s, per-rank end times, Stats)``; ``events[r]`` is rank r's
    event list in time order (``Event``), ``elapsed[r]`` its measured MPI_Init-to-MPI_Finalize seconds; ``costs``
    a ``model.Costs`` (``p2p``, ``endpoint``, ``buckets``, ``collective``, ``worst``)."""

    def __init__(self, events: list[list], elapsed: list[float], costs):
        self.events, self.elapsed, self.costs = events, elapsed, costs
        self.ranks = len(events)
        self.stats = Stats()
        self.sent: dict[tuple, list[_Message]] = defaultdict(list)  # (src, dst, tag) -> messages in order
        self.claimed: dict[tuple, int] = defaultdict(int)  # (src, dst, tag) -> receives matched so far
        self.link_free: dict[tuple, float] = defaultdict(float)  # (src, dst) -> when its path is free
        self.bucket: dict[tuple, tuple[float, float]] = {}  # (src, dst) -> (tokens, when) of a shaped uplink
        self.ends = [_Ends() for _ in events]  # rank -> its end of its paths
        self.requests: list[dict] = [{} for _ in events]  # rank -> req -> ["send", msg] | ["recv", claim]
        self.collectives: dict[tuple, dict] = {}  # (members, sequence) -> {rank: entry}
        self.sequence: list[dict] = [defaultdict(int) for _ in events]  # rank -> members -> collectives entered
        self.clock = [0.0] * self.ranks  # replayed time at the last call's exit
        self.next = [0] * self.ranks
        self.call: list[_Call | None] = [None] * self.ranks  # the pending call, once posted

    def run(self):
        while True:
            moved = False
            for rank in range(self.ranks):
                while self.next[rank] < len(self.events[rank]) and self._step(rank):
                    moved = True
            if all(self.next[r] >= len(self.events[r]) for r in range(self.ranks)):
                break
            if not moved:
                stuck = [f"rank {r} at event {self.next[r]} ({self.events[r][self.next[r]].call})"
                         for r in range(self.ranks) if self.next[r] < len(self.events[r])]
                raise ReplayError(f"trace: cannot be replayed, it waits for what no rank does: {'; '.join(stuck)}")
        ends = []
        for rank in range(self.ranks):
            evs = self.events[rank]
            tail = max(self.elapsed[rank] - (evs[-1].t1 if evs else 0.0), 0.0)
            self.stats.compute_s += tail
            ends.append(self.clock[rank] + tail)
        return (max(ends) if ends else 0.0), ends, self.stats

    # ---- one call ------------------------------------------------------------------------

    def _step(self, rank: int) -> bool:
        """Replay rank's next call if what it waits for is known; False while it waits for another rank."""
        i = self.next[rank]
        ev = self.events[rank][i]
        call = self.call[rank]
        if call is None:
            gap = max(ev.t0 - (self.events[rank][i - 1].t1 if i else 0.0), 0.0)
            self.stats.compute_s += gap
            call = self.call[rank] = _Call(self.clock[rank] + gap)
            self._post(rank, ev, call)
        done = self._done(rank, ev, call)
        if done is None:
            return False
        stat = self.stats.calls[ev.call]
        stat["calls"] += 1
        stat["bytes"] += sum(s[1] for s in ev.sends) + (ev.nbytes if ev.comm else 0)
        stat["seconds"] += done - call.entry
        self.clock[rank] = done
        if rank == 0:
            horizon = min(self.clock)
            for ends in self.ends:
                ends.forget(horizon)
        self.next[rank] += 1
        self.call[rank] = None
        return True

    def _post(self, rank: int, ev, call: _Call) -> None:
        """The call's messages leave, its receives and requests are noted, its collective entered."""
        buckets = self.costs.buckets
        for peer, nbytes, tag, req in ev.sends:
            oneway, occupancy, key = self.costs.p2p(rank, peer, nbytes)
            start = max(call.entry, self.link_free[(rank, peer)])
            if key in buckets:  # a shaped uplink: the message waits for the tokens it lacks
                start += self._tokens(rank, peer, nbytes, start, *buckets[key])
            left = start + occupancy
            busy = self.costs.endpoint(rank, peer, nbytes)
            if busy > 0.0:
                left = max(left, self.ends[rank].book(start, busy), self.ends[peer].book(start, busy))
            msg = _Message(nbytes, start, left, start + oneway + (left - start - occupancy), key)
            self.link_free[(rank, peer)] = msg.left
            self.sent[(rank, peer, tag)].append(msg)
            path = self.stats.paths[key]
            path["messages"] += 1
            path["bytes"] += nbytes
            path["transfer_s"] += msg.arrival - msg.start
            if req >= 0:
                self.requests[rank][req] = ["send", msg]
            else:
                call.sent.append(msg)
        for peer, nbytes, tag, req in ev.recvs:
            claim = self._claim(peer, rank, tag) if peer >= 0 else None
            if req >= 0:
                self.requests[rank][req] = ["recv", claim, tag]
            else:
                call.claims.append([claim if claim is not None else ["any", -1, rank, tag], None])
        if ev.comm and len(ev.comm) > 1:
            members = tuple(ev.comm)
            seq = self.sequence[rank][members]
            self.sequence[rank][members] += 1
            call.coll = (members, seq)
            self.collectives.setdefault(call.coll, {})[rank] = call.entry

    def _tokens(self, src: int, dst: int, nbytes: int, start: float, rate: float, burst: int) -> float:
        """Seconds a message of ``nbytes`` leaving at ``start`` waits for the tokens of its directed pair's bucket
        (``rate`` bytes/s, ``burst`` bytes; full at first)."""
        tokens, then = self.bucket.get((src, dst), (float(burst), start))
        tokens = min(float(burst), tokens + (start - then) * rate)
        wait = max(0.0, (nbytes - tokens) / rate)
        self.bucket[(src, dst)] = (max(0.0, tokens - nbytes), start + wait)
        return wait

    def _claim(self, src: int, dst: int, tag: int):
        """A receive's place among the messages ``src`` sends ``dst`` with ``tag`` (any tag, when negative, or any
        source: the earliest message not yet received, found when it is matched)."""
        if tag is None or tag < 0:
            return ["any", src, dst, -1]
        key = (src, dst, tag)
        index = self.claimed[key]
        self.claimed[key] += 1
        return [key, index]

    def _message(self, claim):
        """The message a claim matches, once sent; None before."""
        if claim[0] == "any":
            _, src, dst, tag = claim
            options = [(sent[self.claimed[key]].start, key) for key, sent in self.sent.items()
                       if key[1] == dst and src in (-1, key[0]) and tag in (-1, key[2])
                       and self.claimed[key] < len(sent)]
            if not options:
                return None
            key = min(options)[1]
            claim[:] = [key, self.claimed[key]]
            self.claimed[key] += 1
        key, index = claim
        sent = self.sent.get(key)
        return sent[index] if sent is not None and index < len(sent) else None

    def _done(self, rank: int, ev, call: _Call):
        """When ``ev`` returns, or None while it waits for a message or a collective's member."""
        ends = [call.entry]
        exposed = []  # (message, when its wait began) of nonblocking transfers this call completes
        for msg in call.sent:
            ends.append(msg.left)
        for held in call.claims:
            if held[1] is None:
                held[1] = self._message(held[0])
                if held[1] is None:
                    return None
            ends.append(held[1].arrival)
        for req, peer, nbytes in ev.completes:
            request = self.requests[rank].get(req)
            if request is None:
                continue  # a request the trace did not post (a persistent one): done at the call's entry
            if request[0] == "send":
                ends.append(request[1].left)
                exposed.append((request[1], request[1].left))
                continue
            if request[1] is None:  # from any source: the trace names who sent it
                request[1] = self._claim(peer, rank, request[2])
            msg = self._message(request[1]) if not isinstance(request[1], _Message) else request[1]
            if msg is None:
                return None
            request[1] = msg
            ends.append(msg.arrival)
            exposed.append((msg, msg.arrival))
        if call.coll is not None:
            entered = self.collectives[call.coll]
            if len(entered) < len(call.coll[0]):
                return None
            cost = self.costs.collective(ev.call, call.coll[0], ev.nbytes, ev.root)
            ends.append(max(entered.values()) + cost)
            worst = self.costs.worst(call.coll[0])
            if worst is not None:
                self.stats.paths[worst.key].setdefault("collective_s", 0.0)
                self.stats.paths[worst.key]["collective_s"] += cost
        elif not (ev.sends or ev.recvs or ev.completes):
            ends.append(call.entry + max(ev.t1 - ev.t0, 0.0))
        for msg, finished in exposed:  # what of a nonblocking transfer ran before its wait began
            self.stats.paths[msg.path]["overlapped_s"] += max(0.0, min(finished, call.entry) - msg.start)
        for req, _, _ in ev.completes:
            self.requests[rank].pop(req, None)
        return max(ends)
