"""Hostfiles, Ansible inventories (YAML and INI) and hosts topology files, read into a hosts topology through the
hosts backend's refs (hostfile:PATH, inventory:PATH, inventory:PATH#GROUP, a bare path). No SSH."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from vnetbench.core.errors import SpecError, UsageError
from vnetbench.topologies.model import validation
from vnetbench.topologies.hosts import HostsBackend
from vnetbench.topologies.hosts.model import from_file

load = HostsBackend.load

EXAMPLES = Path(__file__).resolve().parents[2] / "ansible" / "inventory"


def write(tmp_path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def claimed(path: Path) -> bool:
    return HostsBackend.claims(path, path.read_text()) if path.is_file() else False


def summary(topology) -> list[tuple]:
    return [(h.name, h.address, h.switch, h.slots) for h in topology.hosts]


YAML_INVENTORY = """
all:
  vars:
    vnetbench_slots: 1
    vnetbench_topology_name: lab
  children:
    head:
      hosts:
        h0: {ansible_host: 10.1.0.10}
    compute:
      vars: {vnetbench_slots: 2, ansible_user: hpc}
      hosts:
        h1: {ansible_host: 10.1.0.11}
        h2: {ansible_host: 10.1.0.12, vnetbench_slots: 4}
      children:
        gpu:
          vars: {vnetbench_slots: 3}
          hosts:
            h3: {ansible_host: 10.1.0.13, vnetbench_switch: right}
    switch_left:
      hosts: {h1: , h2: }
"""


def test_a_yaml_inventory_gives_the_compute_hosts_with_ansible_precedence(tmp_path):
    topology = load(f"inventory:{write(tmp_path, 'inv.yml', YAML_INVENTORY)}")
    assert topology.backend == "hosts" and topology.name == "lab"
    # host vars over group vars, the deeper group (gpu) over its parent (compute) over all
    assert summary(topology) == [("h1", "10.1.0.11", "left", 2), ("h2", "10.1.0.12", "left", 4),
                                 ("h3", "10.1.0.13", "right", 3)]
    assert topology.subnet == "10.1.0.0/24"  # the /24 they share, as nothing says otherwise
    assert {h.ssh.user for h in topology.hosts} == {"hpc"}
    assert topology.switches == ["left", "right"]


def test_all_hosts_takes_the_head_node_too_and_needs_no_switch(tmp_path):
    topology = load(f"inventory:{write(tmp_path, 'inv.yml', YAML_INVENTORY)}#all")
    assert [h.name for h in topology.hosts] == ["h0", "h1", "h2", "h3"]
    assert topology.host("h0").switch == "default"


def test_an_ini_inventory_with_ranges_vars_and_children(tmp_path):
    text = """
    [head]
    h0 ansible_host=10.2.0.10

    [racks:children]
    switch_a
    switch_b

    [switch_a]
    node[01:02] vnetbench_slots=2

    [switch_b]
    node03 ansible_port=22 'ansible_ssh_common_args=-o StrictHostKeyChecking=no'

    [compute:children]
    racks

    [all:vars]
    vnetbench_network=10.2.0.0/16
    """
    host_vars = tmp_path / "host_vars"
    host_vars.mkdir()
    for n in (1, 2, 3):
        (host_vars / f"node0{n}.yml").write_text(f"ansible_host: 10.2.1.{n}\n")
    topology = load(f"inventory:{write(tmp_path, 'hosts.ini', chr(10).join(l.strip() for l in text.splitlines()))}")
    assert summary(topology) == [("node01", "10.2.1.1", "a", 2), ("node02", "10.2.1.2", "a", 2),
                                 ("node03", "10.2.1.3", "b", 1)]
    assert topology.subnet == "10.2.0.0/16"
    assert topology.host("node03").ssh.options == ("-o", "StrictHostKeyChecking=no")


def test_the_example_inventories_say_the_same_thing():
    from_yaml = load(f"inventory:{EXAMPLES / 'example.yml'}")
    from_ini = load(f"inventory:{EXAMPLES / 'example.ini'}")
    assert from_yaml.to_dict() == {**from_ini.to_dict(), "hosts": from_yaml.to_dict()["hosts"]}
    assert summary(from_yaml) == summary(from_ini) == [
        ("node01", "10.10.0.11", "leaf1", 16), ("node02", "10.10.0.12", "leaf1", 16),
        ("node03", "10.10.0.13", "leaf2", 16), ("node04", "10.10.0.14", "leaf2", 16)]
    assert from_yaml.name == "lab-2switch" and from_yaml.venv == "/opt/vnetbench/venv"


@pytest.mark.parametrize("text, phrase", [
    ("all:\n  children:\n    compute:\n      hosts:\n        h1: {ansible_host: 10.0.0.1}\n        h9.invalid:\n",
     "host 'h9.invalid': no address: it has no ansible_host, and its name does not resolve; set ansible_host"),
    ("all:\n  children:\n    compute:\n      hosts:\n        h1: {ansible_host: 10.0.0.1, vnetbench_switch: a}\n"
     "        h2: {ansible_host: 10.0.0.2}\n",
     "host 'h2': no switch: add it to a group switch_<name> or set vnetbench_switch"),
    ("all:\n  children:\n    compute:\n      hosts:\n        h1: {ansible_host: 10.0.0.1}\n"
     "    switch_a:\n      hosts: {h1: }\n    switch_b:\n      hosts: {h1: }\n",
     "host 'h1': in groups switch_a, switch_b; a host is on one switch"),
    ("all:\n  children:\n    compute:\n      hosts:\n        h1: {ansible_host: 10.0.0.1, vnetbench_switch: b}\n"
     "    switch_a:\n      hosts: {h1: }\n",
     "host 'h1': vnetbench_switch is 'b', but it is in group switch_a"),
    ("all:\n  children:\n    compute:\n      hosts:\n        h1: {ansible_host: 10.0.0.1}\n        h2: {ansible_host: 10.0.0.1}\n",
     "host 'h2': has the same address 10.0.0.1 as host 'h1'"),
    ("all:\n  vars: {vnetbench_network: 10.0.0.0/24}\n  children:\n    compute:\n      hosts:\n"
     "        h1: {ansible_host: 10.0.0.1}\n        h2: {ansible_host: 10.0.1.2}\n",
     "host 'h2': address 10.0.1.2 is outside the network 10.0.0.0/24"),
    ("all:\n  children:\n    compute:\n      hosts:\n        h1: {ansible_host: 10.0.0.1}\n        h2: {ansible_host: 10.0.1.2}\n",
     "the hosts are not on one /24 network (10.0.0.0/24, 10.0.1.0/24); say which network"),
    ("all:\n  children:\n    compute:\n      hosts:\n        h1: {ansible_host: '{{ lookup(\"env\", \"H1\") }}'}\n",
     "host 'h1': ansible_host is a Jinja template"),
    ("all:\n  children:\n    compute:\n      hosts:\n        h1: {ansible_host: 10.0.0.1, vnetbench_slots: many}\n",
     "inv.yml: host 'h1': slots: 'many' is not a whole number"),
    ("all:\n  children:\n    compute:\n      hosts:\n        h1: {ansible_host: 10.0.0.1, vnetbench_venv: /a}\n"
     "        h2: {ansible_host: 10.0.0.2, vnetbench_venv: /b}\n",
     "host 'h2': vnetbench_venv is '/b', but 'h1' has '/a'; it must be the same on every host"),
    ("all:\n  children:\n    compute:\n      hosts:\n        - h1\n",
     "group 'compute': hosts: expected a mapping of host names"),
    ("all:\n  children:\n    compute:\n      hostz:\n        h1:\n",
     "group 'compute': unknown field 'hostz' (did you mean 'hosts'?); allowed: children, hosts, vars"),
])
def test_a_bad_yaml_inventory_names_the_host_or_field(tmp_path, text, phrase):
    with pytest.raises(SpecError, match=None) as caught:
        load(f"inventory:{write(tmp_path, 'inv.yml', text)}")
    assert phrase in str(caught.value)
    assert str(caught.value).startswith(str(tmp_path / "inv.yml"))


@pytest.mark.parametrize("text, phrase", [
    ("[compute]\nh1 ansible_host=10.0.0.1\n[nosuch:vars]\nx=1\n",
     "inv.ini:3: group 'nosuch' is not defined (no [nosuch] or [nosuch:children] section)"),
    ("[compute]\nh1 ansible_host=10.0.0.1\n[compute:children]\nghost\n", "inv.ini:4: group 'ghost' is not defined"),
    ("[compute\nh1\n", "inv.ini:1: '[compute' is not a section header"),
    ("[compute]\nh1 ansible_host\n", "inv.ini:2: host 'h1': expected key=value, got 'ansible_host'"),
    ("[compute]\nnode[5:2] ansible_host=10.0.0.1\n", "host range 'node[5:2]'"),
    # the name is checked before its variables, and an address is checked before it is resolved
    ("[compute]\na;rm -rf x\n", "inv.ini:2: host 'a;rm' is not a host name"),
    ("[compute]\nh1 ansible_host='$(id)'\n", "host 'h1': address '$(id)' is not a host name or IPv4 address"),
])
def test_a_bad_ini_inventory_names_the_line(tmp_path, text, phrase):
    with pytest.raises(SpecError) as caught:
        load(f"inventory:{write(tmp_path, 'inv.ini', text)}")
    assert phrase in str(caught.value)


def test_an_unknown_group_is_refused_with_the_groups_there_are(tmp_path):
    with pytest.raises(SpecError, match=r"no group 'workers'; groups: all, compute, gpu, head, switch_left"):
        load(f"inventory:{write(tmp_path, 'inv.yml', YAML_INVENTORY)}#workers")


def test_a_hostfile_with_vnetbench_comments(tmp_path):
    path = write(tmp_path, "hostfile", """# Open MPI ignores comments; vnetbench reads its own
# vnetbench: name=pair network=10.3.0.0/24 placement=round-robin venv=/opt/v
10.3.0.11 slots=2 max_slots=4  # vnetbench: name=left switch=s1
10.3.0.12                      # vnetbench: switch=s2
""")
    topology = load(f"hostfile:{path}")
    assert summary(topology) == [("left", "10.3.0.11", "s1", 2), ("10.3.0.12", "10.3.0.12", "s2", 1)]
    assert (topology.name, topology.subnet, topology.placement, topology.venv) == \
           ("pair", "10.3.0.0/24", "round-robin", "/opt/v")
    assert claimed(path) and load(str(path)) == topology


@pytest.mark.parametrize("text, phrase", [
    ("10.0.0.1 slots=two\n", "hostfile:1: host '10.0.0.1': slots: 'two' is not a whole number"),
    ("10.0.0.1 cpus=2\n", "hostfile:1: host '10.0.0.1': 'cpus=2' is not a hostfile option"),
    ("10.0.0.1\n10.0.0.1\n", "hostfile:2: host '10.0.0.1' is listed twice (first on line 1)"),
    ("root@10.0.0.1\n", "user@host is not read by vnetbench"),
    ("10.0.0.1  # vnetbench: rack=4\n", "hostfile:1: 'rack=4' is not a vnetbench setting here"),
    ("node9.invalid slots=1\n", "host 'node9.invalid': no address: 'node9.invalid' does not resolve"),
    ("# just a comment\n", "no hosts"),
])
def test_a_bad_hostfile_names_the_line(tmp_path, text, phrase):
    with pytest.raises(SpecError) as caught:
        load(f"hostfile:{write(tmp_path, 'hostfile', text)}")
    assert phrase in str(caught.value)


def test_a_topology_file_round_trips(tmp_path):
    topology = load(f"inventory:{write(tmp_path, 'inv.yml', YAML_INVENTORY)}")
    path = write(tmp_path, "topology.yml", yaml.safe_dump(topology.to_dict()))
    again = load(str(path))
    assert again.to_dict() == topology.to_dict()
    # a YAML topology is not claimed as a hostfile or inventory: the one loader reads it (FILE:LINE: field) and
    # hands it to the backend its backend: names
    assert not claimed(path)
    data, lines = validation.read(path, str(path), "a topology", 1 << 20)
    assert HostsBackend.from_data(data, str(path), lines) == again


@pytest.mark.parametrize("change, phrase", [
    ({"backend": "netns"}, "backend: expected 'hosts', got 'netns'"),
    ({"hosts": []}, "hosts: expected a non-empty list"),
    ({"colour": "red"}, "colour: unknown field; allowed: version, name, description, backend"),
    ({"placement": "scatter"}, "placement: expected one of block, round-robin, got 'scatter'"),
    ({"name": "Big Lab"}, "name: 'Big Lab' is not a valid name: use 1 to 32 lower-case"),
    ({"name": "lab\n"}, "name: 'lab\\n' is not a valid name"),
    ({"hosts": [{"name": "a\n", "address": "10.0.0.1"}]}, "'a\\n' is not a host name"),
    ({"venv": "relative/venv"}, "venv: 'relative/venv' is not an absolute path"),
])
def test_a_bad_topology_file_names_the_field(change, phrase):
    data = {"version": 1, "name": "t", "backend": "hosts", "subnet": "10.0.0.0/24",
            "hosts": [{"name": "a", "address": "10.0.0.1", "switch": "s"}], **change}
    with pytest.raises(SpecError, match=None) as caught:
        from_file(data, "t.yml")
    assert phrase in str(caught.value)


def test_a_hosts_topology_file_is_validated_as_every_spec_is_naming_file_line_and_field(tmp_path):
    path = write(tmp_path, "lab.yml", "name: lab\nbackend: hosts\nsubnet: 10.0.0.0/24\nhosts:\n"
                                      "  - {name: a, address: 10.0.0.1, switch: s}\n"
                                      "  - name: b\n    address: 10.0.9.2\n    slots: 0\n    ssh: {port: 0, usr: x}\n")
    with pytest.raises(SpecError) as caught:
        load(str(path))
    assert str(caught.value).splitlines() == [
        f"{path}:8: hosts[1].slots: 0 is out of range; allowed: 1 to 4096",
        f"{path}:9: hosts[1].ssh.port: 0 is out of range; allowed: 1 to 65535",
        f"{path}:9: hosts[1].ssh.usr: unknown field (did you mean 'user'?); allowed: user, port, identity, options"]
    fixed = path.read_text().replace("slots: 0", "slots: 2").replace("{port: 0, usr: x}", "{port: 2222}")
    path.write_text(fixed)
    with pytest.raises(SpecError, match=rf"^{path}:7: hosts\[1\].address: host 'b': address 10.0.9.2 is outside "
                                        rf"the network 10.0.0.0/24"):
        load(str(path))
    path.write_text(fixed.replace("10.0.9.2", "10.0.0.2"))
    assert load(str(path)).host("b").ssh.port == 2222


def test_only_hosts_files_are_taken_for_the_hosts_backend(tmp_path):
    netns_spec = write(tmp_path, "two-vms.yml", "name: two\nvms:\n  - {name: a, vcpus: 1, memory: 1GB, switch: s}\n")
    assert not claimed(netns_spec)
    assert not claimed(tmp_path / "missing.yml")
    assert not claimed(write(tmp_path, "broken.yml", "name: [unclosed\n"))
    assert claimed(write(tmp_path, "inv.ini", "[compute]\nh1 ansible_host=10.0.0.1\n"))


def test_the_validator_ansible_uses_prints_the_topology_or_exits_2(tmp_path):
    good = write(tmp_path, "hostfile", "10.0.0.1 slots=2\n")
    bad = write(tmp_path, "bad", "10.0.0.1 slots=x\n")
    proc = subprocess.run([sys.executable, "-m", "vnetbench.topologies.hosts", str(good)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0 and json.loads(proc.stdout)["hosts"][0]["slots"] == 2
    proc = subprocess.run([sys.executable, "-m", "vnetbench.topologies.hosts", str(bad)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2 and "slots: 'x' is not a whole number" in proc.stderr


@pytest.mark.parametrize("ref, phrase", [
    ("inventory:", "--topology: 'inventory:': give a path; hosts refs are hostfile:PATH, inventory:PATH, "
                   "inventory:PATH#GROUP (#all: every host), hosts:PATH"),
    ("hostfile:", "give a path; hosts refs are"),
    ("inventory:#compute", "expected inventory:PATH#GROUP"),
    ("inventory:inv.yml#", "expected inventory:PATH#GROUP"),
])
def test_a_bad_ref_says_the_ref_forms(ref, phrase):
    with pytest.raises(UsageError) as caught:
        load(ref)
    assert phrase in str(caught.value)


def test_a_group_is_a_ref_and_all_is_every_host(tmp_path):
    path = write(tmp_path, "inv.yml", YAML_INVENTORY)
    assert [h.name for h in load(f"inventory:{path}#gpu").hosts] == ["h3"]
    assert [h.name for h in load(f"inventory:{path}#compute").hosts] == ["h1", "h2", "h3"]
    # a path that holds '#' is a path when it exists
    odd = write(tmp_path, "inv#1.yml", YAML_INVENTORY)
    assert [h.name for h in load(f"inventory:{odd}").hosts] == ["h1", "h2", "h3"]
    assert [h.name for h in load(f"inventory:{odd}#head").hosts] == ["h0"]
    # a group whose hosts say a switch, all but one: only every host (#all) may leave a host without one
    partial = write(tmp_path, "partial.yml", YAML_INVENTORY.replace("h3: {ansible_host: 10.1.0.13, "
                                                                    "vnetbench_switch: right}",
                                                                    "h3: {ansible_host: 10.1.0.13}"))
    with pytest.raises(SpecError, match="host 'h3': no switch"):
        load(f"inventory:{partial}")
    assert load(f"inventory:{partial}#all").host("h3").switch == "default"


def test_an_unknown_group_says_how_a_group_is_named(tmp_path):
    with pytest.raises(SpecError, match=r"\(inventory:PATH#GROUP names one\)"):
        load(f"inventory:{write(tmp_path, 'inv.yml', YAML_INVENTORY)}#workers")


def test_a_topology_file_is_not_an_inventory(tmp_path):
    path = write(tmp_path, "topology.yml", "name: t\nbackend: hosts\nhosts:\n  - {name: a, address: 10.0.0.1}\n")
    assert load(f"hosts:{path}").name == "t"
    with pytest.raises(SpecError, match="a topology file, not an Ansible inventory; give it as --topology"):
        load(f"inventory:{path}")


def test_a_vm_topology_on_hosts_is_its_vms_as_hosts(tmp_path):
    path = write(tmp_path, "vms.yml", """name: two-hosts
backend: hosts
hosts:
  - {name: m1, address: 10.8.0.1}
  - {name: m2, address: 10.8.0.2}
switches:
  - {name: a}
vms:
  - {name: m1, vcpus: 2, memory: 1GB, switch: a}
  - {name: vm2, vcpus: 1, memory: 1GB, switch: a, host: m2}
""")
    data, lines = validation.read(path, str(path), "a topology", 1 << 20)
    topology = HostsBackend.from_data(data, str(path), lines)
    assert [(h.name, h.address, h.switch, h.slots) for h in topology.hosts] == [("m1", "10.8.0.1", "a", 2),
                                                                              ("vm2", "10.8.0.2", "a", 1)]
    assert topology.subnet == "10.8.0.0/24" and topology.source == str(path)
    # each VM must get a rank, as on every VM topology; an inventory's hosts fill slot by slot
    assert "would leave a VM idle" in HostsBackend.cannot_place(topology, 1)
    assert HostsBackend.cannot_place(load(f"inventory:{write(tmp_path, 'inv.yml', YAML_INVENTORY)}"), 1) is None
    assert load(str(path)) == topology
