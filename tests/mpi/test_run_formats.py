"""`vnetbench run --format osu` and the default per-size rows, from real pingpong and allreduce runs."""

import re

import pytest

from conftest import requires_mpi, vnetbench
from vnetbench import kernels

pytestmark = [requires_mpi, pytest.mark.timeout(120)]

ROW = re.compile(r"^(\d+) *( +\d+\.\d\d)+( +\d+)?$")


def test_pingpong_osu_layout_from_a_real_run(store):
    proc = vnetbench("run", "pingpong", "--format", "osu", "--store", store, *kernels.get("pingpong").SMOKE, check=0)
    # as osu_latency then osu_bw print (7.4): each block opens with an empty line
    assert proc.stdout.startswith("\n# OSU MPI Latency Test v7.4\n")
    latency, bandwidth = proc.stdout.strip("\n").split("\n\n")
    for block, column in ((latency, "Avg Latency(us)"), (bandwidth, "Bandwidth (MB/s)")):
        title, datatype, header, *rows = block.splitlines()
        assert re.fullmatch(r"# OSU MPI (Latency|Bandwidth) Test v7\.4", title)
        assert datatype == "# Datatype: MPI_CHAR." and header == f"{'# Size':<10}{column:>18}"
        assert [int(row[:10]) for row in rows] == [2 ** i for i in range(13)]  # 1 B .. 4 KiB
        assert all(len(row) == 28 and ROW.match(row) and float(row[10:]) > 0 for row in rows), rows


def test_allreduce_default_output_has_per_size_rows(store):
    proc = vnetbench("run", "allreduce", "--store", store, *kernels.get("allreduce").SMOKE, check=0)
    for column in ("size (B)", "avg us", "min us", "max us", "iterations"):
        assert column in proc.stdout
    assert "4096" in proc.stdout.split("size (B)")[1]


def test_osu_format_for_a_kernel_without_counterpart_starts_nothing(store):
    proc = vnetbench("run", "halo", "--format", "osu", "--store", store, check=2)
    assert proc.stderr.strip().startswith("vnetbench: error: --format: osu is for kernels") and not store.exists()
