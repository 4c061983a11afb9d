"""`vnetbench run` with the real mpirun and real ranks: records, oversubscription, timeouts, crashes, direct launch."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import json_lines, mpi_env, mpirun_path, requires_mpi, vnetbench

pytestmark = [requires_mpi, pytest.mark.timeout(180)]

TINY_PINGPONG = ["--max-size", "1024", "--iterations", "50", "--large-iterations", "10", "--bw-iterations", "5",
                 "--validate"]
TINY_ALLREDUCE = ["--max-size", "4096", "--iterations", "20", "--large-iterations", "5"]


def pids_with(marker: str) -> list[int]:
    out = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout
    return [int(pid) for pid in out.split() if int(pid) != os.getpid()]


@pytest.mark.parametrize("ranks", [2, 4])
def test_pingpong_records_real_latency_and_bandwidth(store, ranks):
    proc = vnetbench("run", "pingpong", "--ranks", ranks, "--json", "--store", store, *TINY_PINGPONG, check=0)
    (record,) = json_lines(proc.stdout)
    assert record["status"] == "ok" and record["validation"]["passed"]
    assert "payloads checked" in record["validation"]["detail"]
    sizes = record["metrics"]["sizes"]
    assert [s["bytes"] for s in sizes] == [2 ** i for i in range(11)]
    for row in sizes:
        assert 0 < row["latency_min_us"] <= row["latency_p50_us"] <= row["latency_p99_us"] <= row["latency_max_us"]
        assert row["bandwidth_mbps"] > 0
    assert record["metrics"]["pair"] == [0, ranks - 1]
    assert [p["rank"] for p in record["placement"]] == list(range(ranks))
    assert all(p["cpus"] for p in record["placement"])
    # the store holds exactly what was printed
    assert [json.loads(line)["run_id"] for line in store.read_text().splitlines()] == [record["run_id"]]


def test_oversubscription_is_recorded_with_yield(store):
    cores = len(os.sched_getaffinity(0))
    ranks = cores * 2
    proc = vnetbench("run", "allreduce", "--ranks", ranks, "--json", "--store", store, *TINY_ALLREDUCE, check=0)
    (record,) = json_lines(proc.stdout)
    assert record["launch"]["notes"]["oversubscribed"] is True
    assert record["launch"]["mca"] == {"btl": "^ofi,tcp", "mpi_yield_when_idle": "1"}  # see intent.one_host_transport
    assert "--map-by :OVERSUBSCRIBE" in record["launch"]["command"]
    assert all(row["min_us"] <= row["avg_us"] <= row["max_us"] for row in record["metrics"]["sizes"])


def test_other_work_beside_a_run_is_recorded_and_marks_its_cell(store):
    # two busy loops of another program's (not vnetbench's children) beside a 2-rank run on a machine of any size
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        proc = vnetbench("run", "md", "--cells", "8", "--steps", "300", "--ranks", 2, "--json", "--store", store,
                         check=0)
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    (record,) = json_lines(proc.stdout)
    load = record["launch"]["host_load"]
    cpus = load["cpus"]
    assert load["foreign_share"] > 0.5 / cpus and load["foreign_cpu_s"] > 0.5 * load["wall_s"], load
    assert load["own_cpu_s"] > 0.2 * load["wall_s"], load  # the ranks are counted as the run's own
    shown = vnetbench("report", "--store", store, check=0).stdout
    assert "under load: native x2: other work used" in shown and " *" in shown


def test_bound_ranks_run_on_distinct_cores(store):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 cpus")
    proc = vnetbench("run", "allreduce", "--ranks", 2, "--json", "--store", store, *TINY_ALLREDUCE, check=0)
    (record,) = json_lines(proc.stdout)
    cpus = [tuple(p["cpus"]) for p in record["placement"]]
    assert all(len(c) == 1 for c in cpus) and len(set(cpus)) == 2
    assert record["launch"]["notes"]["bind"] == "core"


def test_single_rank_allreduce_and_repeats(store):
    proc = vnetbench("run", "allreduce", "--ranks", 1, "--repeat", 3, "--json", "--store", store, *TINY_ALLREDUCE,
                     check=0)
    records = json_lines(proc.stdout)
    assert [r["repetition"] for r in records] == [0, 1, 2]
    assert len({r["run_id"] for r in records}) == 3
    env = records[0]["environment"]
    assert env["versions"]["open_mpi"].startswith("5.")
    for key in ("mpi4py", "numpy", "python", "vnetbench"):
        assert env["versions"][key]
    assert env["cores"] >= 1 and env["cpu_model"] and env["hostnames"]


def test_a_run_and_its_table_import_neither_dataclasses_nor_typing(store):
    """The launcher's start and end are what a run costs beyond its job; the classes it makes are plain classes
    and named tuples (vnetbench.cli says why). -X importtime lists what this process imported (not the ranks')."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "vnetbench", "run", "allreduce", "--ranks", "1",
                           "--store", str(store), *TINY_ALLREDUCE], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "avg us @4096B" in proc.stdout  # the run's table was laid out and printed
    imported = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "vnetbench.engine" in imported and "vnetbench.analysis.render" in imported
    assert not imported & {"dataclasses", "typing", "inspect"}, sorted(imported & {"dataclasses", "typing", "inspect"})


def test_timeout_kills_the_whole_job_and_is_recorded(store):
    marker = "9999973"  # an iteration count no other run uses, to find this job's processes
    start = time.monotonic()
    proc = vnetbench("run", "pingpong", "--ranks", 2, "--iterations", marker, "--max-size", "8", "--timeout", "4",
                     "--json", "--store", store)
    assert proc.returncode == 1
    assert time.monotonic() - start < 30
    (record,) = json_lines(proc.stdout)
    assert record["status"] == "timeout"
    assert "killed" in record["validation"]["detail"]
    assert pids_with(marker) == []
    assert json.loads(store.read_text())["status"] == "timeout"


def test_a_rank_killed_mid_run_fails_the_run_quickly(store):
    marker = "9999971"
    job = subprocess.Popen([sys.executable, "-m", "vnetbench", "run", "pingpong", "--ranks", "2", "--iterations", marker,
                            "--max-size", "8", "--timeout", "120", "--json", "--store", str(store)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        ranks = []
        while time.monotonic() < deadline and len(ranks) < 2:
            ranks = [pid for pid in pids_with(marker) if b"vnetbench.kernels" in open(f"/proc/{pid}/cmdline", "rb").read()
                     and b"prterun" not in open(f"/proc/{pid}/cmdline", "rb").read()]
            time.sleep(0.2)
        assert len(ranks) >= 2, "ranks did not start"
        time.sleep(0.5)
        killed_at = time.monotonic()
        os.kill(max(ranks), signal.SIGKILL)
        out, err = job.communicate(timeout=60)
        assert time.monotonic() - killed_at < 20
    finally:
        if job.poll() is None:
            job.kill()
    assert job.returncode == 1
    (record,) = json_lines(out)
    assert record["status"] == "failed"
    assert pids_with(marker) == []


def test_direct_launch_record_then_ingest_and_report(tmp_path, store):
    record_file = tmp_path / "direct.json"
    subprocess.run([mpirun_path(), "-n", "2", sys.executable, "-m", "vnetbench.kernels", "allreduce", *TINY_ALLREDUCE,
                    "--record", str(record_file)], env=mpi_env(), check=True, timeout=120, capture_output=True)
    record = json.loads(record_file.read_text())
    assert record["status"] == "ok" and record["ranks"] == 2 and len(record["placement"]) == 2
    assert record["topology"]["name"] == "direct"
    vnetbench("ingest", record_file, "--store", store, check=0)
    again = vnetbench("ingest", record_file, "--store", store, check=0)
    assert "already in" in again.stderr
    assert len(store.read_text().splitlines()) == 1
    shown = vnetbench("report", "--store", store, "--runs", "--format", "csv", check=0)
    assert "allreduce,direct,2,1,ok" in shown.stdout


def test_direct_launch_with_bad_option_exits_2_on_every_rank(tmp_path):
    proc = subprocess.run([mpirun_path(), "-n", "2", sys.executable, "-m", "vnetbench.kernels", "pingpong",
                           "--max-size", "3"], env=mpi_env(), timeout=60, capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.count("--max-size: 3 is not allowed") == 1  # rank 0 speaks for all
