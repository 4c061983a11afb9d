"""The qemu backend's objects on this host: create, tear down, check and clean up what a layout names.

The switch fabric (bridges, shaped uplinks, the head's address) is fabric.py's; the flow around bring-up and
teardown (the state file and its lock, stale topologies, cleanup) is lifecycle.py's. Here is what makes a VM
of this backend: a tap on its switch's bridge and a guest (guests.py) whose sshd answers with the topology's
keys (sshd.py). The state's ``guest`` says how they boot (accelerator, kernel, vhost, the root's share),
decided before anything is made; ``guests`` what each guest said and where its QEMU runs, once up.
"""

import shutil

from vnetbench.core.errors import LaunchError, UsageError

from ..thishost import fabric, lifecycle, linux, state
from ..thishost.host import HostFacts
from . import guests, machine, plan, sshd, watchdog

BACKEND = "qemu"
# from start to sshd answering, when the topology does not say (guest.boot_timeout): KVM boots in seconds, two
# TCG guests on two cores in about 25 s (2026-11-25), a loaded machine several times that
BOOT_TIMEOUT = {"kvm": 60.0, "tcg": 300.0}


def preflight(topology) -> None:
    """Refuse, before anything is made, what this host cannot do: tools, netem for a delay, the kernel, NUMA
    nodes' memory, KVM (``auto``: the probe guest); what was decided is kept for ``_fields``. For a topology whose
    guests are up, only the tools: its guests answer for themselves, and a probe guest would only compete with
    them (or refuse a run they would serve)."""
    machine.require()
    if lifecycle.is_up(KIND, topology):
        return
    fabric.require_netem(topology)
    fabric.require_switches(topology, BACKEND, guests=True)
    guest(topology)


def guest(topology) -> dict:
    """How ``topology``'s guests boot on this host (the state's ``guest``); UsageError when they cannot."""
    from . import probe

    chosen = machine.kernel(topology.guest.kernel)
    vhost, rootfs = machine.vhost_net(), machine.root_share()
    accel, probed = probe.accel(topology.guest.accel, chosen["image"], probe.needs(topology, vhost, rootfs),
                                 topology.given("accel"))
    why = "/dev/vhost-net opens" if vhost else "/dev/vhost-net does not open here"
    if probed and probed.get("vhost"):
        vhost, why = False, f"the KVM probe guest's QEMU fell back to userspace virtio ({probed['vhost']})"
    return {"engine": "qemu", "accel": accel, "asked": topology.guest.accel, "kernel": chosen,
            "machine": machine.MACHINE, "qemu": machine.qemu_version(), "vhost": vhost, "vhost_why": why,
            "rootfs": rootfs, "memory_backing": machine.backing(rootfs),
            "probe": None if probed is None else {"cached": probed["cached"], "at": probed["at"]},
            "boot_timeout": topology.guest.boot_timeout or BOOT_TIMEOUT[accel]}


def _require() -> None:
    machine.require()


def _layout(topology, host: HostFacts, subnet) -> dict:
    lay = plan.layout(topology, host, subnet)
    if lay.numa_nodes > 1 and not shutil.which("numactl"):
        raise UsageError("--vms qemu: binding each guest's memory to its NUMA node needs numactl "
                         "(apt-get install numactl)")
    return lay.to_dict()


def _fields(topology, layout: dict) -> dict:
    return {"guest": guest(topology)}


def create(st: dict) -> None:
    """Make what ``st`` names: keys, the fabric with each VM's tap on its bridge, shaping, a run's watchdog, then
    the guests, all booting at once; ``st["guests"]`` what each said once its sshd answers."""
    lay = plan.Layout.from_dict(st["layout"])
    sshd.make(lay.id, [vm.address for vm in lay.vms])
    st["switch_facts"] = fabric.create(lay.fabric, links=[(vm.switch, vm.tap, None, vm.mac) for vm in lay.vms])
    linux.tc_batch(fabric.shaping(lay.fabric))
    if st.get("owner"):  # a run's guests end with it, even when it is killed with SIGKILL
        watchdog.start(lay.id, st["owner"])
    started = guests.start(lay, st["guest"])
    st["guests"] = guests.wait_ready(lay, st["guest"], started, st["guest"]["boot_timeout"])


def teardown(st: dict) -> None:
    """End the guests, remove the taps and the fabric, then the state directory; LaunchError naming what is
    left."""
    foreign = state.foreign_names(st)
    if foreign:  # an edited or damaged state file: act on none of it
        raise LaunchError(f"{state.directory(st.get('id', '?'))}/state.json names what vnetbench does not make "
                          f"({', '.join(foreign[:4])}); nothing was removed; check it, and remove it by hand")
    lay = plan.Layout.from_dict(st["layout"])
    guests.stop(lay.id)
    present = linux.links()
    lines = [f"link del {vm.tap}" for vm in lay.vms if vm.tap in present] + fabric.remove_lines(lay.fabric, present)
    done = linux.ip_batch(lines, force=True)
    fabric.released(lay.fabric)
    left = leftovers(lay)
    if left:
        said = f" (ip exited with {done.returncode}: {done.stderr.strip()[:300]})" if done and done.returncode else ""
        raise LaunchError(f"topology {lay.name!r} could not be removed completely; left: {', '.join(left)}{said}")
    shutil.rmtree(state.directory(lay.id), ignore_errors=True)


def leftovers(lay: plan.Layout) -> list[str]:
    present = linux.links()
    left = [vm.tap for vm in lay.vms if vm.tap in present] + fabric.leftovers(lay.fabric, present)
    return left + [f"process {pid} of {where}" for pid, where in guests.processes({lay.id}).items()]


def missing(st: dict) -> list[str]:
    lay = plan.Layout.from_dict(st["layout"])
    present = linux.links()
    gone = fabric.missing(lay.fabric, present) + [vm.tap for vm in lay.vms if vm.tap not in present]
    if st.get("complete"):
        gone += [f"VM {name}'s guest" for name, facts in (st.get("guests") or {}).items() if not guests.alive(facts)]
    return gone


def orphans(known_ids: set[str]) -> list[str]:
    """vnetbench's guests and interfaces of no topology that is up (a state directory removed by hand)."""
    found = guests.processes(unknown=known_ids)
    if found:
        guests_of = sorted(set(found.values()))
        linux.kill(sorted(found))
    else:
        guests_of = []
    switched = fabric.orphan_switches(known_ids)
    links = fabric.orphan_links(known_ids)
    linux.ip_batch([f"link del {name}" for name in links], force=True)
    return switched + [f"guest {where} ({len([p for p, w in found.items() if w == where])} process(es))" for where in guests_of] \
        + [f"interface {name}" for name in links]


KIND = lifecycle.Kind(backend=BACKEND, require=_require, preflight=preflight, layout=_layout, create=create,
                      teardown=teardown, missing=missing, orphans=orphans, fields=_fields,
                      read=lambda st: plan.Layout.from_dict(st["layout"]))
