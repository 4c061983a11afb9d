"""OSU layout: crafted rows printed exactly as OSU 7.1's printf formats would ("%-10s%20s", "%-10d%20.2f")."""

import sys
from pathlib import Path

from vnetbench.analysis import osu, report

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "data" / "stores"))
import craft  # noqa: E402

# osu_latency and osu_bw of OSU 7.1 for these numbers, written out by hand from their printf formats
EXPECTED_PINGPONG = """\
# OSU MPI Latency Test v7.1
# Datatype: MPI_CHAR.
# Size            Latency (us)
1                         0.21
1024                      1.50
1048576                 212.35

# OSU MPI Bandwidth Test v7.1
# Datatype: MPI_CHAR.
# Size        Bandwidth (MB/s)
1                         4.20
1024                   1000.00
1048576               12345.68"""

EXPECTED_ALLREDUCE = """
# OSU MPI Allreduce Latency Test v7.1
# Datatype: MPI_DOUBLE.
# Size         Avg Latency(us)     Min Latency(us)     Max Latency(us)  Iterations
8                         1.25                1.00                1.50        1000
8192                     30.00               29.99               30.01         100"""


def test_pingpong_prints_osu_latency_then_osu_bw():
    record = craft.pingpong("native", 2, 0, [0.2149, 1.5, 212.3456], [4.2, 1000.0, 12345.678])
    assert osu.text([record]) == EXPECTED_PINGPONG


def test_allreduce_prints_osu_allreduce_full_layout():
    rows = [{"bytes": 8, "avg_us": 1.25, "min_us": 1.0, "max_us": 1.5, "iterations": 1000},
            {"bytes": 8192, "avg_us": 30.0, "min_us": 29.99, "max_us": 30.01, "iterations": 100}]
    record = craft.record("allreduce", "native", 2, 0, {"sizes": rows})
    assert osu.text([record]) == EXPECTED_ALLREDUCE
    # the default run output: a row per record, then the per-size table with min/avg/max
    text = report.run_text([record])
    assert "avg us @8B" in text and "size (B)" in text and "29.99" in text


def test_kernels_without_an_osu_counterpart_are_refused_up_front():
    import pytest

    from vnetbench.errors import UsageError

    with pytest.raises(UsageError, match=r"--format: osu is for kernels with an OSU counterpart \(.*pingpong.*\), not halo"):
        osu.check("halo")
    assert osu.text(craft.halo("native", 2, [1.0])) is None
