"""The netns backend's objects on this host: create, tear down, check and clean up what a layout names.

The switch fabric (bridges, shaped uplinks, the head's address) is fabric.py's; the flow around
bring-up and teardown (the state file and its lock, stale topologies, cleanup) is lifecycle.py's.
Here is what makes a VM of this backend: a network namespace with ``eth0`` (its switch's driver makes it: a
veth into a bridge or Open vSwitch, a macvlan) and ``lo``, a UTS namespace with its hostname, and its cgroups.
"""

import os
import shutil
import tempfile
from pathlib import Path

from vnetbench.core import procs
from vnetbench.core.errors import LaunchError

from ..thishost import cgroups, fabric, lifecycle, linux, state
from ..thishost.host import HostFacts, format_cpulist
from . import plan

BACKEND = "netns"


def preflight(topology) -> None:
    """Refuse, before creating anything, what this host cannot do."""
    _require()
    fabric.require_netem(topology)
    fabric.require_switches(topology)


def _require() -> None:
    linux.require_root_and_tools(BACKEND)


def _layout(topology, host: HostFacts, subnet) -> dict:
    return plan.layout(topology, host, subnet).to_dict()


def _fields(topology, layout: dict) -> dict:
    mode, folders = cgroups.plan({vm["name"]: vm["netns"] for vm in layout["vms"]})
    return {"cgroup_mode": mode, "cgroups": folders}


def create(st: dict) -> None:
    """Make what ``st`` names: namespaces, the fabric with each VM's veth on its bridge, addresses, shaping,
    UTS namespaces and cgroups."""
    lay = plan.Layout.from_dict(st["layout"])
    fab = lay.fabric
    st["switch_facts"] = fabric.create(fab, before=[f"netns add {vm.netns}" for vm in lay.vms],
                                       links=[(vm.switch, vm.veth, vm.netns, None) for vm in lay.vms])
    for vm in lay.vms:
        linux.ip_batch(["link set dev lo up", f"addr add {vm.address}/{fab.prefixlen} dev eth0",
                        "link set dev eth0 up"], netns=vm.netns)
    # what the launch agent checks before it enters a VM: the namespace it finds is the one made here
    st["netns_inodes"] = {vm.netns: linux.netns_inode(vm.netns) for vm in lay.vms}
    linux.tc_batch(fabric.shaping(fab))
    for vm in lay.vms:
        linux.make_uts(vm.uts, vm.hostname)
    for vm in lay.vms:
        cgroups.create(st.get("cgroup_mode", "v1"), st["cgroups"], vm.name, format_cpulist(vm.cpus),
                       format_cpulist(vm.mems), vm.memory)
    # up means carrying: each VM's veth and each uplink with its carrier (what a job's health check asks)
    linux.wait_running([vm.veth for vm in lay.vms if fab.switch(vm.switch).driver.host_side]
                       + [end for sw in fab.switches for end in sw.uplink or ()])


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
    lines += fabric.remove_lines(lay.fabric, present)
    lines += [f"netns del {vm.netns}" for vm in lay.vms if vm.netns in spaces]
    done = linux.ip_batch(lines, force=True)
    fabric.released(lay.fabric)
    for vm in lay.vms:
        linux.unmount(vm.uts)
    cgroups.release(st.get("cgroup_mode", "v1"), st.get("cgroups", {}))
    left = leftovers(lay, folders)
    if left:
        said = f" (ip exited with {done.returncode}: {done.stderr.strip()[:300]})" if done and done.returncode else ""
        raise LaunchError(f"topology {lay.name!r} could not be removed completely; left: {', '.join(left)}{said}")
    shutil.rmtree(state.directory(lay.id), ignore_errors=True)


def leftovers(lay: plan.Layout, cgroup_folders=()) -> list[str]:
    present, spaces = linux.links(), linux.netns_names()
    left = [vm.veth for vm in lay.vms if vm.veth in present] + fabric.leftovers(lay.fabric, present)
    left += [vm.netns for vm in lay.vms if vm.netns in spaces]
    left += [vm.uts for vm in lay.vms if linux.mounted(vm.uts)]
    left += [folder for folder in cgroup_folders if os.path.exists(folder)]
    return left


def _remove_session_dirs(daemons: list[int]) -> None:
    """The session directories (``prted.PID`` in the temporary directory) of VM daemons that were
    killed, and so could not remove them themselves."""
    tmp = Path(tempfile.gettempdir())
    for pid in daemons:
        folder = tmp / f"prted.{pid}"
        if folder.is_dir() and not folder.is_symlink():
            shutil.rmtree(folder, ignore_errors=True)


def missing(st: dict) -> list[str]:
    lay = plan.Layout.from_dict(st["layout"])
    spaces = linux.netns_names()
    return fabric.missing(lay.fabric, linux.links()) + [vm.netns for vm in lay.vms if vm.netns not in spaces]


def orphans(known_ids: set[str]) -> list[str]:
    """vnetbench-named objects of no topology that is up: bridges, veths, namespaces, mounts, cgroups."""
    def orphan(pattern, name: str) -> bool:
        found = pattern.fullmatch(name)
        return bool(found) and found.group(1) not in known_ids

    removed = []
    spaces = sorted(n for n in linux.netns_names() if orphan(state.ANY_NETNS, n))
    inodes = {i for i in (linux.netns_inode(n) for n in spaces) if i}
    # cgroups are the host's, in no namespace: a VM folder whose processes see another /run/vnetbench (a
    # container's, a sandbox's) is that one's topology, not an orphan of ours
    cgroup_dirs = [str(d) for root in cgroups.roots() for d in sorted(root.glob(f"{fabric.PREFIX}-*"))
                   if d.is_dir() and orphan(state.ANY_NETNS, d.name)
                   and all(procs.sees_as_we_do(pid, state.RUN_DIR) for pid in cgroups.pids(str(d)))]
    pids = set(linux.pids_in_netns(inodes)) if inodes else set()
    for folder in cgroup_dirs:
        pids.update(cgroups.pids(folder))
    linux.kill(sorted(pids))
    removed += fabric.orphan_switches(known_ids)
    links = fabric.orphan_links(known_ids)
    linux.ip_batch([f"link del {n}" for n in links] + [f"netns del {n}" for n in spaces], force=True)
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


KIND = lifecycle.Kind(backend=BACKEND, require=_require, preflight=preflight, layout=_layout,
                      create=create, teardown=teardown, missing=missing, orphans=orphans, fields=_fields,
                      read=lambda st: plan.Layout.from_dict(st["layout"]), unlabelled=True)


# ---- what the backend and its callers use ------------------------------------------------------

def up(topology, persistent: bool = True, host: HostFacts | None = None) -> tuple[dict, bool]:
    """Bring ``topology`` up; (state, True), or (state, False) when it was already up."""
    return lifecycle.bring_up(KIND, topology, persistent, host)


def down(topology_id: str) -> dict | None:
    """Tear down the topology with this id; its state, or None when it was not up."""
    return lifecycle.down(KIND, topology_id)


def take_down(ref: str, topology=None) -> dict | None:
    """``topology down REF``: its state once taken down, or None when it was not up (lifecycle.take_down)."""
    return lifecycle.take_down(KIND, ref, topology)


def cleanup(everything: bool = False, force: bool = False) -> list[str]:
    """Remove what crashed runs left behind (with ``everything``, also what ``topology up`` left up; with
    ``force``, also those of live runs); what went (lifecycle.cleanup)."""
    return lifecycle.cleanup(KIND, everything, force)

