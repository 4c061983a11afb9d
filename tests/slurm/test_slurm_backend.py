"""The slurm backend on a real Slurm cluster: jobs submitted, placed by Slurm's switch tree, their states mapped."""

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import BIN, json_lines, vnetbench

pytestmark = pytest.mark.timeout(180)

SMOKE = ["--max-size", "4096", "--iterations", "100", "--large-iterations", "10", "--bw-iterations", "5",
         "--window", "4", "--validate"]
# a pingpong that runs far longer than any test waits (killed by Slurm, a node failure or Ctrl-C)
ENDLESS = ["--max-size", "1", "--iterations", "10000000", "--warmup", "1", "--timeout", "600"]


def switches_of(cluster, nodes):
    return {n.switch for n in cluster.nodes if n.name in nodes}


def jobs(cluster) -> dict[str, str]:
    out = cluster.slurm("squeue", "-h", "-o", "%i %T").stdout
    return dict(line.split() for line in out.splitlines() if line.strip())


def steps(cluster, job: str) -> list[str]:
    return cluster.slurm("squeue", "-h", "-s", "-j", job, "-o", "%i", check=False).stdout.split()


def chosen_mpi(tmp_path) -> Path:
    """A launcher path of the user's choosing (the venv's mpirun under another name): a job that runs it
    says so in its record's launch.mpi, one that picked its own MPI names the venv's mpirun instead."""
    path = tmp_path / "bin" / "my-mpirun"
    path.parent.mkdir()
    path.write_text(f"#!/bin/sh\nexec {shlex.quote(str(BIN / 'mpirun'))} \"$@\"\n")
    path.chmod(0o755)
    return path


def assert_job_facts(cluster, record, job, switches):
    """The record's topology.slurm names the job, its nodes, Slurm's version, the partition and the switches."""
    inner = record["topology"]["slurm"]
    assert inner["job_id"] == job and inner["version"] == cluster.version, inner
    assert inner["partition"] == cluster.partition and len(inner["nodes"]) == 2, inner
    assert inner["switches"] == sorted(switches_of(cluster, inner["nodes"])) and len(inner["switches"]) == switches


def job_state(cluster, job: str) -> str | None:
    found = re.search(r"JobState=(\S+)", cluster.slurm("scontrol", "show", "job", "-o", job, check=False).stdout)
    return found[1] if found else None


def block_every_node(cluster, tmp_path) -> str:
    """A job holding every node, running: jobs submitted now stay pending until it is cancelled."""
    blocker = cluster.slurm("sbatch", "--parsable", f"--nodes={len(cluster.nodes)}",
                            f"--partition={cluster.partition}", f"--output={tmp_path / 'blocker.out'}",
                            "--wrap", "sleep 300").stdout.strip()
    # only once it runs are the nodes taken (a pending blocker lets backfill start the sweep's jobs first)
    wait_for(lambda: jobs(cluster).get(blocker) == "RUNNING", 60, "the blocking job running")
    return blocker


def ledger_of(store: Path) -> dict:
    path = Path(f"{store}.slurm-jobs.json")
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def wait_for(predicate, timeout=30.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"{what} not reached in {timeout:g} s")


def test_show_lists_nodes_and_switches_and_refuses_what_the_partition_lacks(cluster, tmp_path):
    shown = vnetbench("topology", "show", f"slurm:{cluster.partition}", "--json", env=cluster.env(), check=0)
    facts = json.loads(shown.stdout)["slurm"]
    assert sorted(n["name"] for n in facts["nodes"]) == sorted(n.name for n in cluster.nodes)
    assert {leaf: sorted(m) for leaf, m in facts["switches"].items()} == {
        leaf: sorted(n.name for n in cluster.nodes if n.switch == leaf) for leaf in cluster.leaf_switches}
    assert facts["version"] == cluster.version and re.fullmatch(r"slurm\S* \d+\.\d+\.\d+", facts["version"])
    # three nodes under one switch, or on three switches: this partition has neither
    for layout, why in (("3nodes-1switch", "no leaf switch has 3 usable nodes"),
                        ("3nodes-3switches", "3 nodes on 3 switches cannot be had")):
        done = vnetbench("run", "pingpong", "--ranks", "3", "--topology", f"slurm:{cluster.partition}/{layout}",
                         "--store", tmp_path / "r.jsonl", *SMOKE, env=cluster.env(), check=2)
        assert why in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert jobs(cluster) == {}, "a refused run submitted a job"
    assert not (tmp_path / "r.jsonl").exists()
    bad = vnetbench("topology", "show", "slurm:nosuchpart", env=cluster.env(), check=2)
    assert "no such partition" in bad.stderr and cluster.partition in bad.stderr
    spec = tmp_path / "t.yaml"
    spec.write_text(f"name: t\nbackend: slurm\npartition: {cluster.partition}\nnodes: 2\nswitchs: 1\n")
    bad = vnetbench("topology", "show", spec, env=cluster.env(), check=2)
    assert "switchs: unknown field" in bad.stderr


def test_one_switch_and_two_switches_records_and_report(cluster, tmp_path):
    store = tmp_path / "results.jsonl"
    records = {}
    mpi = chosen_mpi(tmp_path)
    for layout in ("2nodes-1switch", "2nodes-2switches"):
        done = vnetbench("run", "pingpong", "--ranks", "2", "--topology", f"slurm:{cluster.partition}/{layout}",
                         "--mpi", mpi, "--store", store, "--json", *SMOKE, env=cluster.env(), timeout=120, check=0)
        (record,) = json_lines(done.stdout)
        records[layout] = record
    for layout, want in (("2nodes-1switch", 1), ("2nodes-2switches", 2)):
        record = records[layout]
        assert record["status"] == "ok", record["validation"]
        slurm = record["slurm"]
        assert slurm["state"] == "COMPLETED" and slurm["job_id"].isdigit()
        inner = record["topology"]["slurm"]
        assert inner["job_id"] == slurm["job_id"] and inner["version"] == cluster.version
        assert len(inner["nodes"]) == 2 and len(switches_of(cluster, inner["nodes"])) == want
        assert sorted(inner["switches"]) == sorted(switches_of(cluster, inner["nodes"]))
        # the ranks really ran on those nodes (each rank checks its hostname)
        assert sorted(p["hostname"] for p in record["placement"]) == sorted(inner["nodes"])
        assert record["metrics"]["sizes"]
        # the job ran the MPI chosen with --mpi, its ranks started by srun with Open MPI's PMIx
        assert record["launch"]["mpi"]["launcher"] == str(mpi)
        assert record["launch"]["notes"]["launcher"] == "srun --mpi=pmix"
        # whose barriers hold across the nodes (allocation.PMIX_FENCE: Slurm's tree fence does not, on 2 nodes)
        assert record["launch"]["notes"]["pmix_fence"] == "ring"
        assert record["launch"]["command"].startswith("env SLURM_PMIX_FENCE=ring srun --mpi=pmix ")
    report = vnetbench("report", "--store", store, check=0)
    assert "slurm-vnb-2nodes-1switch" in report.stdout and "slurm-vnb-2nodes-2switches" in report.stdout


def ranks_of(job: str) -> list[int]:
    """The pids of the kernel ranks Slurm started for ``job`` (their environment names it)."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:  # not a process, or gone
            continue
        # the ranks themselves (python -m vnetbench.kernels ...), not srun, whose argv carries theirs
        if argv[1:3] == [b"-m", b"vnetbench.kernels"] and f"SLURM_JOB_ID={job}".encode() in environ:
            pids.append(int(entry.name))
    return pids


def test_a_job_over_its_time_limit_is_a_timeout(cluster, tmp_path):
    spec = tmp_path / "short.yaml"
    spec.write_text(f"name: short\nbackend: slurm\npartition: {cluster.partition}\nnodes: 2\nswitches: 1\n"
                    f"time_limit: \"0:02\"\n")
    proc = subprocess.Popen([sys.executable, "-m", "vnetbench", "run", "pingpong", "--ranks", "2", "--topology",
                             str(spec), "--store", str(tmp_path / "r.jsonl"), "--json", *ENDLESS], env=cluster.env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        job = wait_for(lambda: next((j for j, s in jobs(cluster).items() if s == "RUNNING"), None), 60,
                       "the job running")
        # the ranks run (their job step exists): a job ended before that fails to start its step instead
        wait_for(lambda: f"{job}.0" in steps(cluster, job), 60, "the ranks' job step running")
        # the YAML's limit reached Slurm (which counts limits in whole minutes: 2 s is one minute)
        assert "TimeLimit=00:01:00" in cluster.slurm("scontrol", "show", "job", "-o", job).stdout
        # pingpong's ranks poll without pause, and the wait below lasts up to slurmctld's 30 s check: stopped, they
        # wait without taking the machine's cores; Slurm's kill at the limit (SIGCONT, SIGTERM, then SIGKILL) ends
        # stopped tasks as it ends running ones
        wait_for(lambda: len(ranks_of(job)) == 2, 60, "both ranks started")
        for pid in ranks_of(job):
            os.kill(pid, signal.SIGSTOP)
        # rather than wait that minute (and up to 30 s more for slurmctld's periodic check), the job's end
        # is moved to now: slurmctld's own time-limit check then ends it, TIMEOUT, as at the limit
        wait_for(lambda: cluster.slurm("scontrol", "update", f"JobId={job}", "EndTime=now", check=False)
                 .returncode == 0, 30, "slurmctld accepting the new end time")
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 1, err[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    (record,) = json_lines(out)
    # the message one string: pytest cuts the repr of anything else to a line, which hid why a run under the whole
    # suite's load once ended FAILED (exit 1:0, NonZeroExitCode) before slurmctld's check made it TIMEOUT
    assert record["status"] == "timeout", "\n".join([
        f"record's slurm: {json.dumps(record['slurm'])}", f"detail: {record['validation']['detail'][-1500:]}",
        "scontrol: " + cluster.slurm("scontrol", "show", "job", "-o", job).stdout, f"stderr: {err[-1500:]}",
        cluster.log_tail(12)])
    assert record["slurm"]["state"] == "TIMEOUT" and record["slurm"]["job_id"] == job
    assert "TIMEOUT" in record["validation"]["detail"]
    assert_job_facts(cluster, record, job, switches=1)
    assert "TimeLimit" in cluster.slurm("scontrol", "show", "job", "-o", job).stdout.split("Reason=")[1][:20]
    assert jobs(cluster) == {}


def test_a_node_that_fails_mid_job_fails_the_run_with_slurms_reason(cluster, tmp_path):
    store = tmp_path / "r.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "vnetbench", "run", "pingpong", "--ranks", "2", "--topology",
                             f"slurm:{cluster.partition}/2nodes-2switches", "--store", str(store), "--json",
                             *ENDLESS], env=cluster.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    victim = None
    try:
        job = wait_for(lambda: next((j for j, s in jobs(cluster).items() if s == "RUNNING"), None), 60, "a running job")
        wait_for(lambda: f"{job}.0" in steps(cluster, job), 60, "the ranks' job step running")
        nodes = cluster.slurm("squeue", "-h", "-j", job, "-o", "%N").stdout.strip()
        victim = cluster.slurm("scontrol", "show", "hostnames", nodes).stdout.split()[-1]
        cluster.kill_node(victim)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 1, err[-2000:]
        (record,) = json_lines(out)
        assert record["status"] == "failed"
        assert record["slurm"]["job_id"] == job
        assert record["slurm"]["state"] in ("NODE_FAIL", "FAILED")
        assert record["slurm"]["state"] in record["validation"]["detail"]
        assert_job_facts(cluster, record, job, switches=2)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if victim:
            cluster.restart_node(victim)


def test_ctrl_c_cancels_its_own_job_only(cluster, tmp_path):
    other = cluster.slurm("sbatch", "--parsable", "-N1", f"--partition={cluster.partition}",
                          f"--output={tmp_path / 'other.out'}", "--wrap", "sleep 120").stdout.strip()
    proc = subprocess.Popen([sys.executable, "-m", "vnetbench", "run", "pingpong", "--ranks", "2", "--topology",
                             f"slurm:{cluster.partition}/2nodes-1switch", "--store", str(tmp_path / "r.jsonl"),
                             *ENDLESS], env=cluster.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        mine = wait_for(lambda: next((j for j, s in jobs(cluster).items() if j != other and s == "RUNNING"), None),
                        60, "its job running")
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
        assert proc.returncode != 0
        # slurmctld settles a cancelled job asynchronously (it may show COMPLETING first): give it time,
        # a job that was never cancelled stays RUNNING and fails this
        wait_for(lambda: "JobState=CANCELLED" in cluster.slurm("scontrol", "show", "job", "-o", mine).stdout,
                 30, f"job {mine} cancelled")
        assert jobs(cluster).get(other) == "RUNNING", "Ctrl-C cancelled a job it did not submit"
        assert not (tmp_path / "r.jsonl").exists() or all(
            json.loads(line)["status"] != "ok" for line in (tmp_path / "r.jsonl").read_text().splitlines())
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        cluster.slurm("scancel", other, check=False)


def layouts(cluster) -> str:
    return f"slurm:{cluster.partition}/2nodes-1switch,slurm:{cluster.partition}/2nodes-2switches"


def test_sweep_across_one_and_two_switches_then_report(cluster, tmp_path):
    store = tmp_path / "results.jsonl"
    mpi = chosen_mpi(tmp_path)
    done = vnetbench("sweep", "--kernel", "pingpong", "--topologies", layouts(cluster), "--ranks", "2",
                     "--repeat", "2", "--mpi", mpi, "--store", store, *SMOKE, env=cluster.env(), timeout=150, check=0)
    records = [json.loads(line) for line in store.read_text().splitlines()]
    assert len(records) == 4 and all(r["status"] == "ok" for r in records)
    assert all(r["launch"]["mpi"]["launcher"] == str(mpi) for r in records), "a job did not use --mpi's MPI"
    by_topology = {}
    for record in records:
        by_topology.setdefault(record["topology"]["name"], []).append(record)
    for name, want in (("slurm-vnb-2nodes-1switch", 1), ("slurm-vnb-2nodes-2switches", 2)):
        got = by_topology[name]
        assert sorted(r["repetition"] for r in got) == [0, 1]
        assert len({r["slurm"]["job_id"] for r in got}) == 2  # one job per run
        for record in got:
            assert len(switches_of(cluster, record["topology"]["slurm"]["nodes"])) == want
    assert "Slurm job" in done.stderr
    assert not list(tmp_path.glob("results.jsonl.slurm*")), "the sweep left its ledger or job directories"
    report = vnetbench("report", "--store", store, check=0)
    assert "slurm-vnb-2nodes-1switch" in report.stdout and "slurm-vnb-2nodes-2switches" in report.stdout


def test_sweep_killed_while_jobs_are_pending_resumes_them_by_id(cluster, tmp_path):
    store = tmp_path / "results.jsonl"
    blocker = block_every_node(cluster, tmp_path)  # the sweep's jobs stay pending until it ends
    argv = [sys.executable, "-m", "vnetbench", "sweep", "--kernel", "pingpong", "--topologies", layouts(cluster),
            "--ranks", "2", "--repeat", "1", "--store", str(store), *SMOKE]
    proc = subprocess.Popen(argv, env=cluster.env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        ledger = tmp_path / "results.jsonl.slurm-jobs.json"
        wait_for(lambda: ledger.exists() and len(json.loads(ledger.read_text())) == 2, 60, "two jobs submitted")
        submitted = sorted(entry["job_id"] for entry in json.loads(ledger.read_text()).values())
        states = jobs(cluster)
        assert all(states.get(j) == "PENDING" for j in submitted), (blocker, states)
        proc.kill()  # no chance to cancel anything: the jobs stay queued
        proc.wait(timeout=10)
        cluster.slurm("scancel", blocker)
        done = vnetbench("sweep", "--kernel", "pingpong", "--topologies", layouts(cluster), "--ranks", "2",
                         "--repeat", "1", "--store", store, "--resume", *SMOKE, env=cluster.env(), timeout=150, check=0)
        assert done.stderr.count("found again") == 2
        records = [json.loads(line) for line in store.read_text().splitlines()]
        assert sorted(r["slurm"]["job_id"] for r in records) == submitted, (
            done.stderr[-3000:], [(r["slurm"], r["topology"]["name"], r["repetition"]) for r in records])
        assert all(r["status"] == "ok" for r in records)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        cluster.slurm("scancel", blocker, check=False)


def test_resume_collects_a_job_slurm_forgot_and_resubmits_a_cancelled_one(cluster, tmp_path):
    store = tmp_path / "results.jsonl"
    ref = f"slurm:{cluster.partition}/2nodes-1switch"
    argv = ["sweep", "--kernel", "pingpong", "--topologies", ref, "--ranks", "2", "--repeat", "3", "--store",
            str(store), *SMOKE]
    blocker = block_every_node(cluster, tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "vnetbench", *argv], env=cluster.env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: len(ledger_of(store)) == 3, 60, "three jobs submitted")
        proc.kill()  # no chance to cancel anything: the jobs stay queued
        proc.wait(timeout=10)
        entries = sorted(ledger_of(store).values(), key=lambda e: int(e["job_id"]))
        # the sweep looks at its ledger in repetition order: the held job is found again before the cancelled
        # one is submitted again (the cue for this test to cancel the held one)
        (ran, held, cancelled) = [e["job_id"] for e in entries]
        works = {e["job_id"]: Path(e["work"]) for e in entries}
        cluster.slurm("scancel", cancelled)  # cancelled before it ran: submitted again
        cluster.slurm("scontrol", "hold", held)  # pending until this test cancels it: not run
        cluster.slurm("scancel", blocker)
        wait_for(lambda: job_state(cluster, ran) == "COMPLETED", 60, f"job {ran} completed")
        # Slurm forgets an ended job after MinJobAge (600 s on this cluster): the ledger names one it never knew
        forgotten = str(int(cancelled) + 1000)
        assert job_state(cluster, forgotten) is None
        ledger = ledger_of(store)
        for entry in ledger.values():
            if entry["job_id"] == ran:
                entry["job_id"] = forgotten
        Path(f"{store}.slurm-jobs.json").write_text(json.dumps(ledger))
        proc = subprocess.Popen([sys.executable, "-m", "vnetbench", *argv, "--resume"], env=cluster.env(),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # once the cancelled run is submitted again (the held one found again), the held one is cancelled outside
        wait_for(lambda: {e["job_id"] for e in ledger_of(store).values()} - {held, forgotten, cancelled}, 60,
                 "the cancelled run submitted again")
        cluster.slurm("scancel", held)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        cluster.slurm("scancel", blocker, held, check=False)
    assert f"Slurm job {forgotten} ended and Slurm no longer knows it" in err, err[-3000:]
    assert f"Slurm job {cancelled} was cancelled or left nothing" in err and "found again" in err, err[-3000:]
    assert "cancelled outside the sweep: not run" in err and "1 not run (cancelled)" in err, err[-3000:]
    # the held job left the total: the bar ends at two runs of two, none pending
    assert "0 pending, 0 running, 2 done" in err and "2/2" in err, err[-3000:]
    records = {r["repetition"]: r for r in map(json.loads, store.read_text().splitlines())}
    assert sorted(records) == [0, 2] and all(r["status"] == "ok" for r in records.values())
    # repetition 0 is the forgotten job's own record, collected from its directory, not run again
    assert records[0]["topology"]["slurm"]["job_id"] == ran and records[0]["slurm"]["job_id"] == forgotten
    assert records[2]["topology"]["slurm"]["job_id"] not in (ran, cancelled, held)
    assert not any(path.exists() for path in works.values()), "an old work directory was left"
    assert not list(tmp_path.glob("results.jsonl.slurm*")), "the sweep left its ledger or job directories"


def test_fail_fast_cancels_the_sweeps_remaining_jobs_only(cluster, tmp_path):
    store = tmp_path / "results.jsonl"
    mpi = chosen_mpi(tmp_path)
    blocker = block_every_node(cluster, tmp_path)
    other = cluster.slurm("sbatch", "--parsable", "-N1", f"--partition={cluster.partition}",
                          f"--output={tmp_path / 'other.out'}", "--wrap", "sleep 120").stdout.strip()
    proc = subprocess.Popen([sys.executable, "-m", "vnetbench", "sweep", "--kernel", "pingpong", "--topologies",
                             layouts(cluster), "--ranks", "2", "--repeat", "2", "--mpi", str(mpi), "--store",
                             str(store), "--fail-fast", *SMOKE], env=cluster.env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: len(ledger_of(store)) == 4, 60, "four jobs submitted")
        submitted = sorted(entry["job_id"] for entry in ledger_of(store).values())
        mpi.unlink()  # the jobs' MPI is gone: each fails as it starts, without a record of its own
        cluster.slurm("scancel", blocker)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 1, err[-3000:]
        assert "stopped by --fail-fast" in err
        records = [json.loads(line) for line in store.read_text().splitlines()]
        assert records and all(r["status"] == "failed" for r in records), records
        # the failure made of the job's end says what an ok record says of its job
        (first, *_) = records
        job = first["slurm"]["job_id"]
        assert job in submitted and "no result for this repetition" in first["validation"]["detail"]
        want = 1 if first["topology"]["name"].endswith("1switch") else 2
        assert_job_facts(cluster, first, job, switches=want)
        recorded = {r["slurm"]["job_id"] for r in records}
        assert len(recorded) < len(submitted)
        for left in set(submitted) - recorded:
            wait_for(lambda: job_state(cluster, left) in ("CANCELLED", "FAILED"), 30, f"job {left} ended")
        assert "CANCELLED" in {job_state(cluster, left) for left in set(submitted) - recorded}
        assert job_state(cluster, other) in ("PENDING", "RUNNING"), "--fail-fast cancelled a job not its own"
        assert not list(tmp_path.glob("results.jsonl.slurm*")), "the sweep left its ledger or job directories"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        cluster.slurm("scancel", blocker, other, check=False)


def test_hosts_check_through_slurm(cluster):
    done = vnetbench("hosts", "check", "--slurm", cluster.partition, "--json", env=cluster.env(), timeout=90,
                     check=0)
    reports = json.loads(done.stdout)
    assert sorted(r["name"] for r in reports) == sorted(n.name for n in cluster.nodes)
    assert all(r["ok"] and r["probe"]["hostname"] == r["name"] for r in reports), reports
    assert "verdict: ok" in done.stderr
    bad = vnetbench("hosts", "check", "--slurm", "nosuchpart", env=cluster.env(), check=2)
    assert "no such partition" in bad.stderr


def job_ids(cluster) -> set[str]:
    """Every job slurmctld remembers (MinJobAge keeps ended ones for minutes): a submission shows here."""
    out = cluster.slurm("scontrol", "show", "job", "-o").stdout
    return {line.split()[0].split("=")[1] for line in out.splitlines() if line.startswith("JobId=")}


def test_run_and_exec_inside_an_allocation_use_it_without_submitting(cluster, tmp_path):
    before = job_ids(cluster)
    store = tmp_path / "r.jsonl"
    py = shlex.quote(sys.executable)
    ref = f"slurm:{cluster.partition}"
    # three ranks on two nodes: round-robin, the node with two CPUs in the allocation taking the third. One size,
    # a few rounds: three ranks share this machine's two cores (yielding when idle: tests/harness/slurm_cluster.py),
    # and each round waits for the one the host has off its core (8 sizes of 100 warm-up and 20 timed rounds busy-
    # polling took 4 s)
    smoke = "--max-size 8 --iterations 5 --warmup 1"
    # what a user types in the shell salloc gives (salloc runs it on this host with the allocation's SLURM_*)
    (tmp_path / "inside.sh").write_text(f"""set -e
cd {shlex.quote(str(tmp_path))}
echo "$SLURM_JOB_ID" > job
{py} -m vnetbench run allreduce --ranks 3 --topology {ref} --store r.jsonl --json {smoke} > auto.json
{py} -m vnetbench run allreduce --ranks 3 --topology {ref}@mpirun --store r.jsonl --json {smoke} > mpirun.json
{py} -m vnetbench exec --topology {ref} --ranks 3 --show -- sh -c 'echo "$(hostname) $SLURM_PMIX_FENCE"' > exec.out
{py} -m vnetbench run allreduce --ranks 2 --topology {ref}/2nodes-2switches --store r.jsonl {smoke} 2> refused.err \
    || echo $? > refused.rc
""")
    done = subprocess.run(["salloc", "--nodes=2", "--ntasks=3", "--switches=1", f"--partition={cluster.partition}",
                           "sh", str(tmp_path / "inside.sh")], env=cluster.env(), capture_output=True, text=True,
                          timeout=150)
    assert done.returncode == 0, done.stderr[-3000:]
    job = (tmp_path / "job").read_text().strip()
    assert job_ids(cluster) - before == {job}, "vnetbench submitted a job inside the allocation"
    listed = cluster.slurm("squeue", "-h", "-t", "all", "-j", job, "-o", "%N").stdout.strip()
    nodes = cluster.slurm("scontrol", "show", "hostnames", listed).stdout.split()
    assert len(nodes) == 2 and len(switches_of(cluster, nodes)) == 1
    cpus = cluster.slurm("squeue", "-h", "-t", "all", "-j", job, "-o", "%C").stdout.strip()
    assert cpus == "3"
    for name, launcher in (("auto", "srun --mpi=pmix"), ("mpirun", "mpirun")):
        (record,) = json_lines((tmp_path / f"{name}.json").read_text())
        assert record["status"] == "ok", record["validation"]
        slurm = record["topology"]["slurm"]
        assert slurm["job_id"] == job and sorted(slurm["nodes"]) == sorted(nodes)
        # every rank checked its own hostname against the placement stated (round-robin over the nodes)
        placed = [p["hostname"] for p in record["placement"]]
        assert set(placed) == set(nodes) and placed[0] != placed[1], placed
        assert record["launch"]["notes"]["launcher"] == launcher
        started = record["launch"]["command"].split()
        if name == "mpirun":
            assert started[0].endswith("mpirun"), started
        else:
            assert started[:3] == ["env", "SLURM_PMIX_FENCE=ring", "srun"], started
        assert "slurm" not in record or record["slurm"].get("job_id") in (None, job)
    ranks = [(line.split() + ["unset"])[:2] for line in (tmp_path / "exec.out").read_text().splitlines()]
    assert len(ranks) == 3 and sorted({host for host, _ in ranks}) == sorted(nodes), ranks
    # the step's environment, which slurmstepd's PMIx plugin reads its fence from, has the ring (allocation.PMIX_FENCE)
    assert {fence for _, fence in ranks} == {"ring"}, ranks
    assert "srun --mpi=pmix" in done.stderr  # --show: exec started its ranks with srun too
    assert len(store.read_text().splitlines()) == 2
    # a record named ...-2nodes-2switches cannot come from this one-switch allocation
    refused = (tmp_path / "refused.err").read_text().strip()
    assert (tmp_path / "refused.rc").read_text().strip() == "2", refused
    assert len(refused.splitlines()) == 1 and "asks for 2 node(s) on 2 leaf switch(es)" in refused, refused
    assert f"allocation {job} has 2 node(s) on 1 leaf switch(es)" in refused, refused


def test_srun_the_site_cannot_do_is_refused_before_submitting(cluster, tmp_path):
    # a site whose Slurm has no PMIx plugin: the same cluster seen through a configuration whose PluginDir
    # lacks mpi_pmix*, so that its srun --mpi=list offers pmi2 but not pmix (what Open MPI's ranks need)
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    real = Path(cluster.slurm("scontrol", "show", "config").stdout.split("PluginDir", 1)[1].split("=", 1)[1]
                .split()[0])
    for plugin in real.iterdir():
        if not plugin.name.startswith("mpi_pmix"):
            (plugins / plugin.name).symlink_to(plugin)
    etc = tmp_path / "etc"
    shutil.copytree(cluster.conf.parent, etc)
    with open(etc / "slurm.conf", "a") as conf:
        conf.write(f"PluginDir={plugins}\n")
    env = {**cluster.env(), "SLURM_CONF": str(etc / "slurm.conf")}
    listed = subprocess.run(["srun", "--mpi=list"], env=env, capture_output=True, text=True, timeout=30)
    assert "pmi2" in listed.stdout + listed.stderr and "pmix" not in listed.stdout + listed.stderr
    before = job_ids(cluster)
    store = tmp_path / "r.jsonl"
    for argv in (["run", "pingpong", "--ranks", "2", "--topology", f"slurm:{cluster.partition}/2nodes-1switch@srun"],
                 ["sweep", "--kernel", "pingpong", "--ranks", "2", "--topologies",
                  f"slurm:{cluster.partition}/2nodes-1switch@srun"]):
        done = vnetbench(*argv, "--store", store, *SMOKE, env=env, check=2)
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "launcher: srun cannot start Open MPI" in done.stderr and "pmix" in done.stderr
    assert job_ids(cluster) == before and not store.exists()
    assert not list(tmp_path.glob("r.jsonl.slurm*"))


def test_srun_starts_mpich_ranks_with_pmi2(cluster, tmp_path):
    # the tests' own venv: --mpi mpich makes the ranks load MPICH's library (vnetbench.core.mpilib)
    if shutil.which("mpiexec.mpich") is None:
        pytest.skip("MPICH is not installed (Debian: apt-get install mpich libmpich-dev)")
    done = subprocess.run([sys.executable, "-m", "vnetbench", "run", "pingpong", "--ranks", "2", "--mpi", "mpich",
                           "--topology", f"slurm:{cluster.partition}/2nodes-2switches@srun", "--store",
                           str(tmp_path / "r.jsonl"), "--json", *SMOKE], env=cluster.env(), capture_output=True,
                          text=True, timeout=150)
    assert done.returncode == 0, done.stderr[-3000:]
    (record,) = json_lines(done.stdout)
    assert record["status"] == "ok", record["validation"]
    assert record["launch"]["mpi"]["flavour"] == "mpich"
    assert record["launch"]["notes"]["launcher"] == "srun --mpi=pmi2"
    assert record["launch"]["command"].startswith("srun --mpi=pmi2")
    nodes = record["topology"]["slurm"]["nodes"]
    assert len(switches_of(cluster, nodes)) == 2
    assert sorted(p["hostname"] for p in record["placement"]) == sorted(nodes)


def test_an_application_runs_and_sweeps_as_batch_jobs(cluster, tmp_path):
    # the request carries the workload: an application is submitted as a kernel is, and its job runs it
    app = tmp_path / "hi.yaml"
    app.write_text("name: hi\ncommand: [hostname]\n")
    store = tmp_path / "r.jsonl"
    done = vnetbench("run", "--app", app, "--ranks", "2", "--topology", f"slurm:{cluster.partition}/2nodes-2switches",
                     "--store", store, "--json", env=cluster.env(), timeout=120, check=0)
    (record,) = json_lines(done.stdout)
    assert record["status"] == "ok" and record["kernel"] == "hi", record["validation"]
    assert record["slurm"]["state"] == "COMPLETED"
    assert_job_facts(cluster, record, record["slurm"]["job_id"], switches=2)
    fails = tmp_path / "fails.yaml"
    fails.write_text("name: fails\ncommand: [sh, -c, 'echo partial; exit 3']\n")
    done = vnetbench("sweep", "--app", fails, "--ranks", "2", "--repeat", "2", "--topologies",
                     f"slurm:{cluster.partition}/2nodes-1switch", "--store", store, env=cluster.env(), timeout=120,
                     check=1)
    failed = [json.loads(line) for line in store.read_text().splitlines()][1:]
    assert sorted(r["repetition"] for r in failed) == [0, 1], done.stderr[-3000:]
    for r in failed:  # the job's own record of the run, with Slurm's word on the job that ran it
        assert r["status"] == "failed" and r["kernel"] == "fails" and "partial" in r["output_tail"], r
        assert r["slurm"]["state"] == "FAILED" and "Slurm job" in r["validation"]["detail"]
    assert not list(tmp_path.glob("r.jsonl.slurm*")), "the sweep left its ledger or job directories"
