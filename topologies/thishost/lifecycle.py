"""The life of a VM topology kept up on this host: bring-up, take-down, status and cleanup around its state file.

Shared by the backends whose topologies are a state file under /run/vnetbench/ID plus objects on this
host (netns, qemu). A backend hands over its own part as a ``Kind`` (how it lays a topology
out, creates and removes what the layout names, what of it is missing, its orphans); the flow around
it is here, once: one vnetbench at a time changes what is up (the state lock); the state is written
before anything is made, so that a crash leaves nothing that cannot be found; a topology left by a
dead run is replaced, one in use by a live run refused; a teardown holds ^C until it is done. ``Owned``
is the realised object's side of it: up for this process and down at its end, or attached to.
"""

import atexit
import ipaddress
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable

from vnetbench.core.errors import Interrupted, LaunchError, SpecError, UsageError, signals_blocked

from . import state
from vnetbench.topologies.base import idle_vms


@dataclass(frozen=True)
class Kind:
    """A backend's part in the life of its topologies (the state ``st`` is a dict, as written)."""

    backend: str
    require: Callable[[], None]  # UsageError unless this host can make and remove the backend's objects
    preflight: Callable[[object], None]  # the same for one topology, before anything is made
    layout: Callable[[object, object, ipaddress.IPv4Network], dict]  # (topology, host, subnet) -> st["layout"]
    create: Callable[[dict], None]  # make what st names (st may gain fields, written once it is complete)
    teardown: Callable[[dict], None]  # remove what st names that exists; LaunchError naming what is left
    missing: Callable[[dict], list[str]]  # what st names that is gone (damaged)
    orphans: Callable[[set[str]], list[str]]  # remove objects of no topology in the ids; phrases removed
    fields: Callable[[object, dict], dict] = lambda topology, layout: {}  # more fields for a new state
    read: Callable[[dict], object] = lambda st: None  # st's layout as the backend's plan (raises on one it cannot)
    unlabelled: bool = False  # the states that name no backend (written before states did) are this one's


def states(kind: Kind) -> list[dict]:
    """The states of this backend's topologies (complete or not)."""
    return [st for st in state.all_states() if _mine(kind, st)]


def _mine(kind: Kind, st: dict) -> bool:
    return st.get("backend", kind.backend if kind.unlabelled else None) == kind.backend


# what every state has (lifecycle's own fields)
STATE_FIELDS = ("id", "name", "source", "created", "complete", "layout")


def unreadable(kind: Kind, st: dict) -> str | None:
    """Why this vnetbench cannot read a state of its backend (None when it can): one written by another version of
    vnetbench, with fields this one does not know or lacks. Its topology is left to that version: ``status``
    shows it, ``cleanup`` keeps it and its objects, ``down`` and a bring-up under its id refuse it."""
    lacking = [name for name in STATE_FIELDS if name not in st]
    if lacking:
        return f"no {', '.join(lacking)}"
    try:
        kind.read(st)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def _other_version(st: dict, why: str) -> str:
    return (f"topology {st.get('name', '?')!r} ({st.get('id', '?')}) has a state file this vnetbench cannot read "
            f"({why}): another version of vnetbench brought it up; take it down with that version")


# ---- up -------------------------------------------------------------------------------------

def bring_up(kind: Kind, topology, persistent: bool = True, host=None,
             owner: Callable[[dict], None] | None = None) -> tuple[dict, bool]:
    """Bring ``topology`` up; (state, True), or (state, False) when it was already up (and is attached to).
    ``persistent``: left up until ``topology down``; else owned by this process, which takes it down.
    ``owner(state)`` takes on the teardown of a topology this call made, once it is complete and before this
    returns. An exception (a signal) from the first state write until ``owner`` returns tears down what was
    made; one after that, as this returns, leaves the teardown to the owner."""
    kind.preflight(topology)
    with state.locked():
        current = state.read(topology.id)
        if current is not None:
            why = unreadable(kind, current) if _mine(kind, current) else None
            if why:
                raise UsageError(_other_version(current, why))
            if current["name"] != topology.name:
                raise UsageError(f"topology {topology.name!r} shares its id {topology.id} with {current['name']!r}, "
                                 f"which is up; rename one of them")
            if state.stale(current) and _mine(kind, current):
                print(f"vnetbench: topology {current['name']} ({current['id']}) was {stale_reason(current)}; "
                      f"removing it and bringing it up afresh", file=sys.stderr)
                kind.teardown(current)
            elif current.get("spec_hash") != topology.spec_hash() or not _mine(kind, current):
                raise UsageError(f"a different topology named {topology.name!r} is up (from {current['source']}); "
                                 f"take it down first: vnetbench topology down {topology.name}")
            elif current.get("owner") and not state.is_mine(current):
                raise LaunchError(f"topology {topology.name!r} is in use by process {current['owner']['pid']}, "
                                  f"which will take it down when it ends; wait for it, or bring the topology "
                                  f"up with 'vnetbench topology up' to share it")
            else:
                if not persistent:
                    state.hold(current["id"])  # a run attached: cleanup keeps the topology while it lives
                return current, False
        if host is None:
            from .host import detect

            host = detect()
        layout = kind.layout(topology, host, subnet_for(topology, host))
        st = {"version": state.VERSION, "backend": kind.backend, "id": topology.id, "name": topology.name,
              "source": topology.source, "spec_hash": topology.spec_hash(), "spec": topology.to_dict(),
              "layout": layout, **kind.fields(topology, layout), "created": state.now(), "complete": False,
              "owner": None if persistent else state.me()}
        try:
            # from the first write on: a signal between that write and the next statement left the state
            # folder of a topology nothing else would take down (seen in the faults tier's SIGINT at bring-up)
            state.write(st)
            kind.create(st)
            st["complete"] = True
            state.write(st)
            if owner is not None:
                owner(st)
        except BaseException:
            with signals_blocked():
                kind.teardown(st)
            raise
        return st, True


def is_up(kind: Kind, topology) -> bool:
    """Is ``topology`` up as this backend's, complete, of the same spec, not stale and with nothing missing (what
    ``bring_up`` attaches to rather than makes)? A read without the lock: a preflight asks it to spare checks that
    only a bring-up needs; ``bring_up`` decides again under the lock."""
    current = state.read(topology.id)
    return (current is not None and _mine(kind, current) and not unreadable(kind, current) and current.get("complete")
            and current["name"] == topology.name and current.get("spec_hash") == topology.spec_hash()
            and not state.stale(current) and not kind.missing(current))


def subnet_for(topology, host) -> ipaddress.IPv4Network:
    """The topology's subnet, or a free /24 clear of the host's networks and of every topology that is up."""
    from .fabric import choose_subnet

    others = [(s["name"], ipaddress.IPv4Network(s["layout"]["subnet"])) for s in state.all_states()
              if s["id"] != topology.id]
    if topology.subnet is not None:
        for name, net in others:
            if net.overlaps(topology.subnet):
                raise SpecError(f"{topology.locate('subnet')}: {topology.subnet} overlaps topology {name!r} "
                                f"({net}), which is up; choose another subnet")
        return topology.subnet
    return choose_subnet(topology.id, [net for _, net in host.networks] + [net for _, net in others])


# ---- down -----------------------------------------------------------------------------------

def down(kind: Kind, topology_id: str) -> dict | None:
    """Tear down this backend's topology with this id; its state, or None when it was not up."""
    with signals_blocked(), state.locked():
        st = state.read(topology_id)
        if st is None or not _mine(kind, st):
            return None
        why = unreadable(kind, st)
        if why:
            raise UsageError(_other_version(st, why))
        kind.teardown(st)
        return st


def take_down(kind: Kind, ref: str, topology=None) -> dict | None:
    """``topology down REF``: the topology up under the name or file ``ref`` (else ``topology``, REF loaded),
    taken down; its state, or None when it is not up. One a live run owns is refused: that run takes it
    down when it ends."""
    found = [st for st in states(kind) if ref in (st.get("name"), st.get("source"))]
    if found:
        current = found[0]
    elif topology is not None:
        current = state.read(topology.id)
        if current is None or not _mine(kind, current):
            return None
    else:
        return None
    if current.get("owner") and state.alive(current["owner"]):
        raise UsageError(f"topology {current['name']!r} belongs to a run in progress (process "
                         f"{current['owner']['pid']}), which takes it down when it ends")
    kind.require()
    return down(kind, current["id"])


# ---- status and cleanup -----------------------------------------------------------------------

def stale_reason(st: dict) -> str:
    """Why a stale topology is stale, with its age: 'left up 5 min ago by process 123, which is gone'."""
    age = _age(time.time() - st["created"])
    owner = st.get("owner")
    if owner:
        return f"left up {age} ago by process {owner['pid']}, which is gone"
    return f"left half-built {age} ago (its bring-up was interrupted)"


def _age(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def status(kind: Kind, describe: Callable[[dict], dict]) -> list[dict]:
    """``topology status``' rows of this backend: ``describe(st)`` and the name, source, age, owner, whether
    it is stale or damaged, and ``state``, all of that in a phrase."""
    rows = []
    for st in states(kind):
        why = unreadable(kind, st)
        if why:
            rows.append({"id": st.get("id"), "name": st.get("name", "?"), "backend": kind.backend,
                         "age_s": max(0.0, time.time() - st["created"])
                         if isinstance(st.get("created"), (int, float)) else 0.0, "unreadable": why, "held_by": [],
                         "state": f"another vnetbench's (its state file: {why}); that version takes it down"})
            continue
        owner = st.get("owner")
        stale = state.stale(st)
        row = {**describe(st), "name": st["name"], "source": st["source"], "complete": st["complete"],
               "age_s": max(0.0, time.time() - st["created"]), "owner": owner["pid"] if owner else None,
               "stale": stale, "stale_reason": stale_reason(st) if stale else None, "missing": kind.missing(st),
               "held_by": state.holders(st)}
        if row["stale"]:
            row["state"] = f"stale, {row['stale_reason']}: 'vnetbench topology cleanup' removes it"
        elif row["missing"]:
            row["state"] = f"damaged: {', '.join(row['missing'])} missing"
        else:
            up = [] if row["owner"] else ["up (topology up)"]
            row["state"] = ", ".join(up + ([held_phrase(row["held_by"])] if row["held_by"] else []))
        row["backend"] = kind.backend
        rows.append(row)
    return rows


def held_phrase(pids: list[int]) -> str:
    """'held by run 123' (or 'runs 123, 456'), '' for none."""
    if not pids:
        return ""
    return f"held by run{'s' if len(pids) > 1 else ''} {', '.join(map(str, pids))}"


def cleanup(kind: Kind, everything: bool = False, force: bool = False) -> list[str]:
    """Remove what crashed runs of this backend left behind (with ``everything``, also what ``topology up`` left
    up; with ``force``, also the topologies of runs in progress, which then fail).

    A topology a live run holds (its owner, or a run attached to one that ``topology up`` left up) is kept unless
    ``force``; so is every topology of another backend. Objects carrying vnetbench's names that no state accounts
    for go too (``kind.orphans``). Silent, as a user, where this backend has nothing up.
    """
    if os.geteuid() != 0 and not states(kind):
        return []
    kind.require()
    removed = []
    with signals_blocked(), state.locked():
        known_ids, refused = set(), []
        for st in state.all_states():
            foreign = state.foreign_names(st) if _mine(kind, st) else []
            held = state.holders(st) if _mine(kind, st) else []
            if _mine(kind, st) and not foreign and unreadable(kind, st):
                known_ids.add(st["id"])  # another version's: it, and its objects, are that version's to remove
            elif foreign:
                known_ids.add(st["id"])  # its objects are left alone too
                refused.append(f"{state.directory(st['id'])}/state.json names what vnetbench does not make "
                               f"({', '.join(foreign[:4])})")
            elif _mine(kind, st) and (force if held else everything or state.stale(st)):
                kind.teardown(st)
                why = (f"{held_phrase(held)}, which this ends" if held else
                       stale_reason(st) if state.stale(st) else "up (topology up)")
                removed.append(f"topology {st['name']} ({st['id']}), {why}")
            else:
                known_ids.add(st["id"])
        removed += kind.orphans(known_ids)
    if refused:
        raise LaunchError(f"{'; '.join(refused)}; nothing of it was removed; check it, and remove it by hand"
                          + (f" (removed meanwhile: {', '.join(removed)})" if removed else ""))
    return removed


# ---- a topology kept up by the object that realised it --------------------------------------------

class Owned:
    """What a realised topology of a ``Kind`` does about its life (mixed into its backend's class): bring it
    up for this process - and take it down in ``close``, at exit, and on SIGTERM/SIGHUP - or attach to it when
    it is up (and then leave it up). ``state`` is its state file's content, ``brought_up`` whether this
    object made it."""

    kind: Kind

    def _bring_up(self, topology) -> None:
        self._closed = False
        self._handlers = {}
        self.brought_up = False
        # from before the first object exists: a SIGTERM half-way through tears down what was made
        self._catch_signals()
        try:
            # the teardown is this object's from inside bring_up (``_own``), so that no signal between its
            # return and this assignment can leave a complete topology that nobody takes down
            self.state, _ = bring_up(self.kind, topology, persistent=False, owner=self._own)
        except BaseException:
            # what bring_up made it took down, unless the exception came once ``_own`` had the topology (a
            # signal as bring_up returned): then it is this object's to take down (twice finds nothing)
            if self.brought_up:
                self.close()
            self._restore_signals()
            raise
        if not self.brought_up:
            atexit.register(self.close)  # lets go of the topology it attached to (state.hold)
            self._restore_signals()

    def _own(self, st: dict) -> None:
        self.state, self.brought_up = st, True
        atexit.register(self.close)

    def close(self) -> None:
        if self._closed:
            return
        # a signal held back until the end of the teardown finds the previous handlers, not ours
        self._restore_signals()
        with signals_blocked():
            # closed only once signals are held: a signal that lands before this point leaves the
            # teardown to the atexit registration, which is still there
            if self._closed:
                return
            self._closed = True
            atexit.unregister(self.close)
            if self.brought_up:
                with state.locked():
                    self.kind.teardown(self.state)
            else:
                state.release(self.state["id"])

    def _catch_signals(self):
        if threading.current_thread() is not threading.main_thread():
            return  # only the main thread may set handlers; atexit and close() still tear down

        def terminate(signum, frame):
            raise Interrupted(signum)

        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) == signal.SIG_DFL:  # the CLI has its own; a library user may not
                self._handlers[sig] = signal.signal(sig, terminate)

    def _restore_signals(self):
        for sig, handler in self._handlers.items():
            if threading.current_thread() is threading.main_thread():
                signal.signal(sig, handler)
        self._handlers = {}


# ---- a backend whose VMs live on this host ---------------------------------------------------------

class OnThisHost(Owned):
    """What the backends whose VMs live on this host (netns, qemu) do alike outside a run, said once, with their
    package's own parts: ``life`` (``KIND``, ``preflight``) and ``view`` (``preview``, ``show``, ``up_lines``,
    ``describe_state``). Mixed in before ``Realised``."""

    @classmethod
    def _part(cls, name: str):
        import importlib

        return importlib.import_module(f"{cls.__module__}.{name}")

    @classmethod
    def preflight(cls, topology) -> None:
        cls._part("life").preflight(topology)

    @classmethod
    def cannot_place(cls, topology, ranks: int) -> str | None:
        return idle_vms(len(topology.vms), ranks)

    @classmethod
    def preview(cls, topology) -> dict:
        return {"plan": cls._part("view").preview(topology),
                **({"scaled": topology.scaled} if topology.scaled else {})}

    @classmethod
    def show(cls, topology, preview: dict) -> list:
        return cls._part("view").show(topology, preview)

    @classmethod
    def up(cls, topology) -> list[str]:
        st, created = bring_up(cls._part("life").KIND, topology, persistent=True)
        return cls._part("view").up_lines(topology, st, created)

    @classmethod
    def down(cls, ref: str, topology=None) -> str | None:
        st = take_down(cls._part("life").KIND, ref, topology)
        return f"{st['name']} down" if st else None

    @classmethod
    def status(cls) -> list[dict]:
        return status(cls._part("life").KIND, cls._part("view").describe_state)

    @classmethod
    def cleanup(cls, everything: bool = False, force: bool = False) -> list[str]:
        return cleanup(cls._part("life").KIND, everything, force)

    def _bring_up(self, topology) -> None:
        self.kind = self._part("life").KIND
        super()._bring_up(topology)

    def fabric_health(self) -> tuple[str, list[str]] | None:
        """What broke in the switches and uplinks and the VMs it cut off, or None (fabric.health)."""
        from . import fabric

        lay = self.layout
        vms_on = {sw.name: [vm.name for vm in lay.vms if vm.switch == sw.name] for sw in lay.switches}
        return fabric.health(lay.fabric, vms_on)

    def describe(self) -> dict:
        described = super().describe()
        described.update(self._part("view").describe_state(self.state))
        described["attached"] = not self.brought_up
        if self.topology.scaled:
            described["scaled"] = self.topology.scaled
        return described
