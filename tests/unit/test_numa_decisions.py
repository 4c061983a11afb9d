"""Memory-policy decisions on multi-node machines, through a FAKE node map.

This machine has one NUMA node, so the two- and four-node layouts here are fakes: sysfs-shaped
directories written by the test (node*/cpulist), read by the same NodeMap.read() that reads
/sys/devices/system/node on a real host.
"""

import pytest

from vnetbench.core.errors import UsageError
from vnetbench.kernels.numa import NodeMap, check_policy
from vnetbench.topologies.thishost.host import parse_cpulist


def fake_sysfs(tmp_path, layout: dict[int, str]):
    """A FAKE /sys/devices/system/node with the given node -> cpulist."""
    for node, cpulist in layout.items():
        (tmp_path / f"node{node}").mkdir()
        (tmp_path / f"node{node}" / "cpulist").write_text(cpulist + "\n")
    (tmp_path / "online").write_text("0\n")  # not a node: must be ignored
    return tmp_path


def test_cpulist_parsing():
    assert parse_cpulist("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]
    assert parse_cpulist("") == []


def test_two_node_host_like_the_study(tmp_path):
    nodes = NodeMap.read(fake_sysfs(tmp_path, {0: "0-3,8-11", 1: "4-7,12-15"}))
    assert not nodes.single
    assert nodes.nodes_of([0, 1]) == [0]
    assert nodes.target_nodes("local", [4, 5]) == [1]
    assert nodes.target_nodes("remote", [4, 5]) == [0]
    assert nodes.target_nodes("interleave", [4]) == [0, 1]
    # a VM spread over both nodes has no remote node left: its memory stays on its own nodes
    assert nodes.target_nodes("remote", [0, 4]) == [0, 1]
    check_policy("remote", False, nodes)
    check_policy("interleave", False, nodes)


def test_four_nodes_remote_means_every_other_node(tmp_path):
    nodes = NodeMap.read(fake_sysfs(tmp_path, {0: "0-3", 1: "4-7", 2: "8-11", 3: "12-15"}))
    assert nodes.target_nodes("remote", [9]) == [0, 1, 3]
    assert nodes.describe() == {"0": [0, 1, 2, 3], "1": [4, 5, 6, 7], "2": [8, 9, 10, 11], "3": [12, 13, 14, 15]}


def test_single_node_refuses_remote_and_interleave_unless_allowed(tmp_path):
    nodes = NodeMap.read(fake_sysfs(tmp_path, {0: "0-1"}))
    assert nodes.single
    for policy in ("remote", "interleave"):
        with pytest.raises(UsageError, match=f"--mem-policy: {policy} needs 2 or more NUMA nodes"):
            check_policy(policy, False, nodes)
        check_policy(policy, True, nodes)
    check_policy("local", False, nodes)
    assert nodes.target_nodes("remote", [0]) == [0]


def test_unknown_policy_is_refused():
    with pytest.raises(UsageError, match="--mem-policy: 'far' is not allowed; choose from local, remote, interleave"):
        check_policy("far", False)


def test_no_numa_in_kernel_means_one_node_of_all_cpus(tmp_path):
    nodes = NodeMap.read(tmp_path)
    assert list(nodes.nodes) == [0] and nodes.nodes[0]
