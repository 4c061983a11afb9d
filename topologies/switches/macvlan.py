"""macvlan: each VM's link a macvlan device in bridge mode on the switch's parent link - "direct" attachment,
with no learning bridge: the kernel hands a frame to the device whose MAC it is addressed to.

The parent is a veth ``vnbIDs<n>`` (its peer ``vnbIDs<n>x`` up and unused: carrier, and a kernel without the
dummy driver) for a switch without an uplink, else the uplink's switch-side veth end, so that what is for no VM
of the switch leaves through the uplink (its tbf shapes it: a macvlan sends through its parent's qdisc). A
namespace's ``eth0`` is made as a macvlan inside it; a QEMU guest's link is a macvtap (``tap_lines``) with the
guest NIC's MAC (a macvtap in bridge mode takes the frames addressed to its own MAC), whose character device
/dev/tapIFINDEX the qemu backend opens and hands its QEMU (``-netdev tap,fd=N``: libvirt's "direct" attachment).
"""

import functools
import shutil
import subprocess

from vnetbench.core.errors import UsageError

from ..thishost import linux
from . import KINDS, Driver


@functools.cache
def supported() -> bool:
    """Does this kernel make macvlan devices? Tried in a throwaway network namespace."""
    if not shutil.which("unshare") or not shutil.which("ip"):
        return False
    done = subprocess.run(["unshare", "--net", "ip", "-batch", "-"], capture_output=True, timeout=30,
                          input=b"link add vnbd0 type veth peer name vnbd1\n"
                                b"link add vnbm0 link vnbd0 type macvlan mode bridge\n")
    return done.returncode == 0


def parent(sw) -> str:
    return sw.uplink[0] if sw.uplink else sw.bridge


@KINDS.register("macvlan")
class Macvlan(Driver):
    host_side = False
    tap_is_device = True

    @classmethod
    def require(cls, topology, index):
        if not supported():
            raise UsageError(f"switches[{index}] ({topology.switches[index].name}): kind macvlan needs the kernel's "
                             f"macvlan driver, which this kernel lacks (CONFIG_MACVLAN); use kind bridge or ovs")

    @classmethod
    def abilities(cls):
        return "macvlan in bridge mode (namespaces), macvtap (QEMU guests)" if supported() \
            else "not available: this kernel has no macvlan driver"

    @classmethod
    def names(cls, sw):
        return list(sw.uplink) if sw.uplink else [sw.bridge]

    @classmethod
    def create_lines(cls, sw, physical):
        if not sw.uplink:
            return [f"link add {sw.bridge} type veth peer name {sw.bridge}x", f"link set dev {sw.bridge}x up",
                    f"link set dev {sw.bridge} up"]
        inner, outer = sw.uplink
        return [f"link add {inner} type veth peer name {outer}", f"link set dev {inner} up",
                f"link set dev {outer} master {physical} up"]

    @classmethod
    def vm_link_lines(cls, sw, link, netns):
        return [f"link add eth0 link {parent(sw)} netns {netns} type macvlan mode bridge"]

    @classmethod
    def tap_lines(cls, sw, tap, mac):
        return [f"link add {tap} link {parent(sw)} address {mac} type macvtap mode bridge", f"link set dev {tap} up"]

    @classmethod
    def head_lines(cls, sw, head):
        return [f"link add {head} link {parent(sw)} type macvlan mode bridge", f"link set dev {head} up"]

    @classmethod
    def health(cls, sw):
        problem = linux.link_problem(parent(sw), carrier=False)
        return f"macvlan parent {parent(sw)} {problem}" if problem else None

    @classmethod
    def describe(cls, sw, facts):
        return {"kind": cls.kind, "mode": "bridge", "parent": parent(sw)}
