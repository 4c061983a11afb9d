"""The built-in parsers on output captured from the real programs (tests/data/apps/PROVENANCE.md)."""

from pathlib import Path

import pytest

from vnetbench.apps import parsers
from vnetbench.apps.parsers import ParseError, imb, lammps, osu

DATA = Path(__file__).parent.parent / "data" / "apps"


def text(name: str) -> str:
    return (DATA / name).read_text()


def names(module, m) -> list[str]:
    return [metric.name for metric, _ in module.metrics(m)]


def test_every_parser_is_registered_by_name():
    assert {name: parsers.PARSERS.load(name) for name in parsers.PARSERS} == {"osu": osu, "imb": imb, "lammps": lammps}


def test_osu_latency_rows_take_the_pingpong_kernels_shape():
    m = osu.parse(text("osu_latency.txt"))
    assert m["benchmark"] == "OSU MPI Latency Test" and m["osu_version"] == "7.4"
    assert [row["bytes"] for row in m["sizes"]] == [2 ** i for i in range(17)]
    assert m["sizes"][0] == {"bytes": 1, "latency_us": 0.40} and m["sizes"][-1] == {"bytes": 65536, "latency_us": 7.04}
    from vnetbench.kernels import pingpong

    # the very metric objects the pingpong kernel declares, so tables, plots and compare line up
    mine = dict(osu.metrics(m))
    assert pingpong._latency_at(8) in mine and mine[pingpong._latency_at(8)] == 1.01
    assert osu.table(names(osu, m)) == ["latency_us@1B", "latency_us@65536B"]


@pytest.mark.parametrize("name, series, last", [
    ("osu_bw.txt", "bandwidth_mbps", 10141.22),
    ("osu_bibw.txt", "bibandwidth_mbps", 17797.91),
    ("osu_allreduce.txt", "avg_us", 44.87),
])
def test_osu_one_series_tables(name, series, last):
    m = osu.parse(text(name))
    assert len(m["sizes"]) == 17 and m["sizes"][-1] == {"bytes": 65536, series: last}
    assert set(n.split("@")[0] for n in names(osu, m)) == {series}


def test_osu_multi_pair_bandwidth_and_message_rate():
    m = osu.parse(text("osu_mbw_mr.txt"))
    assert m["sizes"][0] == {"bytes": 1, "bandwidth_mbps": 7.92, "messages_per_s": 7922723.73}
    assert {"bandwidth_mbps@1B", "messages_per_s@1B"} <= set(names(osu, m))


def test_osu_full_statistics_take_the_allreduce_kernels_fields():
    m = osu.parse(text("osu_allreduce_f.txt"))
    assert m["sizes"][-1] == {"bytes": 65536, "avg_us": 46.95, "min_us": 46.85, "max_us": 47.06, "iterations": 100}
    from vnetbench.kernels import allreduce

    assert dict(osu.metrics(m))[allreduce._avg_at(65536)] == 46.95
    assert osu.table(names(osu, m)) == ["avg_us@1B", "avg_us@65536B"]


@pytest.mark.parametrize("name, reason", [
    ("osu_latency_truncated.txt", "table row 7 is damaged: '32'"),
    ("osu_latency_garbled.txt", "'0.4#5' is not a number"),
    ("osu_bw_f_refused.txt", "no OSU benchmark title"),
    ("lammps_lj_np2.txt", "no OSU benchmark title"),
])
def test_osu_damaged_or_foreign_output_is_refused_with_the_reason(name, reason):
    with pytest.raises(ParseError, match=reason.replace("(", r"\(")):
        osu.parse(text(name))


def test_imb_pingpong_exchange_allreduce():
    m = imb.parse(text("imb_mpi1_np2.txt"))
    assert set(m["benchmarks"]) == {"PingPong", "Exchange", "Allreduce"}
    ping = m["benchmarks"]["PingPong"]
    assert ping["processes"] == 2 and len(ping["rows"]) == 18
    assert ping["rows"][-1] == {"bytes": 65536, "repetitions": 640, "t_us": 67.97, "mbps": 964.18}
    values = {metric.name: value for metric, value in imb.metrics(m)}
    # PingPong as the pingpong kernel's series, Allreduce as the allreduce kernel's
    assert values["latency_us@65536B"] == 67.97 and values["bandwidth_mbps@65536B"] == 964.18
    assert values["avg_us@65536B"] == m["benchmarks"]["Allreduce"]["rows"][-1]["avg_us"]
    assert values["imb_exchange_us@65536B"] == m["benchmarks"]["Exchange"]["rows"][-1]["avg_us"]
    assert imb.table(list(values)) == ["latency_us@0B", "bandwidth_mbps@65536B"]


@pytest.mark.parametrize("name, reason", [
    ("imb_truncated.txt", "IMB Allreduce: table row 1 is damaged"),
    ("osu_latency.txt", "no 'Intel.R. MPI Benchmarks' banner"),
])
def test_imb_damaged_or_foreign_output_is_refused(name, reason):
    with pytest.raises(ParseError, match=reason):
        imb.parse(text(name))


def test_imb_cut_after_a_whole_table_is_still_truncated():
    whole = text("imb_mpi1_np2.txt")
    with pytest.raises(ParseError, match="ends before 'All processes entering MPI_Finalize'"):
        imb.parse(whole[:whole.index("# Benchmarking Allreduce")])


def test_lammps_log():
    m = lammps.parse(text("lammps_lj_np2.txt"))
    assert (m["loop_time_s"], m["procs"], m["steps"], m["atoms"]) == (0.0881959, 2, 100, 4000)
    assert (m["tau_per_day"], m["timesteps_per_s"]) == (489818.704, 1133.840)
    assert m["breakdown_s"] == {"pair": 0.064602, "neigh": 0.01314, "comm": 0.0085789, "output": 6.6224e-05,
                                "modify": 0.0010356, "other": 0.0007725}
    assert m["breakdown_pct"]["comm"] == 9.73
    assert lammps.table(names(lammps, m)) == ["loop_time_s", "timesteps_per_s", "breakdown_s.comm"]


def test_lammps_reads_the_last_of_several_runs():
    one = text("lammps_lj_np2.txt")
    two = one.replace("Loop time of 0.0881959 on 2 procs for 100 steps", "Loop time of 9.5 on 2 procs for 7 steps")
    m = lammps.parse(one + two)
    assert (m["loop_time_s"], m["steps"]) == (9.5, 7)


@pytest.mark.parametrize("name, reason", [
    ("lammps_lj_truncated.txt", "no 'Loop time of"),
    ("lammps_lj_garbled.txt", r"'0.00\$5789' is not a number"),
    ("osu_latency.txt", "no 'Loop time of"),
])
def test_lammps_damaged_output_is_refused(name, reason):
    with pytest.raises(ParseError, match=reason):
        lammps.parse(text(name))


def test_the_analysis_reads_an_osu_record_as_it_reads_the_pingpong_kernels():
    from vnetbench.analysis import metrics as analysis

    m = {"elapsed_s": 1.25, **osu.parse(text("osu_latency.txt"))}
    record = {"kernel": "osu-latency", "metrics": m, "app": {"parser": "osu", "metrics": []}}
    assert analysis.values(record)["latency_us@8B"] == 1.01 and analysis.values(record)["elapsed_s"] == 1.25
    assert analysis.series(record, "latency_us")[:2] == [(1, 0.40), (2, 0.39)]
    assert analysis.size_rows_of(record)[0] == {"bytes": 1, "latency (us)": 0.40}
    # table and breakdown get only the name: the application is known from its records by then
    assert analysis.table_metrics("osu-latency", list(analysis.values(record))) == [
        "elapsed_s", "latency_us@1B", "latency_us@65536B"]
