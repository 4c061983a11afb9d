"""The hosts backend's mpirun plan, and how `hosts check` judges what it found. No SSH, no MPI."""

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from vnetbench.core.errors import SpecError, UsageError
from vnetbench.topologies.launch import hostcheck
from vnetbench.topologies.base import HostReport
from vnetbench.topologies.hosts import HostsBackend, remote
from vnetbench.topologies.hosts.model import HostsTopology, Read, Ssh, from_read, from_vms

SSH = {"user": "hpc", "identity": "/k/id", "options": ["-o", "A=b"]}


def topology(slots=(1, 1), placement="block", ssh=SSH, venv=None) -> HostsTopology:
    fields = {"name": "pair", "subnet": "10.9.0.0/24", "placement": placement, **({"venv": venv} if venv else {})}
    return from_read(Read("t", fields, [("t", {"name": f"h{i}", "address": f"10.9.0.{11 + i}", "switch": f"sw{i % 2}",
                                              "slots": n, "ssh": ssh}) for i, n in enumerate(slots)]))


def value_after(argv: list[str], option: str, key: str | None = None) -> str:
    for i, arg in enumerate(argv):
        if arg == option and (key is None or argv[i + 1] == key):
            return argv[i + 2] if key else argv[i + 1]
    raise AssertionError(f"{option} {key or ''} not in {argv}")


def test_the_launch_uses_this_venv_by_absolute_path_and_stays_on_the_network():
    with HostsBackend(topology(), check_reachable=False) as up:
        spec = up.launch(2, "none")
        argv = spec.mpirun_args
        hostfile = Path(value_after(argv, "--hostfile"))
        assert hostfile.read_text() == "10.9.0.11 slots=1\n10.9.0.12 slots=1\n"
    assert not hostfile.exists()  # removed with the realised topology
    assert value_after(argv, "--prefix") == sys.prefix
    assert value_after(argv, "--prtemca", "plm_ssh_args") == \
        "-o BatchMode=yes -o ConnectTimeout=10 -l hpc -i /k/id -o A=b"
    assert value_after(argv, "--prtemca", "plm_ssh_no_tree_spawn") == "1"
    assert value_after(argv, "--prtemca", "prte_if_include") == "10.9.0.0/24"
    assert value_after(argv, "--mca", "btl_tcp_if_include") == "10.9.0.0/24"
    assert spec.expected_placement == [{"address": "10.9.0.11"}, {"address": "10.9.0.12"}]
    assert [label["switch"] for label in spec.placement_labels] == ["sw0", "sw1"]


@pytest.mark.parametrize("placement, mapping, hosts", [
    ("block", "slot", ["h0", "h0", "h1"]),
    ("round-robin", "node", ["h0", "h1", "h0"]),
])
def test_ranks_are_placed_as_open_mpi_maps_them(placement, mapping, hosts):
    up = HostsBackend(topology(slots=(2, 2), placement=placement), check_reachable=False)
    try:
        spec = up.launch(3)
        assert value_after(spec.mpirun_args, "--map-by") == mapping
        assert [label["host"] for label in spec.placement_labels] == hosts
        # each host gets the slots its ranks use, so that Open MPI maps exactly as planned
        assert Path(value_after(spec.mpirun_args, "--hostfile")).read_text() == "10.9.0.11 slots=2\n10.9.0.12 slots=1\n"
        assert spec.notes["bind"] == "core"
    finally:
        up.close()


def test_more_ranks_than_slots_are_refused_naming_the_slots():
    with pytest.raises(UsageError, match=r"--ranks: 3 ranks need more slots than the hosts have \(2: h0 1, h1 1\)"):
        HostsBackend(topology(), check_reachable=False).check_ranks(3)


def test_hosts_that_need_different_ssh_options_cannot_share_one_mpirun():
    topo = from_read(Read("t", {"name": "t"}, [("t", {"name": "a", "address": "10.9.0.1", "switch": "s"}),
                                                ("t", {"name": "b", "address": "10.9.0.2", "switch": "s",
                                                       "ssh": {"port": 2222}})]))
    with pytest.raises(UsageError, match=r"host 'b': its SSH settings \(-p 2222\) differ from host 'a'"):
        HostsBackend(topo, check_reachable=False)


def test_a_venv_elsewhere_than_this_one_is_refused():
    with pytest.raises(UsageError, match=r"the hosts have vnetbench in /opt/elsewhere \(vnetbench_venv\), but this "
                                         r"vnetbench runs from"):
        HostsBackend(topology(venv="/opt/elsewhere"), check_reachable=False)


def test_a_spec_with_the_hosts_backend_is_taken_as_hosts():
    spec = SimpleNamespace(name="spec", source="s.yml", placement="block", subnet=None,
                           hosts=[SimpleNamespace(name="m1", address="10.8.0.1"),
                                  SimpleNamespace(name="m2", address=None)],
                           vms=[SimpleNamespace(name="m1", host=None, switch="a", vcpus=4),
                                SimpleNamespace(name="vm2", host="m2", switch="a", vcpus=2)])
    with pytest.raises(SpecError, match="VM 'vm2': no host 'm2' with an address"):
        from_vms(spec)
    spec.vms.pop()
    converted = from_vms(spec)
    assert [(h.name, h.address, h.slots) for h in converted.hosts] == [("m1", "10.8.0.1", 4)]
    assert converted.subnet == "10.8.0.0/24"


def report(name, **probe) -> HostReport:
    base = {"vnetbench": "0.1.0", "vnetbench_path": "/v/lib/vnetbench", "python": "3.11.7", "open_mpi": "5.0.11",
            "mpirun": "/v/bin/mpirun", "peers": {}}
    return HostReport(name, "10.0.0.1", reached=True, probe={**base, **probe})


def test_a_host_that_differs_from_the_others_is_the_one_that_fails():
    reports = [report("a"), report("b", open_mpi="4.1.6"), report("c")]
    hostcheck.compare(reports, "/v")
    assert [r.ok for r in reports] == [True, False, True]
    assert reports[1].problems == ["Open MPI 4.1.6 differs from 5.0.11 on a, c"]


def test_with_two_hosts_that_differ_the_first_is_the_reference():
    reports = [report("a"), report("b", vnetbench="0.0.9")]
    hostcheck.compare(reports, "/v")
    assert reports[0].ok and reports[1].problems == ["vnetbench 0.0.9 differs from 0.1.0 on a"]


def test_ssh_options_are_read_as_ssh_reads_them():
    assert remote._ssh_options(("-o", "UserKnownHostsFile=/k/h", "-oStrictHostKeyChecking=no", "-v")) == \
        {"userknownhostsfile": "/k/h", "stricthostkeychecking": "no"}


def test_the_remote_probes_are_valid_python():
    for function in (hostcheck.probe, remote._facts):
        command = remote._remote(function, "/opt/v", {"timeout": 1})
        assert command.startswith("/opt/v/bin/python -c ")
        compile(remote.inspect.getsource(function), "<probe>", "exec")


def test_facts_run_here_describe_this_machine():
    facts = remote._facts({})
    assert facts["logical_cpus"] >= 1 and "lo" in facts["nics"]
    assert facts["nics"]["lo"]["virtual"] is True


def test_one_ssh_argv_for_mpirun_and_for_the_hosts_checking_each_other():
    ssh = Ssh(user="hpc", port=2222, identity="/k/id", options=("-o", "UserKnownHostsFile=/k/known"))
    assert ssh.argv() == ["-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-l", "hpc", "-p", "2222", "-i", "/k/id",
                          "-o", "UserKnownHostsFile=/k/known"]
    assert ssh.argv(connect_timeout=3) == [*ssh.argv()[:3], "ConnectTimeout=3", *ssh.argv()[4:]]
