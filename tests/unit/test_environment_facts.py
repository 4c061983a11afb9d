"""The environment facts a record carries beside the versions (as pyperf records them)."""

from pathlib import Path

from vnetbench.core import environment


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


# ---- the git facts of vnetbench's source: asked by the launcher where the ranks share its files ------------

def _context(backend: str) -> dict:
    """The --context a kernel's ranks get from the launcher on a topology of ``backend`` (a stand-in run: the
    workload reads only these fields of it)."""
    import json
    from types import SimpleNamespace

    from vnetbench.topologies.base import backend as backend_class
    from vnetbench.workloads.kernel import KernelWorkload

    cls = backend_class(backend)
    realised = SimpleNamespace(ranks_share_this_hosts_files=cls.ranks_share_this_hosts_files,
                               describe=lambda: {"name": "t", "backend": backend})
    run = SimpleNamespace(run_id="r", repetition=1, realised=realised, launch={}, rank_options={},
                          spec=SimpleNamespace(expected_placement=None, placement_labels=None))
    argv = KernelWorkload("allreduce").rank_argv(run)
    return json.loads(argv[argv.index("--context") + 1])


def test_the_launcher_hands_its_git_facts_only_where_the_ranks_read_its_files():
    for name in ("local", "netns", "qemu"):
        assert _context(name)["vnetbench_git"] == environment.source(), name
    for name in ("hosts", "slurm"):  # other hosts' files: rank 0 asks its own git
        assert "vnetbench_git" not in _context(name), name


def test_source_is_asked_afresh_and_its_shape_checked(monkeypatch, tmp_path):
    import subprocess

    def git(*args) -> str:
        return subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                              capture_output=True, text=True, check=True).stdout.strip()

    # a real checkout of its own stands for vnetbench's source; before its first commit it has no revision
    git("init", "-q")
    monkeypatch.setattr(environment, "SOURCE", tmp_path)
    (tmp_path / "x.py").write_text("a = 1\n")
    git("add", "x.py")
    assert environment.source() == {"git_revision": None, "git_dirty": None}
    git("commit", "-q", "-m", "one")
    first = git("rev-parse", "HEAD")
    # a launcher living through a sweep: an edit, then a commit, between runs each show in the next run's facts
    assert environment.source() == {"git_revision": first, "git_dirty": False}
    (tmp_path / "x.py").write_text("a = 2\n")
    assert environment.source() == {"git_revision": first, "git_dirty": True}
    git("commit", "-q", "-am", "two")
    second = git("rev-parse", "HEAD")
    assert second != first and environment.source() == {"git_revision": second, "git_dirty": False}
    assert environment.source_problem({"git_revision": "c", "git_dirty": None}) is None
    for bad in ({"git_revision": "c"}, {"git_revision": 3, "git_dirty": False}, ["c", False],
                {"git_revision": None, "git_dirty": "no", "x": 1}):
        assert environment.source_problem(bad), bad


def test_source_writes_nothing_into_the_checkout(monkeypatch, tmp_path):
    """A run asks git about vnetbench's checkout without writing there: no index refresh, no index.lock, and
    the same facts from a checkout whose .git is mounted read-only."""
    import os
    import shutil
    import subprocess
    import sys

    def git(*args) -> str:
        return subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                              capture_output=True, text=True, check=True).stdout.strip()

    git("init", "-q")
    (tmp_path / "x.py").write_text("a = 1\n")
    git("add", "x.py")
    git("commit", "-q", "-m", "one")
    head = git("rev-parse", "HEAD")
    index = tmp_path / ".git" / "index"
    # the file's stat no longer matches the index: a plain `git status` would rewrite the index to refresh it
    os.utime(tmp_path / "x.py", ns=(10**18, 10**18))
    before = (index.read_bytes(), index.stat().st_mtime_ns)
    monkeypatch.setattr(environment, "SOURCE", tmp_path)
    assert environment.source() == {"git_revision": head, "git_dirty": False}
    assert (index.read_bytes(), index.stat().st_mtime_ns) == before
    assert not (tmp_path / ".git" / "index.lock").exists()
    git("status", "--porcelain")  # the write this test would catch
    assert index.stat().st_mtime_ns != before[1], "plain git status did not refresh: the check above proves nothing"

    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return
    # root writes anywhere the mode forbids it: a read-only bind mount, in a mount namespace of its own
    os.utime(tmp_path / "x.py", ns=(2 * 10**18, 2 * 10**18))
    probe = (f"import json; from pathlib import Path; from vnetbench.core import environment; "
             f"environment.SOURCE = Path({str(tmp_path)!r}); print(json.dumps(environment.source()))")
    git_dir = str(tmp_path / ".git")
    done = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                           'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && exec "$2" -c "$3"', "sh",
                           git_dir, sys.executable, probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f'{{"git_revision": "{head}", "git_dirty": false}}'


def test_collect_uses_the_facts_it_is_handed(monkeypatch):
    run = environment.subprocess.run

    def no_git(argv, *args, **kwargs):
        assert argv[0] != "git", "rank 0 ran git although the launcher handed it the facts"
        return run(argv, *args, **kwargs)  # platform's own (uname -p) may run

    monkeypatch.setattr(environment.subprocess, "run", no_git)
    handed = {"git_revision": "d" * 40, "git_dirty": True}
    env = environment.collect(["h"], None, source_facts=handed)
    assert (env["git_revision"], env["git_dirty"]) == ("d" * 40, True)
