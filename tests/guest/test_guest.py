"""cgroup v2 confinement and tc netem delay, for real, in a virtme-ng guest (see conftest.py).

Each test asserts on what tests/guest/inside.py observed in the guest while it drove the CLI:
``topology show`` of tests/guest/confined.yaml, a ``vnetbench exec`` on it (which brings it up,
runs ranks that report their own cgroup and cpus and start a process beyond the VM's memory cap,
and takes it down), meanwhile the VMs' cgroup files, qdiscs and a UDP ping-pong across a delayed
and an undelayed uplink, a failed run on another topology at the same time, and the hierarchy
after both. Timings under TCG mean nothing, except as lower bounds netem guarantees.
"""

import pytest

pytestmark = pytest.mark.timeout(660)

DELAY_MS = 20  # confined.yaml: vswitch1's uplink, each way


def observed(facts: dict, name: str):
    """The facts of one step in the guest; the test fails with the step's error when it failed."""
    seen = facts.get("processes", {})
    assert name in facts["steps"], f"the guest never got to step {name!r}; its console:\n" \
                                   f"{facts['host']['console_tail']}\nits processes at {seen.get('since_boot')} s " \
                                   f"since boot:\n" + "\n".join(seen.get("seen", []))
    step = facts["steps"][name]
    assert step["ok"], f"step {name!r} failed in the guest: {step['error']}"
    return facts[name]


def ran(result: dict, rc: int = 0) -> None:
    assert result["rc"] == rc, f"vnetbench {' '.join(result['argv'])} exited {result['rc']}:\n{result['stderr']}"


def test_the_guest_is_a_cgroup_v2_host(guest):
    facts = observed(guest, "guest")
    assert facts["cgroup_fs"] == "cgroup2fs"
    assert {"cpuset", "memory"} <= set(facts["controllers"].split())
    assert facts["before"]["ours"] == []


def test_show_says_cgroup_v2_enforces_the_vms(guest):
    show = observed(guest, "show")
    ran(show)
    assert "vCPUs enforced by cgroup v2 cpuset; memory limited by cgroup v2 memory.max" in show["stdout"]


def test_each_vm_is_confined_in_its_own_v2_group(guest):
    confined = observed(guest, "confined")
    assert confined["mode"] == "v2"
    vms = confined["vms"]
    assert sorted(vms) == ["vm1", "vm2"]
    cpus = set()
    for name, vm in vms.items():
        assert vm["folder"] == vm["memory_folder"], "v2: one group per VM holds both controllers"
        assert vm["folder"].startswith("/sys/fs/cgroup/vnb-") and vm["folder"].endswith(f"-{name}")
        assert vm["cpuset.cpus"] == ",".join(map(str, vm["planned_cpus"]))
        assert vm["cpuset.cpus.effective"] == vm["cpuset.cpus"]
        assert vm["cpuset.mems"] == ",".join(map(str, vm["planned_mems"]))
        assert int(vm["memory.max"]) == vm["planned_memory"] == 128 << 20
        assert vm["memory.swap.max"] in (None, "0")  # None: a kernel without swap accounting
        cpus |= set(vm["planned_cpus"])
    assert len(cpus) == 2, "each VM has a cpu of its own on the 2-cpu guest"
    while_up = confined["while_up"]
    assert set(while_up["subtree_control"]["/sys/fs/cgroup"].split()) >= {"cpuset", "memory"}
    # the failed run's topology (2vm-1vswitch) may be up too, in groups of its own beside these
    assert set(while_up["ours"]) >= {vm["folder"] for vm in vms.values()}
    assert all(path.count("/") == 4 for path in while_up["ours"]), "VM groups are leaves under the root"


def test_each_rank_runs_inside_its_vms_group_on_its_cpus(guest):
    confined = observed(guest, "confined")["vms"]
    run = observed(guest, "exec")
    ran(run)
    ranks = sorted(run["ranks"], key=lambda r: r["hostname"])
    assert [r["hostname"] for r in ranks] == ["guest-confined-vm1", "guest-confined-vm2"], run["stdout"]
    for rank, name in zip(ranks, ("vm1", "vm2")):
        assert "/sys/fs/cgroup" + rank["cgroup"] == confined[name]["folder"]
        assert rank["cpus"] == confined[name]["cpuset.cpus"]
    notes = run["record"]["launch"]["notes"]
    assert notes["vcpus_enforced_by"] == "cgroup v2 cpuset"
    assert notes["memory_limited_by"] == "cgroup v2 memory.max"
    assert run["record"]["topology"]["enforced_by"] == {"vcpus": "cgroup v2 cpuset",
                                                        "memory": "cgroup v2 memory.max"}


def test_a_process_beyond_the_vms_memory_cap_is_oom_killed(guest):
    ranks = observed(guest, "exec")["ranks"]
    assert len(ranks) == 2
    for rank in ranks:
        assert rank["hog_rc"] == 128 + 9, f"{rank['hostname']}: a 512 MB allocation under a 128 MB cap " \
                                         f"ended with {rank['hog_rc']}, not SIGKILL"
        assert rank["oom_kill_after"] == rank["oom_kill_before"] + 1


def test_an_uplink_delay_is_netem_on_both_ends(guest):
    seen = observed(guest, "qdiscs")
    assert seen["delay_us"] == {"vswitch1": DELAY_MS * 1000, "vswitch2": None}
    kinds = {}
    for q in seen["qdiscs"]:
        kinds.setdefault(q["dev"], set()).add(q["kind"])
    for dev in seen["uplinks"]["vswitch1"]:
        assert kinds.get(dev) == {"netem", "tbf"}, f"{dev}: {kinds.get(dev)}"
        netem = next(q for q in seen["qdiscs"] if q["dev"] == dev and q["kind"] == "netem")
        assert netem["options"]["delay"]["delay"] == pytest.approx(DELAY_MS / 1000)
    for dev in seen["uplinks"]["vswitch2"]:
        assert kinds.get(dev) == {"tbf"}, f"{dev}: {kinds.get(dev)}"


def test_a_ping_pong_across_the_delayed_uplink_takes_twice_the_delay_longer(guest):
    rtt = observed(guest, "rtt")
    delayed, plain = rtt["vm1"]["ms"], rtt["vm2"]["ms"]
    assert len(delayed) == len(plain) == 15
    # each way through the delayed uplink's netem: the VM's switch must not take the head's packets itself
    for dev in observed(guest, "qdiscs")["uplinks"]["vswitch1"]:
        assert rtt["vm1"]["qdisc_packets"].get(f"{dev} netem", 0) >= len(delayed), rtt["vm1"]
    # netem holds every packet at least DELAY_MS each way: no round trip can be shorter than that
    assert min(delayed) >= 2 * DELAY_MS, f"delayed {delayed}; {rtt['vm1']}"
    # and the undelayed path is not that slow: the difference is the delay, not TCG's noise. A busy emulated CPU
    # only adds to a round trip (the undelayed path's ranged 1.8 to 67 ms while the guest's CLI calls ran, its
    # median 20 ms), so each path's floor, its fastest round trip, is what the delay must separate
    extra = min(delayed) - min(plain)
    assert extra >= 0.75 * 2 * DELAY_MS, f"delayed {delayed}, undelayed {plain}"


def test_the_run_leaves_the_hierarchy_as_it_was(guest):
    before = observed(guest, "guest")["before"]
    run = observed(guest, "exec")
    ran(run)
    assert run["after"] == before


def test_a_failed_run_leaves_nothing_of_its_own_and_the_controllers_to_the_other(guest):
    from vnetbench.topologies.model import spec

    tid = spec.load_topology("2vm-1vswitch").id  # the id comes from the name: the same in the guest
    failed = observed(guest, "failed_run")
    ran(failed, rc=1)
    after = failed["after"]
    for kind in ("ours", "namespaces", "links", "run_dir"):
        assert not [name for name in after[kind] if tid in name], f"{kind}: {after[kind]}"
    # the run on confined.yaml was still up: its groups keep the controllers it shares
    assert set(after["subtree_control"]["/sys/fs/cgroup"].split()) >= {"cpuset", "memory"}
    assert ".cgroup-v2-enabled.json" in after["run_dir"]
