"""The environment facts a record carries beside the versions (as pyperf records them)."""

import os
import subprocess
from importlib import metadata
from pathlib import Path

import pytest

from conftest import json_lines, requires_mpi, vnetbench
from vnetbench import environment

SOURCE = Path(environment.__file__).resolve().parent.parent


def test_cpu_state_reads_governor_boost_and_smt(tmp_path):
    # a sysfs-shaped tree as an Intel host with cpufreq shows it (this machine exposes no cpufreq)
    for cpu, governor in (("cpu0", "performance"), ("cpu1", "powersave")):
        (tmp_path / cpu / "cpufreq").mkdir(parents=True)
        (tmp_path / cpu / "cpufreq" / "scaling_governor").write_text(governor + "\n")
    (tmp_path / "intel_pstate").mkdir()
    (tmp_path / "intel_pstate" / "no_turbo").write_text("1\n")
    (tmp_path / "smt").mkdir()
    (tmp_path / "smt" / "control").write_text("on\n")
    (tmp_path / "smt" / "active").write_text("1\n")
    assert environment.cpu_state(str(tmp_path)) == {
        "governor": ["performance", "powersave"], "boost": False, "smt": {"control": "on", "active": True}}
    (tmp_path / "cpufreq").mkdir()
    (tmp_path / "cpufreq" / "boost").write_text("1\n")  # acpi-cpufreq / amd: boost wins over intel_pstate
    assert environment.cpu_state(str(tmp_path))["boost"] is True


def test_cpu_state_of_this_machine_is_what_sysfs_says():
    state = environment.cpu_state()
    smt = Path("/sys/devices/system/cpu/smt/control")
    assert state["smt"]["control"] == (smt.read_text().strip() if smt.exists() else None)
    governor = Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    if governor.exists():
        assert governor.read_text().strip() in state["governor"]
    else:
        assert state["governor"] is None


@requires_mpi
@pytest.mark.timeout(120)
def test_run_records_the_environment_facts(store):
    proc = vnetbench("run", "halo", "--ranks", 2, "--json", "--store", store, check=0)
    (record,) = json_lines(proc.stdout)
    env = record["environment"]
    assert env["versions"]["numba"] == metadata.version("numba")
    assert len(env["load_average"]) == 3 and all(x >= 0 for x in env["load_average"])
    assert set(env["cpu"]) == {"governor", "boost", "smt"}
    if (SOURCE / ".git").exists():
        status = subprocess.run(["git", "-C", str(SOURCE), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=10)
        assert env["git_dirty"] is bool(status.stdout.strip())
    else:
        assert env["git_dirty"] is None
