"""Switch kinds as data: the spec's kind and datapath, --switch's twins, and the ip/tc lines each kind's driver plans.

Pure: fake hosts, no root; what the kinds do for real is tests/emulation/test_switch_kinds.py.
"""

import ipaddress
import subprocess
import sys

import pytest

from vnetbench.core.errors import SpecError, UsageError
from vnetbench.topologies import backend, load, switches
from vnetbench.topologies.model import presets
from vnetbench.topologies.thishost import fabric
from vnetbench.topologies.thishost.host import HostFacts
from vnetbench.topologies.netns import plan

TWO_CPUS = HostFacts(cpus_by_node={0: (0, 1)}, memory=24 << 30)
SUBNET = ipaddress.IPv4Network("10.213.7.0/24")


def topology(kind=None, preset="2vm-2vswitch", **switch):
    data = dict(presets.PRESETS[preset])
    data["switches"] = [{**sw, **({"kind": kind} if kind else {}), **switch} for sw in data["switches"]]
    return backend("netns").from_data(data, "<spec>", host=TWO_CPUS)


def test_the_kinds_are_registered_by_name_in_one_place():
    assert switches.names() == ("bridge", "ovs", "macvlan")
    assert [switches.driver(kind).kind for kind in switches.names()] == list(switches.names())
    with pytest.raises(UsageError, match="--switch: unknown switch kind 'vde'; choose from bridge, ovs, macvlan"):
        switches.driver("vde", "--switch")


def test_a_switch_is_a_bridge_unless_it_says_and_a_bridge_spec_hashes_as_before():
    plain, said = topology(), topology("bridge")
    assert [sw.kind for sw in plain.switches] == ["bridge", "bridge"] and plain.switches[0].datapath is None
    assert plain.spec_hash() == said.spec_hash() and "kind" not in plain.to_dict()["switches"][0]
    ovs = topology("ovs")
    assert [sw.datapath for sw in ovs.switches] == ["auto", "auto"]
    assert ovs.to_dict()["switches"][0]["kind"] == "ovs" and ovs.spec_hash() != plain.spec_hash()


@pytest.mark.parametrize("switch, said", [
    ({"kind": "vde"}, "switches[0].kind: expected one of bridge, ovs, macvlan, got 'vde'"),
    ({"kind": "macvlan", "datapath": "netdev"}, "datapath: only for kind: ovs"),
    ({"kind": "ovs", "datapath": "dpdk"}, "switches[0].datapath"),
])
def test_a_bad_kind_or_datapath_names_the_field(switch, said):
    with pytest.raises(SpecError, match=said.replace("[", r"\[").replace("]", r"\]")):
        topology(**switch)


def test_switch_makes_a_twin_named_after_the_kind():
    twin = load("switch:ovs:2vm-2vswitch")
    assert twin.name == "2vm-2vswitch-ovs" and [sw.kind for sw in twin.switches] == ["ovs", "ovs"]
    assert twin.id != load("2vm-2vswitch").id and twin.scaled  # the preset's scaling is kept
    assert load("switch:bridge:2vm-2vswitch").name == "2vm-2vswitch"  # already every switch of that kind
    assert load("switch:ovs:native").name == "native"  # no switch to change
    assert load("switch:macvlan:qemu:2vm-1vswitch").name == "2vm-1vswitch-qemu-macvlan"


def test_a_bad_switch_option_is_one_line_and_exit_2(tmp_path):
    for argv in (["--switch", "vde"], ["--switch", "ovs", "--hostfile", str(tmp_path / "hosts")]):
        proc = subprocess.run([sys.executable, "-m", "vnetbench", "topology", "show", "2vm-2vswitch", *argv]
                              if "--hostfile" not in argv else
                              [sys.executable, "-m", "vnetbench", "run", "pingpong", *argv],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "--switch" in proc.stderr, proc.stderr


def test_ovs_and_macvlan_plan_the_head_on_a_link_of_its_own():
    for kind, link in (("ovs", "veth peer name vnb{id}g"), ("macvlan", "link vnb{id}s0 type macvlan mode bridge")):
        fab = fabric.plan(topology(kind, "2vm-1vswitch"), SUBNET)
        assert fab.head_bridge == f"vnb{fab.id}h" and not fab.head_is_bridge and fab.head_switch.kind == kind
        sw = fab.switches[0]
        assert link.format(id=fab.id) in sw.driver.head_lines(sw, fab.head_bridge)[0]
        assert not any("addr add" in line for line in fabric.create_lines(fab))  # set once the head's link exists
    fab = fabric.plan(topology("bridge", "2vm-1vswitch"), SUBNET)
    assert fab.head_bridge == fab.switches[0].bridge and fab.head_is_bridge


def test_each_kind_puts_a_vm_on_its_switch_its_own_way():
    lay = plan.layout(topology("macvlan"), TWO_CPUS, SUBNET)
    i, vm = lay.id, lay.vms[0]
    # macvlan: the VM's eth0 is made in its namespace, on the uplink's switch-side end (its way out)
    assert fabric.link_lines(lay.fabric, [(vm.switch, vm.veth, vm.netns, None)]) == [
        f"link add eth0 link vnb{i}u0a netns {vm.netns} type macvlan mode bridge"]
    lay = plan.layout(topology("ovs"), TWO_CPUS, SUBNET)
    vm = lay.vms[0]
    # ovs: a veth whose host end becomes an OVS port (ovs-vsctl, after the batch), on no Linux bridge
    assert fabric.link_lines(lay.fabric, [(vm.switch, vm.veth, vm.netns, None)]) == [
        f"link add {vm.veth} type veth peer name eth0 netns {vm.netns}", f"link set dev {vm.veth} up"]
    assert not any("type bridge" in line and f"s0" in line for line in fabric.create_lines(lay.fabric))


@pytest.mark.parametrize("kind", switches.names())
def test_every_kind_shapes_its_uplink_on_both_veth_ends(kind):
    fab = fabric.plan(topology(kind), SUBNET)
    assert fabric.shaping(fab) == [f"qdisc add dev vnb{fab.id}u{n}{end} root handle 1: tbf rate 1000000000bit burst "
                                   f"250000 latency 20ms" for n in range(2) for end in "ab"]


def test_a_state_from_before_kinds_reads_as_bridges():
    lay = plan.layout(topology(), TWO_CPUS, SUBNET).to_dict()
    for sw in lay["switches"]:
        del sw["kind"], sw["datapath"]
    again = plan.Layout.from_dict(lay)
    assert {sw.kind for sw in again.switches} == {"bridge"}
    assert [row["kind"] for row in fabric.describe_switches(lay, None)] == ["bridge", "bridge"]


def test_report_keeps_kinds_and_datapaths_apart():
    from vnetbench.analysis.records import topology_name

    def named(name, *switches):
        return topology_name({"topology": {"name": name, "switches": list(switches)}})

    assert named("2vm-2vswitch", {"name": "s", "bridge": "b"}) == "2vm-2vswitch"  # records from before kinds
    assert named("2vm-2vswitch", {"kind": "bridge"}) == "2vm-2vswitch"
    assert named("2vm-2vswitch-ovs", {"kind": "ovs", "datapath": "netdev"}) == "2vm-2vswitch-ovs (netdev)"
    assert named("2vm-2vswitch-ovs", {"kind": "ovs", "datapath": "system"}) == "2vm-2vswitch-ovs (system)"
    assert named("2vm-1vswitch-macvlan", {"kind": "macvlan"}) == "2vm-1vswitch-macvlan"
    assert named("mine", {"kind": "ovs", "datapath": "netdev"}, {"kind": "bridge"}) == "mine (ovs netdev)"
