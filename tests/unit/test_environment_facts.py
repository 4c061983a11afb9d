"""The environment facts a record carries beside the versions (as pyperf records them)."""

from pathlib import Path

from vnetbench import environment


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
