"""Topology specs: every way a spec can be wrong, with the message a user sees; presets; scaling.

No root, no MPI: the host a spec is checked against is a fake one (``HOST``).
"""

import ipaddress
import textwrap

import pytest
import yaml

from vnetbench.core.errors import SpecError, UsageError
from vnetbench.topologies import backend
from vnetbench.topologies.model import presets
from vnetbench.topologies.thishost.host import HostFacts
from vnetbench.topologies.model.spec import from_dict, load_file, load_topology

HOST = HostFacts(cpus_by_node={0: (0, 1, 2, 3), 1: (4, 5, 6, 7)}, memory=16 << 30,
                 networks=(("the route to 192.168.1.0/24 via eth0", ipaddress.IPv4Network("192.168.1.0/24")),))
SMALL = HostFacts(cpus_by_node={0: (0, 1)}, memory=24 << 30)

GOOD = """\
name: lab
description: two VMs across two uplinked switches
vms:
  - name: vm1
    vcpus: 2
    memory: 2GB
    switch: sw1
  - name: vm2
    vcpus: 2
    memory: 2GB
    numa: 1
    switch: sw2
switches:
  - name: sw1
    uplink: {rate: 1gbit}
  - name: sw2
    uplink:
      rate: 1gbit
placement: round-robin
subnet: 10.99.0.0/24
"""


def on_host(data, host):
    """``data`` as the netns backend validates it for ``host`` (sizes scaled and checked)."""
    return backend("netns").from_data(data, "<spec>", host=host)


def write(tmp_path, text, name="topo.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def error_of(tmp_path, text, host=HOST) -> str:
    path = write(tmp_path, text)
    with pytest.raises(SpecError) as caught:
        load_file(path, host=host)
    return str(caught.value).replace(str(path), "FILE")


def edit(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


def test_a_good_file_loads(tmp_path):
    topology = load_file(write(tmp_path, GOOD), host=HOST)
    assert topology.name == "lab" and topology.backend == "netns"
    assert [vm.name for vm in topology.vms] == ["vm1", "vm2"]
    assert topology.switch("sw1").uplink.rate == 10**9
    assert topology.vms[1].numa == 1
    assert topology.placement == "round-robin"
    assert str(topology.subnet) == "10.99.0.0/24"
    assert len(topology.id) == 4 and topology.id == load_file(write(tmp_path, GOOD), host=HOST).id


def test_the_spec_is_frozen(tmp_path):
    topology = load_file(write(tmp_path, GOOD), host=HOST)
    with pytest.raises(Exception):
        topology.name = "other"
    with pytest.raises(Exception):
        topology.vms[0].vcpus = 3


def test_to_dict_round_trips_through_yaml(tmp_path):
    topology = load_file(write(tmp_path, GOOD), host=HOST)
    again = load_file(write(tmp_path, yaml.safe_dump(topology.to_dict()), "again.yaml"), host=HOST)
    assert again.to_dict() == topology.to_dict()
    assert again.spec_hash() == topology.spec_hash()
    assert topology.to_dict()["vms"][0]["memory"] == "2GiB"
    assert topology.to_dict()["switches"][0]["uplink"] == {"rate": "1gbit"}


@pytest.mark.parametrize("old, new, expected", [
    # unknown and misspelt fields, at every level
    ("placement: round-robin", "placment: round-robin",
     "FILE:19: placment: unknown field (did you mean 'placement'?); allowed: version, name,"),
    ("    vcpus: 2\n    memory: 2GB\n    switch: sw1", "    vcpu: 2\n    memory: 2GB\n    switch: sw1",
     "FILE:5: vms[0].vcpu: unknown field (did you mean 'vcpus'?)"),
    ("uplink: {rate: 1gbit}", "uplink: {rate: 1gbit, jitter: 1ms}", "FILE:15: switches[0].uplink.jitter: unknown field"),
    ("  - name: sw1\n", "  - name: sw1\n    mtu: 9000\n", "FILE:15: switches[0].mtu: unknown field"),
    # missing fields
    ("    vcpus: 2\n    memory: 2GB\n    switch: sw1", "    memory: 2GB\n    switch: sw1",
     "FILE:4: vms[0].vcpus: required, but missing"),
    ("uplink: {rate: 1gbit}", "uplink: {}", "FILE:15: switches[0].uplink.rate: required, but missing"),
    ("name: lab\n", "", "FILE:1: name: required, but missing"),
    # names
    ("name: lab", "name: Lab_1", "FILE:1: name: 'Lab_1' is not a valid name: use 1 to 32 lower-case letters"),
    ("name: lab", "name: ../../etc", "FILE:1: name: '../../etc' is not a valid name"),
    ("  - name: vm1", "  - name: 'vm1; rm -rf /'", "FILE:4: vms[0].name: 'vm1; rm -rf /' is not a valid name"),
    ("  - name: vm1", "  - name: " + "v" * 25, "is not a valid name: use 1 to 24"),
    ("name: lab", "name: 42", "FILE:1: name: expected a name (text), got the number 42"),
    # numbers and sizes
    ("vcpus: 2\n    memory: 2GB\n    switch: sw1", "vcpus: 0\n    memory: 2GB\n    switch: sw1",
     "FILE:5: vms[0].vcpus: 0 is out of range; allowed: 1 to 1024"),
    ("vcpus: 2\n    memory: 2GB\n    switch: sw1", "vcpus: yes\n    memory: 2GB\n    switch: sw1",
     "vms[0].vcpus: expected a whole number from 1 to 1024, got true/false"),
    ("vcpus: 2\n    memory: 2GB\n    switch: sw1", "vcpus: two\n    memory: 2GB\n    switch: sw1",
     "vms[0].vcpus: expected a whole number from 1 to 1024, got 'two'"),
    ("memory: 2GB\n    switch: sw1", "memory: 2048\n    switch: sw1",
     "FILE:6: vms[0].memory: expected a size with a unit such as 6GB or 512MB, got the number 2048"),
    ("memory: 2GB\n    switch: sw1", "memory: 2 furlongs\n    switch: sw1", "vms[0].memory: '2 furlongs' is not a size"),
    ("memory: 2GB\n    switch: sw1", "memory: '2048'\n    switch: sw1", "vms[0].memory: '2048' has no unit"),
    ("memory: 2GB\n    switch: sw1", "memory: 1MB\n    switch: sw1", "vms[0].memory: 1MB is too small; allowed: at least 64MB"),
    ("numa: 1", "numa: sideways", "FILE:11: vms[1].numa: expected a NUMA node number, 'packed' or 'spread', got 'sideways'"),
    ("numa: 1", "numa: -1", "vms[1].numa: node -1 is out of range"),
    # links
    ("uplink: {rate: 1gbit}", "uplink: {rate: 1gbyte}", "FILE:15: switches[0].uplink.rate: '1gbyte' is not a rate"),
    ("uplink: {rate: 1gbit}", "uplink: {rate: 1000}", "switches[0].uplink.rate: expected a rate such as 1gbit"),
    ("uplink: {rate: 1gbit}", "uplink: {rate: 1kbit}", "switches[0].uplink.rate: 1kbit is out of range; allowed: 100kbit to 100gbit"),
    ("uplink: {rate: 1gbit}", "uplink: {rate: 1gbit, delay: 3}", "switches[0].uplink.delay: expected a delay such as 1ms"),
    ("uplink: {rate: 1gbit}", "uplink: {rate: 1gbit, delay: 1 fortnight}", "'1 fortnight' is not a delay"),
    ("uplink: {rate: 1gbit}", "uplink: {rate: 1gbit, delay: 20s}", "switches[0].uplink.delay: 20s is out of range"),
    ("uplink: {rate: 1gbit}", "uplink: fast", "FILE:15: switches[0].uplink: expected a mapping of fields, got 'fast'"),
    # choices
    ("placement: round-robin", "placement: blok", "FILE:19: placement: expected one of block, round-robin, got 'blok'"),
    ("name: lab\n", "name: lab\nbackend: xen\n", "FILE:2: backend: expected one of local, netns, qemu, hosts, slurm, got 'xen'"),
    ("name: lab\n", "name: lab\nversion: 2\n", "FILE:2: version: expected one of 1, got the number 2"),
    ("description: two VMs across two uplinked switches", "description: " + "x" * 600,
     "description: expected text of at most 500 characters"),
    # shapes
    ("vms:\n", "vms: {}\nvms_:\n", "FILE:3: vms: expected a list, got a mapping"),
    # subnets
    ("subnet: 10.99.0.0/24", "subnet: 10.99.0.1/24", "FILE:20: subnet: '10.99.0.1/24' is not an IPv4 network"),
    ("subnet: 10.99.0.0/24", "subnet: 10.99.0.0/30", "subnet: /30 is out of range; allowed: /8 to /29"),
    ("subnet: 10.99.0.0/24", "subnet: fd00::/64", "subnet: 'fd00::/64' is not an IPv4 network"),
    ("subnet: 10.99.0.0/24", "subnet: 127.0.0.0/24", "FILE:20: subnet: 127.0.0.0/24 overlaps the reserved range "
                                                     "127.0.0.0/8; choose another subnet"),
    ("subnet: 10.99.0.0/24", "subnet: 192.168.0.0/16", "FILE:20: subnet: 192.168.0.0/16 overlaps the route to "
                                                       "192.168.1.0/24 via eth0"),
    ("subnet: 10.99.0.0/24", "subnet: 10.99.0.0/29", None),  # 6 addresses: 2 VMs and the head fit
])
def test_each_error_names_file_line_field_and_what_was_expected(tmp_path, old, new, expected):
    text = edit(GOOD, old, new)
    if expected is None:
        load_file(write(tmp_path, text), host=HOST)
        return
    assert expected in error_of(tmp_path, text)


@pytest.mark.parametrize("old, new, expected", [
    ("  - name: vm2\n", "  - name: vm1\n", "FILE:8: vms[1].name: 'vm1' is already the name of vms[0]"),
    ("  - name: sw2\n", "  - name: sw1\n", "switches[1].name: 'sw1' is already the name of switches[0]"),
    ("    switch: sw1\n", "    switch: sw9\n", "FILE:7: vms[0].switch: no switch named 'sw9'; switches: sw1, sw2"),
    ("    switch: sw1\n", "    switch: sw1\n    host: h9\n", "vms[0].host: no host named 'h9'; hosts: none are declared"),
    ("    uplink: {rate: 1gbit}\n", "\n", "FILE:14: switches[0]: switch 'sw1' has VMs but no uplink: VMs on "
                                         "different switches reach each other only through uplinks"),
    ("name: lab\n", "name: lab\nbackend: local\n", "vms: the local backend runs ranks on this host, without vms"),
    ("name: lab\n", "name: lab\nhosts: [{name: a}, {name: b}]\n",
     "FILE:2: hosts: the netns backend emulates VMs on this one host; declare at most one host"),
    ("subnet: 10.99.0.0/24", "subnet: 10.99.0.0/29\nvms_more: 1", "vms_more: unknown field"),
    ("vcpus: 2\n    memory: 2GB\n    switch: sw1", "vcpus: 16\n    memory: 2GB\n    switch: sw1",
     "FILE:5: vms[0].vcpus: 16 vCPUs on a host with 8 cpus; allowed: at most 8 (or add scale_from"),
    ("memory: 2GB\n    switch: sw1", "memory: 64GB\n    switch: sw1",
     "FILE:6: vms[0].memory: 64.0 GiB on a host with 16.0 GiB"),
    ("numa: 1", "numa: 3", "FILE:11: vms[1].numa: no NUMA node 3 on this host; nodes: 0 (cpus 0-3), 1 (cpus 4-7)"),
    ("vcpus: 2\n    memory: 2GB\n    numa: 1", "vcpus: 6\n    memory: 2GB\n    numa: 1",
     "vms[1].numa: node 1 has 4 cpus for 6 vCPUs"),
    ("vcpus: 2\n    memory: 2GB\n    switch: sw1", "vcpus: 6\n    memory: 2GB\n    switch: sw1",
     "vms[0].numa: packed needs 6 cpus on one NUMA node; the largest has 4; use spread or a node number"),
    ("name: lab\n", "name: lab\nhosts: [{name: h, cpus: 64}]\n", "FILE:2: hosts[0].cpus: 64 cpus declared; this host has 8"),
])
def test_problems_across_fields_are_located_too(tmp_path, old, new, expected):
    assert expected in error_of(tmp_path, edit(GOOD, old, new))


def test_a_netns_topology_needs_a_vm(tmp_path):
    assert "FILE:1: vms: the netns backend needs at least one VM" in error_of(tmp_path, "name: x\nbackend: netns\n")


def test_spread_vcpus_beyond_one_node_are_fine(tmp_path):
    text = edit(GOOD, "vcpus: 2\n    memory: 2GB\n    switch: sw1", "vcpus: 6\n    memory: 2GB\n    numa: spread\n    switch: sw1")
    assert load_file(write(tmp_path, text), host=HOST).vms[0].vcpus == 6


def test_every_problem_is_reported_in_line_order(tmp_path):
    text = edit(edit(GOOD, "placement: round-robin", "placement: nowhere"), "vcpus: 2", "vcpus: -2")
    lines = error_of(tmp_path, text).splitlines()
    assert lines[0].startswith("FILE:5: vms[0].vcpus") and lines[1].startswith("FILE:19: placement")


def test_broken_yaml_names_the_line(tmp_path):
    message = error_of(tmp_path, "name: x\nvms:\n  - name: [unclosed\n")
    assert message.startswith("FILE:4: not valid YAML") or message.startswith("FILE:3: not valid YAML")


def test_a_key_given_twice_is_an_error(tmp_path):
    assert error_of(tmp_path, "name: x\nname: y\n") == "FILE:2: name: given twice"


def test_yaml_aliases_are_refused(tmp_path):
    text = "name: a\nvms: &x [{name: v, vcpus: 1, memory: 1GB, switch: s}]\nswitches: *x\n"
    assert error_of(tmp_path, text) == "FILE:3: aliases (*x) are not allowed in a topology file; write the value out"


def test_field_names_must_be_text(tmp_path):
    assert "FILE:2: [1]: field names must be text" in error_of(tmp_path, "name: a\n1: x\n")


def test_a_document_that_is_not_a_mapping(tmp_path):
    assert "FILE:1: expected a mapping of topology fields" in error_of(tmp_path, "- just\n- a list\n")
    assert "expected a mapping of topology fields (name, vms, switches, ...), got nothing" in error_of(tmp_path, "")


@pytest.mark.parametrize("old, new, expected", [
    ("  - name: vm1", '  - name: "vm1\\n"', "FILE:4: vms[0].name: 'vm1\\n' is not a valid name"),
    ("name: lab", 'name: "lab\\n"', "FILE:1: name: 'lab\\n' is not a valid name"),
    ("  - name: vm1", "  - name: " + "v" * 300, "FILE:4: vms[0].name: 'vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv...' (300 characters)"),
    ("memory: 2GB\n    switch: sw1", "memory: " + "9" * 400 + "TB\n    switch: sw1",
     "FILE:6: vms[0].memory: 999999999999999999999999999999999999... (402 characters) is out of range; allowed: 64MB"),
    ("uplink: {rate: 1gbit}", "uplink: {rate: " + "9" * 400 + "gbit}", "is out of range; allowed: 100kbit to 100gbit"),
    ("uplink: {rate: 1gbit}", "uplink: {rate: 1gbit, delay: " + "9" * 400 + "s}", "is out of range; allowed: 1us to 10s"),
    ("uplink: {rate: 1gbit}", 'uplink: {rate: "1000tbit\\n"}', "switches[0].uplink.rate: '1000tbit\\n' is not a rate"),
    ("vcpus: 2\n    memory: 2GB\n    switch: sw1", "vcpus: " + "9" * 5000 + "\n    memory: 2GB\n    switch: sw1",
     "FILE:5: a number of 5000 digits; not a topology file"),
    ("description: two VMs across two uplinked switches", "description: " + "[" * 5000 + "]" * 5000,
     "FILE:2: nested more than 32 levels deep; not a topology file"),
    ("name: lab", "name: lab\x00", "FILE:1: not valid YAML: control character U+0000 is not allowed"),
])
def test_hostile_values_are_refused_in_one_printable_line(tmp_path, old, new, expected):
    message = error_of(tmp_path, edit(GOOD, old, new))
    assert expected in message
    assert message.isprintable(), message


def test_an_empty_file_has_no_line_to_name(tmp_path):
    assert error_of(tmp_path, "# nothing\n") == ("FILE: expected a mapping of topology fields (name, vms, switches, "
                                                "...), got nothing")


def test_binary_and_huge_files_are_refused(tmp_path):
    path = tmp_path / "bin.yaml"
    path.write_bytes(b"\xff\xfe\x00name")
    with pytest.raises(SpecError, match="not UTF-8 text"):
        load_file(path, host=HOST)
    path.write_text("#" * (2 << 20))
    with pytest.raises(SpecError, match="larger than 1 MiB"):
        load_file(path, host=HOST)


def test_unknown_preset_and_missing_file(tmp_path):
    with pytest.raises(UsageError, match=r"--topology: unknown topology 'nope'; choose a preset \(native, 1vm, .*\) "
                                         r"or a YAML file"):
        load_topology("nope", host=HOST)
    with pytest.raises(UsageError, match="--topology: no such file: "):
        load_topology(str(tmp_path / "absent.yaml"), host=HOST)


def test_too_many_vms(tmp_path):
    data = {"name": "big", "switches": [{"name": "s"}],
            "vms": [{"name": f"v{i}", "vcpus": 1, "memory": "64MB", "switch": "s"} for i in range(251)]}
    with pytest.raises(SpecError, match="vms: 251 VMs; allowed: at most 250"):
        on_host(data, HOST)


def test_a_subnet_too_small_for_its_vms(tmp_path):
    data = {"name": "t", "subnet": "10.1.0.0/29", "switches": [{"name": "s"}],
            "vms": [{"name": f"v{i}", "vcpus": 1, "memory": "64MB", "switch": "s"} for i in range(6)]}
    with pytest.raises(SpecError, match=r"subnet: 10.1.0.0/29 has 6 addresses; 7 are needed"):
        on_host(data, HOST)


# ---- presets ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(presets.PRESETS))
def test_every_preset_validates(name):
    topology = load_topology(name, host=SMALL)
    assert topology.name == name
    assert topology.backend == ("local" if name == "native" else "netns")


def test_presets_are_the_studys_six():
    assert list(presets.PRESETS) == ["native", "1vm", "2vm-1vswitch", "2vm-2vswitch", "4vm-1vswitch", "4vm-4vswitch"]


@pytest.mark.parametrize("name, vms, switches, uplinks", [
    ("1vm", 1, 1, 0), ("2vm-1vswitch", 2, 1, 0), ("2vm-2vswitch", 2, 2, 2),
    ("4vm-1vswitch", 4, 1, 0), ("4vm-4vswitch", 4, 4, 4),
])
def test_preset_shapes(name, vms, switches, uplinks):
    topology = load_topology(name, host=SMALL)
    assert len(topology.vms) == vms and len(topology.switches) == switches
    assert sum(1 for sw in topology.switches if sw.uplink) == uplinks
    assert all(sw.uplink.rate == 10**9 for sw in topology.switches if sw.uplink)


def test_presets_on_the_studys_host_keep_the_studys_sizes():
    study = HostFacts(cpus_by_node={0: tuple(range(8)), 1: tuple(range(8, 16))}, memory=48 << 30)
    two = load_topology("2vm-1vswitch", host=study)
    assert [(vm.vcpus, vm.memory) for vm in two.vms] == [(8, 12 << 30)] * 2
    four = load_topology("4vm-4vswitch", host=study)
    assert [(vm.vcpus, vm.memory) for vm in four.vms] == [(4, 6 << 30)] * 4


def test_presets_scale_to_a_small_host():
    four = load_topology("4vm-4vswitch", host=SMALL)
    assert [vm.vcpus for vm in four.vms] == [1, 1, 1, 1]  # 4 of 16 cpus -> 0.5 of 2, at least 1
    assert four.vms[0].memory == 3 << 30  # 6 of 48 GB -> 3 of 24
    assert four.scaled["vms"]["vm1"] == [4, 6 << 30]
    assert four.scaled["to"] == {"cpus": 2, "memory": 24 << 30}
    one = load_topology("1vm", host=HostFacts(cpus_by_node={0: tuple(range(6))}, memory=12 << 30))
    assert one.vms[0].vcpus == 3 and one.vms[0].memory == 3 << 30
    assert "scale_from" not in one.to_dict()  # sizes are already this host's


def test_a_declared_host_size_scales_too():
    data = {**presets.PRESETS["2vm-1vswitch"], "hosts": [{"name": "h", "cpus": 4, "memory": "8GB"}]}
    big = HostFacts(cpus_by_node={0: tuple(range(8))}, memory=64 << 30)
    topology = on_host(data, big)
    assert [vm.vcpus for vm in topology.vms] == [2, 2]
    assert topology.vms[0].memory == 2 << 30


def test_the_shared_model_checks_what_any_vm_topology_needs_and_nothing_of_this_host():
    """spec.from_dict is every VM backend's; sizes against this host are the netns backend's own check."""
    data = {"name": "wide", "vms": [{"name": "a", "vcpus": 64, "memory": "1TB", "switch": "s"},
                                    {"name": "b", "vcpus": 1, "memory": "1GB", "switch": "t"}],
            "switches": [{"name": "s", "uplink": {"rate": "1gbit"}}, {"name": "t", "uplink": {"rate": "1gbit"}}]}
    assert from_dict(data).vms[0].vcpus == 64 and not from_dict(data).scaled
    with pytest.raises(SpecError, match="vms\\[0\\].vcpus: 64 vCPUs on a host with 8 cpus"):
        on_host(data, HOST)
    data["switches"][1] = {"name": "t"}
    with pytest.raises(SpecError, match="switches\\[1\\]: switch 't' has VMs but no uplink"):
        from_dict(data)
    with pytest.raises(SpecError, match="hosts: the netns backend emulates VMs on this one host"):
        on_host({**data, "hosts": [{"name": "a"}, {"name": "b"}]}, HOST)


def test_native_is_the_local_backend():
    native = load_topology("native")
    assert native.backend == "local" and native.vms == [] and native.to_dict()["name"] == "native"


def test_locate_points_a_backend_error_at_the_line(tmp_path):
    topology = load_file(write(tmp_path, GOOD), host=HOST)
    assert topology.locate("switches", 1, "uplink", "rate").endswith("topo.yaml:18: switches[1].uplink.rate")
    assert load_topology("2vm-2vswitch", host=SMALL).locate("subnet") == "preset 2vm-2vswitch: subnet"
