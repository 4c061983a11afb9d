"""Hostile input through the real CLI: refused with exit 2 and one line, nothing created; damaged stores read
anyway; catastrophic application patterns end within the application's timeout.

The corpus is tests/data/hostile/, and cases.yaml there says how each file goes in and what the
refusal must say. Every command is refused before anything starts, so no case needs MPI or root:
where validation let a file through as root, ``topology up`` would build it, and ``clean_host``
would fail the test naming what was left. The pattern cases run a real mpirun (one rank).
"""

import ipaddress
import json
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml


DATA = Path(__file__).resolve().parent.parent / "data"
CORPUS = DATA / "hostile"
MANIFEST = yaml.safe_load((CORPUS / "cases.yaml").read_text())
REFUSED = [pytest.param(case, id=f"{group}/{case['file']}")
           for group, cases in MANIFEST["refused"].items() for case in cases]
STORES = [pytest.param(case, id=f"{case['run'].split()[0]}-{Path(case['file']).name}",
                       marks=[pytest.mark.xfail(reason=case["xfail"], strict=True)] if "xfail" in case else [])
          for case in MANIFEST["stores"]]
PATTERNS = [pytest.param(case, id=Path(case["file"]).name) for case in MANIFEST["patterns"]]
STARTUP_S = 5  # the CLI before the run's clock starts (imports, topology, the world-size guard's build)
HAS_MPIRUN = (Path(sys.executable).parent / "mpirun").exists() or shutil.which("mpirun") is not None
# never usable as an emulated subnet whatever the routes say, so not "the host's own routes"
RESERVED = [ipaddress.IPv4Network(net) for net in
            ("0.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16", "224.0.0.0/4", "240.0.0.0/4")]


def vnetbench(command: str, file: Path, workdir: Path) -> subprocess.CompletedProcess:
    """``vnetbench COMMAND`` run from the empty folder ``workdir``: FILE is ``file``, STORE a store
    in ``workdir``'s sibling that must never appear, DATA/... a file of tests/data."""
    def arg(token):
        if token == "FILE":
            return str(file)
        if token == "STORE":
            return str(workdir.parent / "store" / "results.jsonl")
        return str(DATA / token[len("DATA/"):]) if token.startswith("DATA/") else token

    return subprocess.run([sys.executable, "-m", "vnetbench", *map(arg, shlex.split(command))], cwd=workdir,
                          capture_output=True, encoding="utf-8", errors="backslashreplace", timeout=60)


@pytest.fixture
def workdir(tmp_path) -> Path:
    path = tmp_path / "cwd"
    path.mkdir()
    return path


def assert_refused(proc: subprocess.CompletedProcess, expect: str, workdir: Path) -> None:
    shown = f"exit {proc.returncode}\nstdout: {proc.stdout[-2000:]!r}\nstderr: {proc.stderr[-2000:]!r}"
    assert "Traceback" not in proc.stdout + proc.stderr, shown
    assert proc.returncode == 2, shown
    assert proc.stdout == "", shown
    assert proc.stderr.endswith("\n") and proc.stderr.count("\n") == 1, f"not one line: {shown}"
    line = proc.stderr[:-1]
    assert line.startswith("vnetbench: error: "), shown
    # escapes, NULs and other control characters of the input must not reach the terminal raw
    assert line.isprintable(), shown
    assert expect in line, f"{expect!r} not in the message: {shown}"
    left = sorted(p.name for p in workdir.iterdir()) + sorted(p.name for p in workdir.parent.iterdir()
                                                              if p.name != workdir.name)
    assert not left, f"created {left}"


def test_every_file_of_the_corpus_is_a_case_and_every_case_a_file():
    named = {case["file"] for cases in MANIFEST["refused"].values() for case in cases}
    named |= {case["file"] for case in MANIFEST["stores"]}
    named |= {case["file"] for case in MANIFEST["patterns"]}
    present = {str(p.relative_to(CORPUS)) for p in CORPUS.rglob("*") if p.is_file() and p.name != "cases.yaml"}
    assert present - named == set(), "files in the corpus that no case runs"
    assert {name for name in named if not (CORPUS / name).is_file()} == set(), "cases without their file"
    for group, cases in MANIFEST["refused"].items():
        for case in cases:
            assert set(case) == {"file", "run", "expect"}, case
            assert "FILE" in shlex.split(case["run"]), case


@pytest.mark.parametrize("case", REFUSED)
def test_hostile_file_is_refused_creating_nothing(case, workdir, clean_host):
    if case["run"].startswith("exec ") and not HAS_MPIRUN:
        pytest.skip("exec looks for mpirun before it reads the topology; there is none here")
    proc = vnetbench(case["run"], CORPUS / case["file"], workdir)
    assert_refused(proc, case["expect"], workdir)


def _a_network_of_this_host() -> ipaddress.IPv4Network | None:
    """A /24 overlapping one of this host's own addresses or routes (not vnetbench's, not a reserved range)."""
    if not shutil.which("ip"):
        return None

    def ip(*args):
        return json.loads(subprocess.run(["ip", "-j", "-4", *args], capture_output=True, text=True,
                                         check=True).stdout or "[]")

    found = []
    for link in ip("addr", "show"):
        if not link.get("ifname", "").startswith("vnb"):  # other tests' topologies come and go
            found += [ipaddress.IPv4Interface(f"{a['local']}/{a['prefixlen']}").network
                      for a in link.get("addr_info", [])]
    for route in ip("route", "show", "table", "all"):
        dst = route.get("dst", "default")
        if dst != "default" and not route.get("dev", "").startswith("vnb"):
            found.append(ipaddress.IPv4Network(dst if "/" in dst else f"{dst}/32", strict=False))
    for net in found:
        if not any(net.overlaps(reserved) for reserved in RESERVED) and 8 <= net.prefixlen:
            return net.supernet(new_prefix=24) if net.prefixlen > 24 else next(net.subnets(new_prefix=24))
    return None


def test_a_subnet_overlapping_the_hosts_own_routes_is_refused(tmp_path, workdir, clean_host):
    # which subnet that is depends on the machine, so this case is made here and not kept as a file
    subnet = _a_network_of_this_host()
    if subnet is None:
        pytest.skip("this host has no IPv4 address or route outside the reserved ranges (or no ip command)")
    spec = tmp_path / "subnet-of-this-host.yaml"
    spec.write_text(f"name: hostile\nvms:\n  - name: a\n    vcpus: 1\n    memory: 128MB\n    switch: s0\n"
                    f"switches:\n  - name: s0\nsubnet: {subnet}\n")
    proc = vnetbench("topology up FILE", spec, workdir)
    spec.unlink()
    assert_refused(proc, f"subnet-of-this-host.yaml:9: subnet: {subnet} overlaps the ", workdir)
    assert "; choose another subnet" in proc.stderr


@pytest.mark.parametrize("case", STORES)
def test_a_damaged_store_is_read_naming_each_bad_line(case, workdir, clean_host):
    store = (CORPUS / case["file"]).resolve()
    proc = vnetbench(case["run"], store, workdir)
    shown = f"exit {proc.returncode}\nstderr: {proc.stderr[-3000:]}"
    assert "Traceback" not in proc.stdout + proc.stderr, shown
    assert proc.returncode == case["exit"], shown
    assert proc.stdout.strip(), "nothing reported"
    named = {}
    for line in proc.stderr.splitlines():
        prefix = f"vnetbench: warning: {store}:"
        if line.startswith(prefix):
            number, _, reason = line[len(prefix):].partition(": skipped: ")
            named[int(number)] = reason
    assert sorted(named) == sorted(case["lines"]), shown
    for number, why in case["lines"].items():
        assert why in named[number], f"line {number}: {why!r} not in {named[number]!r}"
    assert not list(workdir.iterdir())


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", PATTERNS)
def test_a_catastrophic_pattern_ends_within_the_apps_timeout(case, tmp_path, workdir, clean_host):
    if not HAS_MPIRUN:
        pytest.skip("an application run needs mpirun; there is none here")
    app = CORPUS / case["file"]
    timeout = yaml.safe_load(app.read_text())["timeout"]
    started = time.monotonic()
    proc = vnetbench("run --app FILE --ranks 1 --store STORE", app, workdir)
    took = time.monotonic() - started
    shown = f"exit {proc.returncode} after {took:.1f} s\nstderr: {proc.stderr[-3000:]}"
    assert "Traceback" not in proc.stdout + proc.stderr, shown
    assert took < timeout + STARTUP_S, f"not within the app's timeout of {timeout} s: {shown}"
    assert proc.returncode == case["exit"], shown
    (record,) = [json.loads(line) for line in (tmp_path / "store" / "results.jsonl").read_text().splitlines()]
    assert record["status"] == case["status"], shown
    detail = record["validation"]["detail"]
    assert "\n" not in detail
    if "detail" in case:
        assert case["detail"] in detail, shown
        assert f"{case['status']}: " in proc.stderr and case["detail"][:40] in proc.stderr, "not said on stderr"
    for name, value in case.get("metrics", {}).items():
        assert record["metrics"][name] == value, record["metrics"]
    assert not list(workdir.iterdir())
