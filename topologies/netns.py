"""The netns backend: VMs emulated on this Linux host, as namespaces, bridges and shaped veths.

A VM is a network namespace plus a UTS namespace (its own hostname), a veth into its switch's
bridge, an address on the topology's subnet, and cgroups (cgroups.py: v2 or v1) confining it to
its vCPUs and memory. A switch is a bridge; a switch with an uplink joins the physical-switch
bridge over a veth pair shaped by tc tbf both ways (and delayed by netem, when it has a delay). mpirun runs on the host, with an address on the physical switch
(or on the only switch), like a head node; its daemons reach the VMs through the launch agent.
"""

import atexit
import ipaddress
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

from vnetbench.errors import Interrupted, LaunchError, SpecError, UsageError

from . import cgroups, linux, plan, state
from .base import LaunchSpec, Realised, idle_vms, register
from .host import HostFacts, detect, format_cpulist
from .units import format_rate, human_size


@register("netns")
class NetnsRealised(Realised):
    """A netns topology that is up: brought up by this object (and torn down by ``close``,
    at exit, and on SIGTERM/SIGINT), or attached to (and then left up)."""

    @classmethod
    def preflight(cls, topology) -> None:
        preflight(topology)

    @classmethod
    def cannot_place(cls, topology, ranks: int) -> str | None:
        return idle_vms(len(topology.vms), ranks)

    @classmethod
    def preview(cls, topology) -> dict:
        return {"plan": preview(topology), **({"scaled": topology.scaled} if topology.scaled else {})}

    @classmethod
    def show(cls, topology, preview: dict) -> list:
        return show(topology, preview)

    @classmethod
    def up(cls, topology) -> list[str]:
        st, created = up(topology, persistent=True)
        lay = st["layout"]
        verb = "up in {took}" if created else "was already up"
        lines = [f"{topology.name} {verb}: subnet {lay['subnet']}, head {lay['head']} on {lay['head_bridge']}"]
        for vm in lay["vms"]:
            lines.append(f"{vm['name']}: {vm['hostname']} {vm['address']} on {vm['switch']}, cpus "
                         f"{','.join(map(str, vm['cpus']))}")
        enforced = describe_state(st)["enforced_by"]
        lines.append(f"vCPUs enforced by {enforced['vcpus']}; memory limited by {enforced['memory']}")
        return lines

    @classmethod
    def down(cls, ref: str, topology=None) -> str | None:
        _, st = take_down(ref)
        return f"{st['name']} down" if st else None

    @classmethod
    def status(cls) -> list[dict]:
        rows = status()
        for row in rows:
            if row["stale"]:
                row["state"] = f"stale, {row['stale_reason']}: 'vnetbench topology cleanup' removes it"
            elif row["missing"]:
                row["state"] = f"damaged: {', '.join(row['missing'])} missing"
            else:
                row["state"] = f"run by process {row['owner']}" if row["owner"] else "up (topology up)"
            row["backend"] = cls.backend
        return rows

    @classmethod
    def cleanup(cls, everything: bool = False) -> list[str]:
        if os.geteuid() != 0 and not state.all_states():
            return []
        return cleanup(everything=everything)

    def __init__(self, topology):
        super().__init__(topology)
        self._closed = False
        self._handlers = {}
        # from before the first object exists: a SIGTERM half-way through tears down what was made
        self._catch_signals()
        try:
            self.state, self.brought_up = up(topology, persistent=False)
        except BaseException:
            self._restore_signals()
            raise
        self.layout = plan.Layout.from_dict(self.state["layout"])
        if self.brought_up:
            atexit.register(self.close)
        else:
            self._restore_signals()

    def check_ranks(self, ranks: int) -> None:
        plan.check_ranks(ranks)

    def launch(self, ranks: int, bind: str | None = None) -> LaunchSpec:
        inodes = {vm.name: linux.netns_inode(vm.netns) for vm in self.layout.vms}
        return plan.launch_spec(self.layout, ranks, bind, enforced=_enforcement(self.state),
                                netns_inodes={k: v for k, v in inodes.items() if v})

    def health(self) -> tuple[str, list[str]] | None:
        """None while every VM, switch and uplink is as it was brought up; else what broke and
        the VMs it cut off. Cheap (a few sysfs reads): a job's watch asks every quarter second."""
        lay = self.layout
        made = self.state.get("netns_inodes") or {}
        for vm in lay.vms:
            inode = linux.netns_inode(vm.netns)
            if inode is None or made.get(vm.netns, inode) != inode:
                return f"VM {vm.name} lost its network namespace {vm.netns}", [vm.name]
            problem = linux.link_problem(vm.veth)
            if problem:
                return f"VM {vm.name} lost its network: its veth {vm.veth} {problem}", [vm.name]
        for sw in lay.switches:
            cut = [vm.name for vm in lay.vms if vm.switch == sw.name]
            problem = linux.link_problem(sw.bridge, carrier=False)
            if problem:
                return f"switch {sw.name}'s bridge {sw.bridge} {problem}", cut
            for dev in sw.uplink or ():
                problem = linux.link_problem(dev)
                if problem:
                    return f"switch {sw.name} lost its uplink: {dev} {problem}", cut
        if lay.physical:
            problem = linux.link_problem(lay.physical, carrier=False)
            if problem:
                return f"the physical switch {lay.physical} {problem}", [vm.name for vm in lay.vms]
        return None

    def describe(self) -> dict:
        described = super().describe()
        described.update(describe_state(self.state))
        described["attached"] = not self.brought_up
        if self.topology.scaled:
            described["scaled"] = self.topology.scaled
        return described

    def close(self) -> None:
        if self._closed:
            return
        # a signal held back until the end of the teardown finds the previous handlers, not ours
        self._restore_signals()
        with _signals_blocked():
            # closed only once signals are held: a signal that lands before this point leaves the
            # teardown to the atexit registration, which is still there
            if self._closed:
                return
            self._closed = True
            atexit.unregister(self.close)
            if self.brought_up:
                with state.locked():
                    teardown(self.state)

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


class _signals_blocked:
    """Hold SIGINT/SIGTERM/SIGHUP while tearing down, so that a second ^C cannot leave half a
    topology; a signal that came meanwhile is delivered again at the end."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __enter__(self):
        self.caught, self.previous = [], {}
        if threading.current_thread() is threading.main_thread():
            try:
                for sig in self.SIGNALS:
                    if signal.getsignal(sig) == signal.SIG_IGN:
                        continue  # ignored stays ignored, also by the tools started meanwhile
                    self.previous[sig] = signal.signal(sig, lambda signum, frame: self.caught.append(signum))
            except BaseException:  # a signal between two of these: leave the handlers as they were
                self.__exit__()
                raise

    def __exit__(self, *exc):
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
        for sig in dict.fromkeys(self.caught):
            signal.raise_signal(sig)


def describe_state(st: dict) -> dict:
    lay = st["layout"]
    return {
        "id": st["id"], "subnet": lay["subnet"], "head": lay["head"],
        "vms": [{"name": vm["name"], "hostname": vm["hostname"], "address": vm["address"], "switch": vm["switch"],
                 "cpus": vm["cpus"], "numa_nodes": vm["mems"], "memory": vm["memory"]} for vm in lay["vms"]],
        "switches": [{"name": sw["name"], "bridge": sw["bridge"], "uplink_rate": sw["rate"],
                      "tbf_burst": sw["burst"], "delay_us": sw["delay"]} for sw in lay["switches"]],
        "cgroups": {kind: bool(paths) for kind, paths in st["cgroups"].items()},
        "cgroup_mode": st.get("cgroup_mode", "v1"), "enforced_by": _enforcement(st),
    }


def _enforcement(st: dict) -> dict:
    return cgroups.enforcement(st.get("cgroup_mode", "v1"), st["cgroups"])  # states from before v2: v1


def preview(topology, host: HostFacts | None = None) -> dict:
    """What ``topology`` is on this host, without bringing it up: its id, the host's cpus, memory and
    NUMA nodes, each VM's cpus and nodes, its subnet (when up or fixed), whether it is up."""
    host = host or detect()
    current = state.read(topology.id)
    assigned = plan.assign_cpus(topology.vms, plan.usable_by_node(host, topology))
    return {
        "id": topology.id,
        "host": {"cpus": len(host.cpus), "memory": host.memory,
                 "numa_nodes": {str(n): list(c) for n, c in host.cpus_by_node.items()}},
        "vms": [{"name": vm.name, "cpus": list(cpus), "numa_nodes": list(mems)}
                for vm, (cpus, mems) in zip(topology.vms, assigned)],
        "subnet": current["layout"]["subnet"] if current else (str(topology.subnet) if topology.subnet else None),
        "up": current is not None,
        "enforced_by": _enforcement(current) if current else cgroups.enforcement(*cgroups.plan({"vm": "vm"})),
    }


def show(topology, shown: dict) -> list:
    """``topology show``'s lines and tables for ``preview``'s plan (and the scaling, when scaled)."""
    planned, scaled = shown["plan"], shown.get("scaled")
    host = planned["host"]
    lines = [f"backend {topology.backend}, id {planned['id']}, placement {topology.placement}, "
             f"subnet {planned['subnet'] or 'chosen when it comes up'}" + (" (up)" if planned["up"] else "")]
    nodes = ", ".join(f"node {n}: cpus {format_cpulist(c)}" for n, c in host["numa_nodes"].items())
    lines.append(f"this host: {host['cpus']} cpus, {human_size(host['memory'])}; {nodes}")
    enforced = planned["enforced_by"]
    lines.append(f"vCPUs enforced by {enforced['vcpus']}; memory limited by {enforced['memory']}")
    if scaled:
        lines.append(f"sizes scaled from a {scaled['from']['cpus']}-cpu, {human_size(scaled['from']['memory'])} "
                     f"host to {scaled['to']['cpus']} cpus, {human_size(scaled['to']['memory'])}")
    rows = []
    for vm, where in zip(topology.vms, planned["vms"]):
        asked = scaled["vms"].get(vm.name) if scaled else None
        vcpus = f"{vm.vcpus}" + (f" (of {asked[0]})" if asked else "")
        memory = human_size(vm.memory) + (f" (of {human_size(asked[1])})" if asked else "")
        rows.append([vm.name, vcpus, memory, vm.numa, format_cpulist(where["cpus"]),
                     format_cpulist(where["numa_nodes"]), vm.switch, f"{topology.name}-{vm.name}"])
    switches = []
    for sw in topology.switches:
        if sw.uplink is None:
            switches.append([sw.name, "-", "-"])
        else:
            delay = f"{sw.uplink.delay} us" if sw.uplink.delay else "-"
            switches.append([sw.name, f"{format_rate(sw.uplink.rate)} (tc tbf, both ways)", delay])
    return [*lines, "", (["VM", "VCPUS", "MEMORY", "NUMA", "CPUS", "NODES", "SWITCH", "HOSTNAME"], rows), "",
            (["SWITCH", "UPLINK TO THE PHYSICAL SWITCH", "DELAY"], switches)]


# ---- up ---------------------------------------------------------------------------------

def preflight(topology) -> None:
    """Refuse, before creating anything, what this host cannot do."""
    linux.require_root_and_tools()
    for i, sw in enumerate(topology.switches):
        if sw.uplink and sw.uplink.delay is not None and not linux.has_netem():
            raise SpecError(f"{topology.locate('switches', i, 'uplink', 'delay')}: delay needs tc netem, which "
                            f"this kernel lacks (sch_netem); remove delay, or run on a kernel with netem")


def up(topology, persistent: bool = True, host: HostFacts | None = None) -> tuple[dict, bool]:
    """Bring ``topology`` up; (state, True), or (state, False) when it was already up."""
    preflight(topology)
    with state.locked():
        current = state.read(topology.id)
        if current is not None:
            if current["name"] != topology.name:
                raise UsageError(f"topology {topology.name!r} shares its id {topology.id} with {current['name']!r}, "
                                 f"which is up; rename one of them")
            if state.stale(current):
                print(f"vnetbench: topology {current['name']} ({current['id']}) was {stale_reason(current)}; "
                      f"removing it and bringing it up afresh", file=sys.stderr)
                teardown(current)
            elif current["spec_hash"] != topology.spec_hash():
                raise UsageError(f"a different topology named {topology.name!r} is up (from {current['source']}); "
                                 f"take it down first: vnetbench topology down {topology.name}")
            elif current.get("owner") and not state.is_mine(current):
                raise LaunchError(f"topology {topology.name!r} is in use by process {current['owner']['pid']}, "
                                  f"which will take it down when it ends; wait for it, or bring the topology "
                                  f"up with 'vnetbench topology up' to share it")
            else:
                return current, False
        host = host or detect()
        subnet = _subnet(topology, host)
        st = _new_state(topology, plan.layout(topology, host, subnet), persistent)
        state.write(st)
        try:
            _create(st)
        except BaseException:
            with _signals_blocked():
                teardown(st)
            raise
        st["complete"] = True
        state.write(st)
        return st, True


def _subnet(topology, host: HostFacts) -> ipaddress.IPv4Network:
    others = [(s["name"], ipaddress.IPv4Network(s["layout"]["subnet"])) for s in state.all_states()
              if s["id"] != topology.id]
    if topology.subnet is not None:
        for name, net in others:
            if net.overlaps(topology.subnet):
                raise SpecError(f"{topology.locate('subnet')}: {topology.subnet} overlaps topology {name!r} "
                                f"({net}), which is up; choose another subnet")
        return topology.subnet
    return plan.choose_subnet(topology.id, [net for _, net in host.networks] + [net for _, net in others])


def _new_state(topology, lay: plan.Layout, persistent: bool) -> dict:
    mode, folders = cgroups.plan({vm.name: vm.netns for vm in lay.vms})
    return {"cgroup_mode": mode, "version": state.VERSION, "id": topology.id, "name": topology.name, "source": topology.source,
            "spec_hash": topology.spec_hash(), "spec": topology.to_dict(), "layout": lay.to_dict(),
            "cgroups": folders, "created": state.now(), "complete": False,
            "owner": None if persistent else state.me()}


def _create(st: dict) -> None:
    lay = plan.Layout.from_dict(st["layout"])
    prefix = lay.prefixlen
    lines = [f"netns add {vm.netns}" for vm in lay.vms]
    for bridge in lay.bridges:
        lines += [f"link add {bridge} type bridge", f"link set dev {bridge} up"]
    for vm in lay.vms:
        lines += [f"link add {vm.veth} type veth peer name eth0 netns {vm.netns}",
                  f"link set dev {vm.veth} master {vm.bridge} up"]
    for sw in lay.switches:
        if sw.uplink:
            inner, outer = sw.uplink
            lines += [f"link add {inner} type veth peer name {outer}",
                      f"link set dev {inner} master {sw.bridge} up",
                      f"link set dev {outer} master {lay.physical} up"]
    lines.append(f"addr add {lay.head}/{prefix} dev {lay.head_bridge}")
    linux.ip_batch(lines)
    for vm in lay.vms:
        linux.ip_batch(["link set dev lo up", f"addr add {vm.address}/{prefix} dev eth0", "link set dev eth0 up"],
                       netns=vm.netns)
    # what the launch agent checks before it enters a VM: the namespace it finds is the one made here
    st["netns_inodes"] = {vm.netns: linux.netns_inode(vm.netns) for vm in lay.vms}
    linux.tc_batch(_shaping(lay))
    for vm in lay.vms:
        linux.make_uts(vm.uts, vm.hostname)
    for vm in lay.vms:
        cgroups.create(st.get("cgroup_mode", "v1"), st["cgroups"], vm.name, format_cpulist(vm.cpus),
                       format_cpulist(vm.mems), vm.memory)


def _shaping(lay: plan.Layout) -> list[str]:
    lines = []
    for sw in lay.switches:
        if not sw.uplink:
            continue
        for dev in sw.uplink:
            tbf = f"tbf rate {sw.rate}bit burst {sw.burst} latency {plan.TBF_LATENCY}"
            if sw.delay:
                # netem delays (each direction, as a link's delay does), its child tbf shapes
                lines += [f"qdisc add dev {dev} root handle 1: netem delay {sw.delay}us limit 100000",
                          f"qdisc add dev {dev} parent 1:1 handle 10: {tbf}"]
            else:
                lines.append(f"qdisc add dev {dev} root handle 1: {tbf}")
    return lines


# ---- down -------------------------------------------------------------------------------

def down(topology_id: str) -> dict | None:
    """Tear down the topology with this id; its state, or None when it was not up."""
    with _signals_blocked(), state.locked():
        st = state.read(topology_id)
        if st is None:
            return None
        teardown(st)
        return st


def take_down(ref: str) -> tuple[str | None, dict | None]:
    """Take down the topology ``ref`` names (the name it is up under, its file, or a preset):
    (its id, its state), (None, None) when it is not up. A topology a live run owns is refused:
    that run takes it down when it ends."""
    topology_id = id_of(ref)
    if topology_id is None:
        return None, None
    current = state.read(topology_id)
    if current and current.get("owner") and state.alive(current["owner"]):
        raise UsageError(f"topology {current['name']!r} belongs to a run in progress (process "
                         f"{current['owner']['pid']}), which takes it down when it ends")
    linux.require_root_and_tools()
    return topology_id, down(topology_id)


def id_of(ref: str) -> str | None:
    """The id of the topology ``ref`` names when it is up: by the name it is up under, else by loading it."""
    from . import load

    for st in state.all_states():
        if st["name"] == ref or st["source"] == ref:
            return st["id"]
    topology = load(ref, what="NAME|FILE")
    if topology.backend == "local":
        raise UsageError(f"topology {topology.name!r} is this host itself; there is nothing to take down")
    return topology.id if state.read(topology.id) else None


def teardown(st: dict) -> None:
    """Remove everything ``st`` lists that exists, then check that none of it is left."""
    foreign = state.foreign_names(st)
    if foreign:  # an edited or damaged state file: act on none of it
        raise LaunchError(f"{state.directory(st.get('id', '?'))}/state.json names what vnetbench does not make "
                          f"({', '.join(foreign[:4])}); nothing was removed; check it, and remove it by hand")
    lay = plan.Layout.from_dict(st["layout"])
    inodes = {i for i in (linux.netns_inode(vm.netns) for vm in lay.vms) if i}
    folders = cgroups.folders(st.get("cgroups", {}))
    pids = set(linux.pids_in_netns(inodes)) if inodes else set()
    for folder in folders:
        pids.update(cgroups.pids(folder))
    daemons = [pid for pid in pids if linux.command_name(pid) == "prted"]
    linux.kill(sorted(pids))
    _remove_session_dirs(daemons)
    present, spaces = linux.links(), linux.netns_names()
    lines = [f"link del {vm.veth}" for vm in lay.vms if vm.veth in present]
    lines += [f"link del {sw.uplink[0]}" for sw in lay.switches if sw.uplink and sw.uplink[0] in present]
    lines += [f"link del {bridge}" for bridge in lay.bridges if bridge in present]
    lines += [f"netns del {vm.netns}" for vm in lay.vms if vm.netns in spaces]
    done = linux.ip_batch(lines, force=True)
    for vm in lay.vms:
        linux.unmount(vm.uts)
    cgroups.release(st.get("cgroup_mode", "v1"), st.get("cgroups", {}))
    left = leftovers(lay, folders)
    if left:
        said = f" (ip exited with {done.returncode}: {done.stderr.strip()[:300]})" if done and done.returncode else ""
        raise LaunchError(f"topology {lay.name!r} could not be removed completely; left: {', '.join(left)}{said}")
    shutil.rmtree(state.directory(lay.id), ignore_errors=True)


def leftovers(lay: plan.Layout, cgroups=()) -> list[str]:
    present, spaces = linux.links(), linux.netns_names()
    left = [name for name in [vm.veth for vm in lay.vms] + lay.bridges +
            [sw.uplink[0] for sw in lay.switches if sw.uplink] if name in present]
    left += [vm.netns for vm in lay.vms if vm.netns in spaces]
    left += [vm.uts for vm in lay.vms if linux.mounted(vm.uts)]
    left += [folder for folder in cgroups if os.path.exists(folder)]
    return left


def _remove_session_dirs(daemons: list[int]) -> None:
    """The session directories (``prted.PID`` in the temporary directory) of VM daemons that were
    killed, and so could not remove them themselves."""
    tmp = Path(tempfile.gettempdir())
    for pid in daemons:
        folder = tmp / f"prted.{pid}"
        if folder.is_dir() and not folder.is_symlink():
            shutil.rmtree(folder, ignore_errors=True)


# ---- status and cleanup -----------------------------------------------------------------

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


def status() -> list[dict]:
    """What vnetbench has up: one entry per topology, with its age and whether it is stale."""
    rows = []
    for st in state.all_states():
        lay = plan.Layout.from_dict(st["layout"])
        owner = st.get("owner")
        rows.append({
            **describe_state(st), "name": st["name"], "source": st["source"], "complete": st["complete"],
            "age_s": max(0.0, time.time() - st["created"]), "owner": owner["pid"] if owner else None,
            "stale": state.stale(st), "stale_reason": stale_reason(st) if state.stale(st) else None,
            "missing": _missing(lay),
        })
    return rows


def _missing(lay: plan.Layout) -> list[str]:
    present, spaces = linux.links(), linux.netns_names()
    missing = [b for b in lay.bridges if b not in present]
    missing += [vm.netns for vm in lay.vms if vm.netns not in spaces]
    return missing


def cleanup(everything: bool = False) -> list[str]:
    """Remove what crashed runs left behind (or, with ``everything``, all vnetbench topologies).

    Topologies brought up with ``topology up`` are kept unless ``everything``; so are those of
    runs still going. Objects carrying the vnetbench prefix that no state accounts for go too.
    """
    linux.require_root_and_tools()
    removed = []
    with _signals_blocked(), state.locked():
        known_ids, refused = set(), []
        for st in state.all_states():
            foreign = state.foreign_names(st)
            if foreign:
                known_ids.add(st["id"])  # its objects are left alone too
                refused.append(f"{state.directory(st['id'])}/state.json names what vnetbench does not make "
                               f"({', '.join(foreign[:4])})")
            elif everything or state.stale(st):
                teardown(st)
                removed.append(f"topology {st['name']} ({st['id']}), {stale_reason(st) if state.stale(st) else 'up'}")
            else:
                known_ids.add(st["id"])
        removed += _orphans(known_ids)
    if refused:
        raise LaunchError(f"{'; '.join(refused)}; nothing of it was removed; check it, and remove it by hand"
                          + (f" (removed meanwhile: {', '.join(removed)})" if removed else ""))
    return removed


def _orphans(known_ids: set[str]) -> list[str]:
    """vnetbench-named objects of no topology that is up: bridges, veths, namespaces, mounts, cgroups."""
    def orphan(pattern, name: str) -> bool:
        found = pattern.fullmatch(name)
        return bool(found) and found.group(1) not in known_ids

    removed = []
    spaces = sorted(n for n in linux.netns_names() if orphan(state.ANY_NETNS, n))
    inodes = {i for i in (linux.netns_inode(n) for n in spaces) if i}
    cgroup_dirs = [str(d) for root in cgroups.roots() for d in sorted(root.glob(f"{plan.PREFIX}-*"))
                   if d.is_dir() and orphan(state.ANY_NETNS, d.name)]
    pids = set(linux.pids_in_netns(inodes)) if inodes else set()
    for folder in cgroup_dirs:
        pids.update(cgroups.pids(folder))
    linux.kill(sorted(pids))
    links = sorted(n for n in linux.links() if orphan(state.ANY_LINK, n))
    lines = [f"link del {n}" for n in links] + [f"netns del {n}" for n in spaces]
    linux.ip_batch(lines, force=True)
    removed += [f"interface {n}" for n in links] + [f"namespace {n}" for n in spaces]
    for folder in state.orphan_dirs():
        for target in linux.mounts_under(folder):
            linux.unmount(target)
            removed.append(f"mount {target}")
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(f"directory {folder}")
    for folder in cgroup_dirs:
        cgroups.remove(folder)
        removed.append(f"cgroup {folder}")
    if cgroup_dirs and cgroups.mode() == "v2":
        cgroups.release("v2", {})  # and the controllers only they needed
    return removed

