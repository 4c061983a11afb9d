"""The Linux bridge: a learning bridge in the kernel, libvirt's default switch (and what vnetbench always used)."""

from ..thishost import linux
from . import KINDS, Driver


@KINDS.register("bridge")
class Bridge(Driver):
    is_bridge = True

    @classmethod
    def create_lines(cls, sw, physical):
        # a switch is no host: without arp off, this host's stack answered a VM's ARP for the head's address on
        # the VM's own switch (Linux answers for any of its addresses on any interface), and the VM's packets to
        # the head went up there, past the shaped and delayed uplink (one way of a round trip)
        return [f"link add {sw.bridge} type bridge", f"link set dev {sw.bridge} up",
                f"link set dev {sw.bridge} arp off"]

    @classmethod
    def uplink_lines(cls, sw, physical):
        if not sw.uplink:
            return []
        inner, outer = sw.uplink
        return [f"link add {inner} type veth peer name {outer}", f"link set dev {inner} master {sw.bridge} up",
                f"link set dev {outer} master {physical} up"]

    @classmethod
    def vm_link_lines(cls, sw, link, netns):
        return [f"link add {link} type veth peer name eth0 netns {netns}", f"link set dev {link} master {sw.bridge} up"]

    @classmethod
    def tap_lines(cls, sw, tap, mac):
        return [f"tuntap add dev {tap} mode tap", f"link set dev {tap} master {sw.bridge} up"]

    @classmethod
    def health(cls, sw):
        problem = linux.link_problem(sw.bridge, carrier=False)
        return f"bridge {sw.bridge} {problem}" if problem else None

    @classmethod
    def describe(cls, sw, facts):
        return {"kind": cls.kind, "bridge": sw.bridge}
