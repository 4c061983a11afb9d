"""benchmarks/slurm_yield.py's report: a run that did not end ok, in either way, fails the check and is named."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from slurm_yield import report  # noqa: E402


def run(way: str, seconds: float, exit_code: int = 0, status: str = "ok", error: str = "") -> dict:
    return {"way": way, "exit": exit_code, "status": status, "seconds": seconds, "error": error}


def test_every_run_ok_passes_with_each_ways_median(capsys):
    rows = [run("yielding", s) for s in (1.0, 1.2, 1.1)] + [run("busy-polling", s) for s in (1.5, 1.4)]
    assert report(rows) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split()[:4] == ["yielding", "3", "3", "1.10"]
    assert lines[2].split()[:4] == ["busy-polling", "2", "2", "1.45"]
    assert "not ok" not in "\n".join(lines)


def test_a_crashed_rank_fails_the_check_naming_why(capsys):
    rows = [run("yielding", 1.0), run("yielding", 0.6, exit_code=1, status="failed",
                                     error="vnetbench: rank 2 ended by signal 11 (Segmentation fault)")]
    assert report(rows) == 1
    out = capsys.readouterr().out
    assert "not ok: exit 1, status failed: vnetbench: rank 2 ended by signal 11" in out


def test_a_run_that_exited_0_without_an_ok_record_is_not_ok(capsys):
    assert report([run("busy-polling", 1.3, status="no record")]) == 1
    out = capsys.readouterr().out
    assert "busy-polling" in out and "   1    0" in out and "not ok: exit 0, status no record" in out
