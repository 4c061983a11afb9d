"""A backend's launch arguments read as an intent every flavour can carry out; what has no meaning is refused."""

import pytest

from vnetbench.mpi import flavours
from vnetbench.core.errors import LaunchError


def test_an_emulated_topology_s_arguments_become_an_intent():
    intent = flavours.intent_from_prrte([
        "--host", "vm1:2,vm2:1", "-n", "3", "--map-by", "node", "--bind-to", "none",
        "--prtemca", "plm_ssh_agent", "/v/bin/python -m vnetbench.topologies.agent",
        "--prtemca", "prte_if_include", "10.213.1.0/24", "--mca", "btl_tcp_if_include", "10.213.1.0/24"])
    assert (intent.ranks, intent.hosts, intent.map_by, intent.bind) == (3, [("vm1", 2), ("vm2", 1)], "node", "none")
    assert (intent.subnet, intent.iface) == ("10.213.1.0/24", flavours.VM_IFACE)
    assert intent.agent.endswith("vnetbench.topologies.agent")


@pytest.mark.parametrize("agent", ["/v/bin/python -m vnetbench.topologies.netns.agent", "/v/bin/vnetbench-agent"])
def test_the_emulated_vms_agent_is_known_wherever_its_module_lives(agent):
    intent = flavours.intent_from_prrte(["-n", "2", "--prtemca", "plm_ssh_agent", agent])
    assert intent.iface == flavours.VM_IFACE
    ssh = flavours.intent_from_prrte(["-n", "2", "--prtemca", "plm_ssh_agent", "ssh -i /run/vnetbench/agent/key"])
    assert ssh.iface is None


def test_an_argument_no_other_mpi_understands_is_refused():
    with pytest.raises(LaunchError, match="'--display-map' has no meaning"):
        flavours.intent_from_prrte(["-n", "2", "--display-map"])


def test_hydra_gets_the_hostfile_in_its_own_syntax(tmp_path):
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("10.0.0.1 slots=2  # vnetbench: name=h1\n\n10.0.0.2 slots=1\n")
    mpich = flavours.Mpich("/usr/bin/mpiexec.hydra", "4.0.2")
    argv = mpich.command(flavours.Intent(ranks=3, hostfile=str(hostfile)), ["./hello"])
    converted = argv[argv.index("-f") + 1]
    assert open(converted).read() == "10.0.0.1:2\n10.0.0.2:1\n"
