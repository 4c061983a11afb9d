"""OSU layout: the numbers of real OSU 7.4 runs (tests/data/apps/osu_*.txt, see PROVENANCE.md) printed through
vnetbench's OSU layout give back OSU's own text, line for line, so `vnetbench run --format osu` diffs cleanly
against osu_latency, osu_bw and osu_allreduce -f."""

import sys
from pathlib import Path

from vnetbench.analysis import formats
from vnetbench.analysis.formats import osu

DATA = Path(__file__).resolve().parent.parent / "data"
sys.path.insert(0, str(DATA / "stores"))
import craft  # noqa: E402


def captured(name: str) -> tuple[str, list[list[str]]]:
    """The captured program output and its rows' fields (size first)."""
    text = (DATA / "apps" / name).read_text()
    rows = [line.split() for line in text.splitlines() if line[:1].isdigit()]
    assert rows, name
    return text, rows


def test_pingpong_prints_what_osu_latency_then_osu_bw_print():
    latency, lat_rows = captured("osu_latency.txt")
    bandwidth, bw_rows = captured("osu_bw.txt")
    assert [r[0] for r in lat_rows] == [r[0] for r in bw_rows]
    record = craft.pingpong("native", 2, 0, [float(r[1]) for r in lat_rows], [float(r[1]) for r in bw_rows],
                            sizes=[int(r[0]) for r in lat_rows])
    assert osu.text([record]).splitlines() == (latency + bandwidth).splitlines()


def test_allreduce_prints_what_osu_allreduce_f_prints_but_its_datatype():
    full, rows = captured("osu_allreduce_f.txt")
    sizes = [{"bytes": int(size), "avg_us": float(avg), "min_us": float(low), "max_us": float(high),
              "iterations": int(iterations)} for size, avg, low, high, iterations in rows]
    record = craft.record("allreduce", "native", 2, 0, {"sizes": sizes})
    mine, theirs = osu.text([record]).splitlines(), full.splitlines()
    # the kernel sums float64, so it says so; osu_allreduce's default datatype is MPI_CHAR
    assert theirs[2] == "# Datatype: MPI_CHAR." and mine[2] == "# Datatype: MPI_DOUBLE."
    assert mine[:2] + mine[3:] == theirs[:2] + theirs[3:]
    # the default run output: a row per record, then the per-size table with min/avg/max
    text = formats.run_text("table", [record])
    assert formats.run_text("osu", [record]) == osu.text([record])
    assert f"avg us @{rows[0][0]}B" in text
    assert "size (B)" in text and rows[0][3] in text


def test_kernels_without_an_osu_counterpart_are_refused_up_front():
    import pytest

    from vnetbench.core.errors import UsageError

    with pytest.raises(UsageError, match=r"--format: osu is for kernels with an OSU counterpart \(.*pingpong.*\), not halo"):
        formats.check_run("osu", "halo")
    formats.check_run("table", "halo")  # a table shows every kernel
    assert osu.text(craft.halo("native", 2, [1.0])) is None
