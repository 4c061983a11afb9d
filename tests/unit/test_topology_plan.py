"""Planning an emulated topology: names, cpu sets, subnets, the switch fabric, rank placement and the mpirun argv.

Pure functions on fake hosts: no root, no namespaces, no MPI.
"""

import ipaddress
from types import SimpleNamespace

import pytest

from vnetbench.core.errors import LaunchError, UsageError
from vnetbench.topologies import backend
from vnetbench.topologies.thishost import fabric
from vnetbench.topologies.model import sizing
from vnetbench.topologies.thishost.host import HostFacts, format_cpulist, parse_cpulist
from vnetbench.topologies.netns import plan
from vnetbench.topologies.model.spec import load_topology

TWO_CPUS = HostFacts(cpus_by_node={0: (0, 1)}, memory=24 << 30)
TWO_NODES = HostFacts(cpus_by_node={0: (0, 1, 2, 3), 1: (4, 5, 6, 7)}, memory=48 << 30)
SUBNET = ipaddress.IPv4Network("10.213.7.0/24")


def lay_out(name, host=TWO_CPUS, subnet=SUBNET):
    return plan.layout(load_topology(name, host=host), host, subnet)


def on_host(data, host):
    return backend("netns").from_data(data, "<spec>", host=host)


def vms(*specs):
    return [SimpleNamespace(vcpus=v, numa=n) for v, n in specs]


# ---- names and addresses ------------------------------------------------------------------

@pytest.mark.parametrize("name", ["1vm", "2vm-1vswitch", "2vm-2vswitch", "4vm-1vswitch", "4vm-4vswitch"])
def test_interface_names_fit_linux_and_carry_prefix_and_id(name):
    lay = lay_out(name)
    interfaces = [vm.veth for vm in lay.vms] + lay.bridges + [end for sw in lay.switches if sw.uplink for end in sw.uplink]
    assert all(len(n) <= 15 and n.startswith(f"vnb{lay.id}") for n in interfaces)
    assert len(set(interfaces)) == len(interfaces)
    assert all(vm.netns.startswith(f"vnb-{lay.id}-") for vm in lay.vms)
    assert all(vm.uts.startswith(f"/run/vnetbench/{lay.id}/uts/") for vm in lay.vms)


def test_the_longest_names_still_fit():
    data = {"name": "t" * 32, "switches": [{"name": f"s{i}", "uplink": {"rate": "1gbit"}} for i in range(250)],
            "vms": [{"name": "v" * 20 + f"{i:03d}", "vcpus": 1, "memory": "64MB", "switch": f"s{i}"} for i in range(250)]}
    lay = plan.layout(on_host(data, TWO_CPUS), TWO_CPUS, ipaddress.IPv4Network("10.1.0.0/16"))
    assert max(len(end) for sw in lay.switches for end in sw.uplink) <= 15
    assert max(len(vm.hostname) for vm in lay.vms) <= 63


def test_4vm_4vswitch_layout():
    lay = lay_out("4vm-4vswitch")
    assert [vm.address for vm in lay.vms] == ["10.213.7.2", "10.213.7.3", "10.213.7.4", "10.213.7.5"]
    assert lay.head == "10.213.7.1" and lay.head_bridge == lay.physical == f"vnb{lay.id}p"
    assert [vm.hostname for vm in lay.vms] == [f"4vm-4vswitch-vm{i}" for i in range(1, 5)]
    assert [vm.bridge for vm in lay.vms] == [f"vnb{lay.id}s{i}" for i in range(4)]
    assert all(sw.rate == 10**9 and sw.burst >= 128 << 10 for sw in lay.switches)
    assert [vm.cpus for vm in lay.vms] == [(0,), (1,), (0,), (1,)] and lay.shared_cores


def test_one_switch_without_uplink_hosts_the_head():
    lay = lay_out("2vm-1vswitch")
    assert lay.physical is None and lay.head_bridge == lay.switches[0].bridge
    assert not lay.shared_cores


def test_layout_survives_its_state_file():
    lay = lay_out("4vm-4vswitch")
    assert plan.Layout.from_dict(lay.to_dict()) == lay


def test_the_fabric_is_planned_from_the_spec_alone_and_is_the_layout_s():
    """What a qemu backend would reuse: the switches, uplinks, head and addresses, without netns's VM parts."""
    topology = load_topology("2vm-2vswitch", host=TWO_CPUS)
    fab = fabric.plan(topology, SUBNET)
    assert fab == lay_out("2vm-2vswitch").fabric
    assert (fab.head, fabric.vm_address(SUBNET, 0), fabric.vm_address(SUBNET, 1)) == ("10.213.7.1", "10.213.7.2",
                                                                                      "10.213.7.3")
    assert fab.uplinks == [f"vnb{fab.id}u0a", f"vnb{fab.id}u1a"] and fab.bridge_of("vswitch2") == f"vnb{fab.id}s1"


def test_the_fabric_s_ip_lines_put_the_vms_links_between_bridges_and_uplinks():
    fab = lay_out("2vm-2vswitch").fabric
    i = fab.id
    assert fabric.create_lines(fab, ["VM LINKS"]) == [
        # the switches answer no ARP: only the physical switch, which holds the head's address, is a host
        f"link add vnb{i}s0 type bridge", f"link set dev vnb{i}s0 up", f"link set dev vnb{i}s0 arp off",
        f"link add vnb{i}s1 type bridge", f"link set dev vnb{i}s1 up", f"link set dev vnb{i}s1 arp off",
        # the head's bridge, the physical switch, is made before the batch (linux.add_bridge): set up only
        f"link set dev vnb{i}p up", "VM LINKS",
        f"link add vnb{i}u0a type veth peer name vnb{i}u0b", f"link set dev vnb{i}u0a master vnb{i}s0 up",
        f"link set dev vnb{i}u0b master vnb{i}p up",
        f"link add vnb{i}u1a type veth peer name vnb{i}u1b", f"link set dev vnb{i}u1a master vnb{i}s1 up",
        f"link set dev vnb{i}u1b master vnb{i}p up",
        f"addr add 10.213.7.1/24 dev vnb{i}p"]
    assert fabric.remove_lines(fab, {f"vnb{i}u1a", f"vnb{i}s0", f"vnb{i}p", "eth0"}) == [
        f"link del vnb{i}s0", f"link del vnb{i}u1a", f"link del vnb{i}p"]
    assert fabric.missing(fab, {f"vnb{i}s0"}) == [f"vnb{i}s1", f"vnb{i}p"]
    assert fabric.shaping(fab) == [f"qdisc add dev vnb{i}u{n}{end} root handle 1: tbf rate 1000000000bit burst "
                                   f"250000 latency 20ms" for n in range(2) for end in "ab"]


def test_tbf_burst_passes_a_gso_packet_and_scales_with_rate():
    assert fabric.tbf_burst(10**6) == 128 << 10       # 1 mbit: still a whole 64 KiB packet, twice
    assert fabric.tbf_burst(10**9) == 250_000         # 1 gbit: 2 ms
    assert fabric.tbf_burst(10 * 10**9) == 2_500_000
    assert fabric.tbf_burst(10**9) > 15_000 * 10     # Mininet's 15 KB would throttle 1 gbit


# ---- cpus ---------------------------------------------------------------------------------

def test_more_vcpus_than_cpus_share_cpus_evenly():
    got = sizing.assign_cpus(vms((1, "packed"), (1, "packed"), (1, "packed"), (1, "packed")), {0: (0, 1)})
    assert [cpus for cpus, _ in got] == [(0,), (1,), (0,), (1,)]


def test_packed_vms_take_a_node_each():
    got = sizing.assign_cpus(vms((4, "packed"), (4, "packed")), TWO_NODES.cpus_by_node)
    assert got == [((0, 1, 2, 3), (0,)), ((4, 5, 6, 7), (1,))]


def test_spread_takes_cpus_from_every_node():
    got = sizing.assign_cpus(vms((4, "spread"),), TWO_NODES.cpus_by_node)
    assert got == [((0, 1, 4, 5), (0, 1))]


def test_a_numbered_node_is_honoured():
    got = sizing.assign_cpus(vms((2, 1), (2, 1)), TWO_NODES.cpus_by_node)
    assert got == [((4, 5), (1,)), ((6, 7), (1,))]


def test_cpulists():
    assert parse_cpulist("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]
    assert format_cpulist([11, 0, 1, 2, 3, 8, 10]) == "0-3,8,10-11"


# ---- subnets ------------------------------------------------------------------------------

def test_subnet_choice_is_stable_and_avoids_what_is_taken():
    first = fabric.choose_subnet("c48c", [])
    assert first == fabric.choose_subnet("c48c", []) and first.subnet_of(fabric.SUBNET_POOL)
    second = fabric.choose_subnet("c48c", [first])
    assert second != first and not second.overlaps(first)
    assert fabric.choose_subnet("c48c", [ipaddress.IPv4Network("10.213.0.0/17"), first]).subnet_of(
        ipaddress.IPv4Network("10.213.128.0/17"))


def test_no_free_subnet_is_an_error():
    with pytest.raises(LaunchError, match="no free /24 left in 10.213.0.0/16"):
        fabric.choose_subnet("0000", [ipaddress.IPv4Network("10.0.0.0/8")])


def test_two_topologies_get_different_names():
    a, b = lay_out("2vm-2vswitch"), lay_out("4vm-4vswitch")
    assert a.id != b.id
    assert not set(a.bridges) & set(b.bridges)
    assert not {vm.netns for vm in a.vms} & {vm.netns for vm in b.vms}


# ---- ranks --------------------------------------------------------------------------------

@pytest.mark.parametrize("ranks, vcpus, policy, expected", [
    (4, [1, 1, 1, 1], "block", [0, 1, 2, 3]),
    (2, [1, 1, 1, 1], "block", [0, 1]),
    (8, [1, 1, 1, 1], "block", [0, 0, 1, 1, 2, 2, 3, 3]),
    (8, [1, 1, 1, 1], "round-robin", [0, 1, 2, 3, 0, 1, 2, 3]),
    (4, [8, 8], "block", [0, 0, 1, 1]),
    (4, [8, 8], "round-robin", [0, 1, 0, 1]),
    (5, [2, 3], "round-robin", [0, 1, 0, 1, 1]),
    (6, [2, 1], "block", [0, 0, 0, 0, 1, 1]),
    (3, [4, 4], "block", [0, 0, 1]),
])
def test_placement(ranks, vcpus, policy, expected):
    assert plan.place(ranks, vcpus, policy) == expected


def test_rank_counts_are_proportional_to_vcpus():
    assert plan.rank_counts(16, [8, 4, 4]) == [8, 4, 4]
    assert plan.rank_counts(5, [1, 1, 1, 1]) == [2, 1, 1, 1]
    assert sum(plan.rank_counts(1000, [3, 5, 7])) == 1000


# ---- the planned mpirun argv --------------------------------------------------------------

def option(argv, name):
    return [argv[i + 1] for i, arg in enumerate(argv) if arg == name]


def mca(argv, flag="--mca"):
    return {argv[i + 1]: argv[i + 2] for i, arg in enumerate(argv) if arg == flag}


def test_launch_on_4vm_4vswitch():
    lay = lay_out("4vm-4vswitch")
    spec = plan.launch_spec(lay, 4, None, agent="/venv/bin/python -m vnetbench.topologies.netns.agent",
                            netns_inodes={"vm1": 11, "vm2": 12, "vm3": 13, "vm4": 14})
    argv = spec.mpirun_args
    assert option(argv, "--host") == ["4vm-4vswitch-vm1:1,4vm-4vswitch-vm2:1,4vm-4vswitch-vm3:1,4vm-4vswitch-vm4:1"]
    assert option(argv, "-n") == ["4"] and option(argv, "--map-by") == ["slot"]
    assert option(argv, "--bind-to") == ["none"]
    assert mca(argv, "--prtemca") == {"plm_ssh_agent": "/venv/bin/python -m vnetbench.topologies.netns.agent",
                                      "plm_ssh_no_tree_spawn": "1", "prte_if_include": "10.213.7.0/24"}
    assert mca(argv) == {"pml": "ob1", "btl": "self,sm,tcp", "btl_tcp_if_include": "10.213.7.0/24", "osc": "^ucx",
                         "mpi_yield_when_idle": "1"}
    assert spec.mca["btl_tcp_if_include"] == "10.213.7.0/24" and spec.mca["prte:prte_if_include"] == "10.213.7.0/24"
    assert spec.expected_placement[2] == {"hostname": "4vm-4vswitch-vm3", "address": "10.213.7.4", "cpus": [0],
                                          "netns": 13}
    assert spec.placement_labels[1] == {"vm": "vm2", "switch": "vswitch2", "address": "10.213.7.3", "vm_cpus": [1],
                                        "numa_nodes": [0]}
    assert "VMs share cores" in spec.notes["yield_when_idle"] and "4000 us" in spec.notes["yield_when_idle"]
    assert spec.notes["ranks_per_vm"] == {"vm1": 1, "vm2": 1, "vm3": 1, "vm4": 1}
    assert all(isinstance(arg, str) for arg in argv)


def test_round_robin_maps_by_node():
    data = {**load_topology("4vm-1vswitch", host=TWO_CPUS).to_dict(), "placement": "round-robin"}
    lay = plan.layout(on_host(data, TWO_CPUS), TWO_CPUS, SUBNET)
    spec = plan.launch_spec(lay, 8, None, agent="a")
    assert option(spec.mpirun_args, "--map-by") == ["node"]
    assert [p["vm"] for p in spec.placement_labels] == ["vm1", "vm2", "vm3", "vm4"] * 2
    assert spec.notes["oversubscribed"] is True


def test_vms_with_free_cores_do_not_yield():
    lay = lay_out("2vm-1vswitch", host=TWO_NODES)  # 4 vCPUs each on 8 cpus
    spec = plan.launch_spec(lay, 2, None, agent="a")
    assert "mpi_yield_when_idle" not in spec.mca and "yield_when_idle" not in spec.notes
    assert option(spec.mpirun_args, "--host") == ["2vm-1vswitch-vm1:1,2vm-1vswitch-vm2:1"]


def test_ranks_filling_every_core_across_vms_yield():
    spec = plan.launch_spec(lay_out("2vm-2vswitch"), 2, None, agent="a")
    assert spec.mca["mpi_yield_when_idle"] == "1"
    assert spec.notes["yield_when_idle"].startswith("2 ranks in 2 VMs on 2 cpus: busy-polling")


def test_one_vm_yields_only_when_oversubscribed():
    assert "mpi_yield_when_idle" not in plan.launch_spec(lay_out("1vm"), 1, None, agent="a").mca
    spec = plan.launch_spec(lay_out("1vm"), 2, None, agent="a")
    assert spec.mca["mpi_yield_when_idle"] == "1" and spec.notes["oversubscribed"] is True


def test_core_binding_is_refused_in_vms():
    with pytest.raises(UsageError, match="--bind: 'core' is not available on emulated VMs"):
        plan.launch_spec(lay_out("2vm-1vswitch"), 2, "core", agent="a")


@pytest.mark.parametrize("ranks", [0, 4097])
def test_rank_counts_out_of_range(ranks):
    with pytest.raises(UsageError, match=f"--ranks: {ranks} is out of range; allowed: 1 to 4096"):
        plan.launch_spec(lay_out("2vm-1vswitch"), ranks, None, agent="a")


def test_affinity_only_hosts_say_so():
    spec = plan.launch_spec(lay_out("2vm-1vswitch"), 2, None, agent="a",
                            enforced={"vcpus": "cpu affinity", "memory": "none"})
    assert spec.notes["vcpus_enforced_by"] == "cpu affinity"
    assert spec.notes["memory_limited_by"] == "none"
    spec = plan.launch_spec(lay_out("2vm-1vswitch"), 2, None, agent="a",
                            enforced={"vcpus": "cgroup v2 cpuset", "memory": "cgroup v2 memory.max"})
    assert spec.notes["vcpus_enforced_by"] == "cgroup v2 cpuset"
    assert spec.notes["memory_limited_by"] == "cgroup v2 memory.max"


def test_the_agent_command_is_this_python(monkeypatch):
    monkeypatch.setattr(plan.sys, "executable", "/opt/venv/bin/python3")
    assert plan.agent_command() == "/opt/venv/bin/python3 -m vnetbench.topologies.netns.agent"
    monkeypatch.setattr(plan.sys, "executable", "/opt/my venv/bin/python3")
    with pytest.raises(LaunchError, match="without spaces"):
        plan.agent_command()
