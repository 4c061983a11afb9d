"""Inventories read through ``ansible-inventory --list`` and through the own reader give the same
hosts, groups and variables; what only Ansible reads (letter and stride ranges, inventory
directories) works when ansible-core is installed."""

import os
import sys
from pathlib import Path

import pytest

from vnetbench.core.errors import SpecError
from vnetbench.topologies.hosts import HostsBackend, ansible_inventory


def load_hosts(inventory, group: str | None = None):
    return HostsBackend.load(f"inventory:{inventory}" + (f"#{group}" if group else ""))


EXAMPLES = Path(__file__).resolve().parents[2] / "ansible" / "inventory"

pytestmark = pytest.mark.skipif(ansible_inventory.command() is None,
                                reason="ansible-inventory is not installed (pip install '.[deploy]')")

INI = """
[head]
h0 ansible_host=10.4.0.10

[compute]
n[1:3] vnetbench_slots=2 ansible_user=hpc

[compute:vars]
ansible_port=2200

[switch_a]
n1
n2

[switch_b]
n3

[all:vars]
vnetbench_network=10.4.0.0/24
"""

YAML = """
all:
  vars: {vnetbench_network: 10.5.0.0/24, vnetbench_topology_name: lab}
  children:
    compute:
      vars: {vnetbench_slots: 4, ansible_user: bench}
      children:
        switch_left:
          hosts:
            a1: {ansible_host: 10.5.0.11}
            a2: {ansible_host: 10.5.0.12, vnetbench_slots: 1}
        switch_right:
          hosts:
            b1: {ansible_host: 10.5.0.21, ansible_ssh_common_args: "-o StrictHostKeyChecking=no"}
"""

HOST_VARS = {"n1": "10.4.0.11", "n2": "10.4.0.12", "n3": "10.4.0.13"}


def both(path: Path, monkeypatch, **kwargs):
    # Ansible must really have read it: read() is None when it could not, and load_hosts would then fall back
    # to the own reader on both sides, comparing it with itself
    assert ansible_inventory.read(path) is not None, f"ansible-inventory could not read {path}"
    by_ansible = load_hosts(path, **kwargs)
    monkeypatch.setenv("VNETBENCH_INVENTORY_READER", "own")
    own = load_hosts(path, **kwargs)
    monkeypatch.delenv("VNETBENCH_INVENTORY_READER")
    return by_ansible, own


def ini_inventory(folder: Path) -> Path:
    path = folder / "hosts.ini"
    path.write_text(INI)
    (folder / "host_vars").mkdir()
    for host, address in HOST_VARS.items():
        (folder / "host_vars" / f"{host}.yml").write_text(f"ansible_host: {address}\n")
    (folder / "group_vars").mkdir()
    # host variables on the host's line beat group_vars/ (n3 keeps 2); h0 takes its group's
    (folder / "group_vars" / "switch_b.yml").write_text("vnetbench_slots: 3\n")
    (folder / "group_vars" / "head.yml").write_text("vnetbench_slots: 5\n")
    return path


def test_ini_with_var_dirs_same_through_both(tmp_path, monkeypatch):
    path = ini_inventory(tmp_path)
    for kwargs in ({}, {"group": "all"}, {"group": "switch_a"}):
        by_ansible, own = both(path, monkeypatch, **kwargs)
        assert by_ansible == own, kwargs
    by_ansible, _ = both(path, monkeypatch)
    assert [(h.name, h.address, h.switch, h.slots, h.ssh.user, h.ssh.port) for h in by_ansible.hosts] == [
        ("n1", "10.4.0.11", "a", 2, "hpc", 2200), ("n2", "10.4.0.12", "a", 2, "hpc", 2200),
        ("n3", "10.4.0.13", "b", 2, "hpc", 2200)]
    by_ansible, _ = both(path, monkeypatch, group="all")
    assert {h.name: h.slots for h in by_ansible.hosts}["h0"] == 5


def test_yaml_same_through_both(tmp_path, monkeypatch):
    path = tmp_path / "hosts.yml"
    path.write_text(YAML)
    by_ansible, own = both(path, monkeypatch)
    assert by_ansible == own
    assert by_ansible.name == "lab" and [h.slots for h in by_ansible.hosts] == [4, 1, 4]
    assert by_ansible.hosts[2].ssh.options == ("-o", "StrictHostKeyChecking=no")


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*") if p.is_file()))
def test_shipped_examples_same_through_both(example, monkeypatch):
    try:
        by_ansible, own = both(EXAMPLES / example, monkeypatch, group="all")
    except SpecError as exc:  # an example whose names do not resolve here: both must refuse alike
        monkeypatch.setenv("VNETBENCH_INVENTORY_READER", "own")
        with pytest.raises(SpecError):
            load_hosts(EXAMPLES / example, "all")
        pytest.skip(f"{example} does not load here: {exc}")
    assert by_ansible == own


def test_letter_and_stride_ranges_and_directories_only_through_ansible(tmp_path, monkeypatch):
    folder = tmp_path / "inventory"
    folder.mkdir()
    (folder / "10-compute.ini").write_text(
        "[compute]\nnode[a:c] vnetbench_slots=1\n[compute:vars]\nvnetbench_network=10.6.0.0/24\n")
    (folder / "20-more.ini").write_text("[compute]\nbig[0:4:2]\n")
    (folder / "host_vars").mkdir()
    for n, host in enumerate(["nodea", "nodeb", "nodec", "big0", "big2", "big4"], start=10):
        (folder / "host_vars" / f"{host}.yml").write_text(f"ansible_host: 10.6.0.{n}\n")
    topology = load_hosts(folder)
    assert sorted(h.name for h in topology.hosts) == ["big0", "big2", "big4", "nodea", "nodeb", "nodec"]
    monkeypatch.setenv("VNETBENCH_INVENTORY_READER", "own")
    with pytest.raises(SpecError):  # the own reader takes one file, not a directory
        load_hosts(folder)


def test_a_plugin_that_prints_without_end_is_cut_at_the_bound(tmp_path, monkeypatch):
    # an executable inventory script is a dynamic inventory: Ansible runs it; this one never stops printing
    script = tmp_path / "endless.py"
    script.write_text(f"#!{sys.executable}\nimport sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n")
    script.chmod(0o755)
    monkeypatch.setattr(ansible_inventory, "MAX_OUTPUT", 1 << 20)
    returncode, out, _ = ansible_inventory._bounded_run([str(script)], dict(os.environ))
    assert returncode != 0 and len(out) == (1 << 20) + 1


def test_a_plugin_that_never_answers_is_killed_at_the_timeout(tmp_path, monkeypatch):
    script = tmp_path / "stuck.py"
    script.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(60)\n")
    script.chmod(0o755)
    monkeypatch.setattr(ansible_inventory, "TIMEOUT_S", 0.5)
    returncode, out, _ = ansible_inventory._bounded_run([str(script)], dict(os.environ))
    assert returncode == -9 and out == b""


def test_an_interrupt_kills_the_plugin_rather_than_waiting_for_it(tmp_path):
    import signal
    import threading
    import time

    script, pid_file = tmp_path / "stuck.py", tmp_path / "pid"
    script.write_text(f"#!{sys.executable}\nimport os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
                      "time.sleep(60)\n")
    script.chmod(0o755)

    def interrupt():  # once the child runs, so that the interrupt lands inside _bounded_run
        while not (pid_file.exists() and pid_file.read_text()):
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)

    # Python's own SIGINT handler, which it does not install when started with SIGINT ignored (as a
    # non-interactive shell starts a background job): the interrupt is then a KeyboardInterrupt here too
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    threading.Thread(target=interrupt, daemon=True).start()
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            ansible_inventory._bounded_run([str(script)], dict(os.environ))
    finally:
        signal.signal(signal.SIGINT, previous)
    assert time.monotonic() - started < 30  # not the child's 60 s: it was killed, not waited for
    assert not os.path.exists(f"/proc/{pid_file.read_text()}")  # and reaped
