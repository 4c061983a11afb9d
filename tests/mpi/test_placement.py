"""Binding, memory policy and counters are applied and recorded, checked from inside the ranks."""

import os

import pytest

from conftest import json_lines, requires_mpi, vnetbench
from vnetbench.kernels.numa import NodeMap

pytestmark = [requires_mpi, pytest.mark.timeout(120)]

TINY = ["--max-size", "64", "--iterations", "20"]


def test_local_policy_is_applied_and_read_back_by_each_rank(store):
    proc = vnetbench("run", "allreduce", "--ranks", 2, "--mem-policy", "local", "--json", "--store", store, *TINY,
                     check=0)
    (record,) = json_lines(proc.stdout)
    assert record["run_options"] == {"mem_policy": "local"}
    node_map = NodeMap.read()
    for placement in record["placement"]:
        memory = placement["memory"]
        assert memory["requested"] == "local"
        assert memory["kernel_policy"]["mode"] == "bind"
        assert memory["kernel_policy"]["nodes"] == node_map.nodes_of(placement["cpus"])
        assert sum(memory["pages_per_node"].values()) > 0
        assert set(memory["pages_per_node"]) <= {str(n) for n in memory["nodes"]}


@pytest.mark.skipif(not NodeMap.read().single, reason="the refusal is for one-node machines")
def test_remote_on_one_node_is_refused_then_recorded_as_single_node_when_allowed(store):
    refused = vnetbench("run", "allreduce", "--ranks", 2, "--mem-policy", "remote", "--store", store, *TINY)
    assert refused.returncode == 2
    assert "--mem-policy: remote needs 2 or more NUMA nodes" in refused.stderr
    assert not store.exists()
    proc = vnetbench("run", "allreduce", "--ranks", 2, "--mem-policy", "interleave", "--allow-single-node", "--json",
                     "--store", store, *TINY, check=0)
    (record,) = json_lines(proc.stdout)
    for placement in record["placement"]:
        assert placement["memory"]["single_node"] is True
        assert placement["memory"]["effective"] == "local"  # never claimed as interleaved over nodes it lacks
        assert placement["memory"]["kernel_policy"]["mode"] == "interleave"


def test_bind_none_lets_ranks_float_over_all_cpus(store):
    proc = vnetbench("run", "allreduce", "--ranks", 2, "--bind", "none", "--json", "--store", store, *TINY, check=0)
    (record,) = json_lines(proc.stdout)
    everything = sorted(os.sched_getaffinity(0))
    assert all(p["cpus"] == everything for p in record["placement"])
    assert record["launch"]["notes"]["bind"] == "none"


def test_counters_are_recorded_or_their_absence_explained(store):
    proc = vnetbench("run", "allreduce", "--ranks", 2, "--counters", "--json", "--store", store, *TINY, check=0)
    (record,) = json_lines(proc.stdout)
    for placement in record["placement"]:
        counters = placement["counters"]
        assert counters["events"]["task_clock_ns"] > 0  # software events are always readable
        for name in ("cycles", "instructions", "llc_misses"):
            assert (name in counters["events"]) != (name in counters["unavailable"])
