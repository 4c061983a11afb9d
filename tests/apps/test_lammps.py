"""A real LAMMPS run through run --app, sweep --app (native and a VM topology) and exec --record;
report and compare on its records, without the YAML."""

import json
import shutil

import pytest

from apps.conftest import leftovers, requires_lammps
from conftest import json_lines, requires_mpi, vnetbench
from emulation.conftest import host_unchanged, requires_netns  # noqa: F401 (a fixture)

pytestmark = [requires_mpi, requires_lammps, pytest.mark.timeout(120)]


def records_of(store) -> list[dict]:
    return [json.loads(line) for line in store.read_text().splitlines()]


def test_run_app_records_lammps_metrics_placement_and_provenance(lj_app, store):
    done = vnetbench("run", "--app", lj_app, "--ranks", 2, "--store", store, "--json", check=0)
    (record,) = json_lines(done.stdout)
    assert records_of(store) == [record]
    assert record["status"] == "ok" and record["kernel"] == "lammps-lj" and record["exit_status"] == 0
    m = record["metrics"]
    assert (m["atoms"], m["steps"], m["procs"]) == (2048, 100, 2)  # what LAMMPS itself said it ran
    assert 0 < m["loop_time_s"] < m["elapsed_s"]
    assert 30 < m["neighbours_per_atom"] < 45  # LJ at density 0.8442, cutoff 2.5 + skin 0.3: about 37.6
    assert set(m["breakdown_s"]) == {"pair", "neigh", "comm", "output", "modify", "other"}
    assert [p["rank"] for p in record["placement"]] == [0, 1] and all(p["netns"] for p in record["placement"])
    assert len({p["pid"] for p in record["placement"]}) == 2
    app = record["app"]
    assert app["program"] == shutil.which("lmp") and len(app["program_hash"]) == 16
    assert app["parser"] == "lammps" and app["metrics"][0]["name"] == "neighbours_per_atom"
    assert record["params"] == {"definition": app["definition_hash"]}
    assert "Total wall time" in record["output_tail"][-1]
    assert "OMP_NUM_THREADS=1" in record["launch"]["command"]
    # the world-size guard saw both ranks join one world, and names the MPI library lmp loaded
    assert record["world_guard"]["worlds"] == [2] and record["world_guard"]["ranks_seen"] == [0, 1]
    assert record["environment"]["mpi_library"].startswith("Open MPI v")
    assert record["environment"]["versions"]["mpi"].startswith("Open MPI ")
    assert not leftovers(lj_app.parent)


@requires_netns
def test_sweep_native_and_a_vm_topology_then_report_and_compare_without_the_yaml(lj_app, store, host_unchanged):
    host_unchanged("2vm-2vswitch")
    done = vnetbench("sweep", "--app", lj_app, "--topologies", "native,2vm-2vswitch", "--ranks", 2, "--repeat", 2,
                     "--store", store, check=0)
    assert "lammps-lj: elapsed (s)" in done.stdout
    records = records_of(store)
    # configurations alternate: every topology's first repetition, then every second
    assert [(r["topology"]["name"], r["repetition"], r["status"]) for r in records] == [
        ("native", 0, "ok"), ("2vm-2vswitch", 0, "ok"), ("native", 1, "ok"), ("2vm-2vswitch", 1, "ok")]
    vm = records[-1]
    # each rank saw itself inside its own emulated VM: own hostname, own namespace, an address of the topology
    assert [p["vm"] for p in vm["placement"]] == ["vm1", "vm2"]
    assert len({p["netns"] for p in vm["placement"]}) == 2
    assert [p["hostname"] for p in vm["placement"]] == ["2vm-2vswitch-vm1", "2vm-2vswitch-vm2"]
    shutil.rmtree(lj_app.parent)  # report and compare learn the application from the records alone

    report = json.loads(vnetbench("report", "--store", store, "--format", "json", check=0).stdout)
    tables = {t["metric"]["name"]: t for t in report["tables"] if t["kernel"] == "lammps-lj"}
    assert list(tables)[:2] == ["elapsed_s", "loop_time_s"]
    elapsed = tables["elapsed_s"]
    assert elapsed["metric"]["unit"] == "s" and elapsed["metric"]["better"] == "lower"
    rows = {row["topology"]: row["cells"][0] for row in elapsed["rows"]}
    assert rows["native"]["n"] == 2 and rows["2vm-2vswitch"]["n"] == 2
    assert rows["2vm-2vswitch"]["overhead_pct"] is not None

    compared = vnetbench("compare", store, store, "--format", "json", "--all")
    assert compared.returncode == 0, compared.stderr
    changes = json.loads(compared.stdout)["changes"]
    loop = [c for c in changes if c["kernel"] == "lammps-lj" and c["metric"] == "loop_time_s"]
    assert {c["topology"] for c in loop} == {"native", "2vm-2vswitch"}
    assert all(c["test"] == "welch_t" and not c["significant"] and c["better"] == "lower" for c in loop)


def test_exec_record_stores_the_run_with_the_parser(lj_app, store):
    folder = lj_app.parent
    # profiled too: lmp (Debian's, linked against Debian's Open MPI) with the interposer preloaded, not rebuilt
    done = vnetbench("exec", "--topology", "native", "--ranks", 2, "--record", "--store", store, "--parser",
                     "lammps", "--profile", "--", "lmp", "-in", folder / "in.lj", "-var", "c", "6", "-log", "none",
                     check=0)
    assert "Loop time of" in done.stdout  # the program's output passes through
    (record,) = records_of(store)
    assert record["status"] == "ok" and record["kernel"] == "lmp" and record["metrics"]["atoms"] == 864
    assert record["app"]["parser"] == "lammps" and len(record["placement"]) == 2
    assert_lammps_profile(record)
    plot, html = store.parent / "lmp.png", store.parent / "lmp.html"
    report = vnetbench("report", "--store", store, "--plot", plot, "--html", html, check=0).stdout
    assert "lmp: elapsed (s)" in report and "lmp: loop time (s)" in report
    # the profiled run in report's profile table (its top calls are by seconds: which three, timing decides)
    assert "MPI profiles" in report and f"{record['run_id']}/1" in report
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = html.read_text()
    assert "lmp: elapsed" in page and "lmp: time in comm" in page and "data:image/png;base64," in page


def assert_lammps_profile(record: dict) -> None:
    """LAMMPS's messages as the profiler saw them: what each rank sent to the other, by size bucket, is what the
    other received; its thermo output's reductions are Allreduces over the 2 ranks; the world-size guard, loaded
    first, still saw one world of 2."""
    profile = record["profile"]
    assert profile["status"] == "ok" and profile["ranks_profiled"] == 2 and profile["mode"] == "summary"
    assert profile["library"].startswith("Open MPI v") and profile["abi"] == "openmpi"
    assert record["world_guard"]["worlds"] == [2] and record["world_guard"]["ranks_seen"] == [0, 1]
    zero, one = profile["ranks"]
    assert zero["peers"]["1"]["sent"] == one["peers"]["0"]["received"] != {}
    assert one["peers"]["0"]["sent"] == zero["peers"]["1"]["received"] != {}
    for rank in (zero, one):
        sent = sum(b for bucket in rank["peers"][str(1 - rank["rank"])]["sent"].values() for _, b in [bucket])
        calls = rank["calls"]
        assert calls["MPI_Init"]["calls"] == 1 and calls["MPI_Finalize"]["calls"] == 1
        assert calls["MPI_Irecv"]["calls"] == calls["MPI_Wait"]["calls"] > 0  # its ghost exchange: Irecv, Send, Wait
        # every byte a rank sent went through a call that sends (Send, Sendrecv: both ways, so at least)
        assert calls["MPI_Send"]["bytes"] <= sent <= calls["MPI_Send"]["bytes"] + calls["MPI_Sendrecv"]["bytes"]
    sizes = {c["call"]: c["comm_size"] for c in profile["collectives"]}
    assert sizes["MPI_Allreduce"] == 2 and profile["calls"]["MPI_Allreduce"]["calls"] >= 2
