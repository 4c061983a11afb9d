"""The slurm backend's spec, layouts and job-state mapping (no cluster needed: the Slurm tier runs a real one)."""

import json
import re
import sys
from pathlib import Path

import pytest

from vnetbench.core.errors import UsageError
from vnetbench.topologies.launch.intent import Intent
from vnetbench.topologies.slurm import allocation, spec
from vnetbench.topologies.slurm.cluster import Cluster, job_facts
from vnetbench.topologies.slurm.jobs import effective_state, status_of
from vnetbench.topologies.slurm.ledger import from_work_dir, parse_sacct

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "data" / "stores"))
import craft  # noqa: E402


def test_refs_and_yaml_are_validated_naming_the_field():
    t = spec.parse_ref("slurm:batch/4nodes-4switches")
    assert (t.partition, t.nodes, t.switches, t.backend) == ("batch", 4, 4, "slurm")
    assert spec.parse_ref("slurm:batch").nodes is None
    with pytest.raises(UsageError, match="layout '2x' is not allowed"):
        spec.parse_ref("slurm:batch/2x")
    with pytest.raises(UsageError, match="3 switches for 4 nodes; allowed: 1 or 4"):
        spec.parse_ref("slurm:batch/4nodes-3switches")
    with pytest.raises(UsageError, match="nodes: 0 is not allowed"):
        spec.from_dict({"name": "t", "backend": "slurm", "partition": "p", "nodes": 0})
    with pytest.raises(UsageError, match="time_limit: 'soon' is not a Slurm time"):
        spec.from_dict({"name": "t", "backend": "slurm", "partition": "p", "time_limit": "soon"})
    t = spec.from_dict({"name": "t", "backend": "slurm", "partition": "p", "time_limit": "10:00", "qos": "hi"})
    assert t.sbatch_options() == ["--partition=p", "--time=10:00", "--qos=hi"]


def test_the_launcher_is_named_after_at_or_in_yaml_and_srun_renders_the_intent():
    t = spec.parse_ref("slurm:batch/2nodes-2switches@srun")
    assert (t.launcher, t.nodes, t.name) == ("srun", 2, "slurm-batch-2nodes-2switches-srun")
    assert spec.parse_ref("slurm:batch").launcher == "auto"
    assert spec.parse_ref("slurm:batch").to_dict().get("launcher") is None
    with pytest.raises(UsageError, match="launcher 'pmi' is not allowed; after '@' give auto, srun, mpirun"):
        spec.parse_ref("slurm:batch@pmi")
    with pytest.raises(UsageError, match="launcher: 'ssh' is not allowed; allowed: auto, srun, mpirun"):
        spec.from_dict({"name": "t", "backend": "slurm", "partition": "p", "launcher": "ssh"})
    assert spec.from_dict({"name": "t", "backend": "slurm", "partition": "p",
                            "launcher": "mpirun"}).to_dict()["launcher"] == "mpirun"
    intent = Intent(ranks=3, bind="core", mca={"btl": "self,sm,tcp"})
    argv = allocation.srun_argv(intent, "pmix", ["a", "b"], ["prog", "x"], {"btl": "self,sm,tcp"}, environ={})
    # PMIx: srun runs with the ring fence, whose barriers hold across nodes (allocation.PMIX_FENCE)
    assert argv[:4] == ["env", "SLURM_PMIX_FENCE=ring", "srun", "--mpi=pmix"]
    assert "--ntasks=3" in argv and "--nodelist=a,b" in argv
    assert "--distribution=cyclic" in argv and "--cpu-bind=cores" in argv
    # Open MPI's settings through env (srun's --export would split btl's value at its commas)
    assert argv[-4:] == ["env", "OMPI_MCA_btl=self,sm,tcp", "prog", "x"]
    assert "env" not in allocation.srun_argv(intent, "pmi2", ["a"], ["prog"], {}, environ={})  # MPICH: no MCA
    # the user's own choice of fence stands (srun passes their environment on), and is what the record says
    mine = allocation.srun_argv(intent, "pmix_v4", ["a"], ["prog"], {}, environ={"SLURM_PMIX_FENCE": "tree"})
    assert mine[0] == "srun" and "SLURM_PMIX_FENCE=ring" not in mine
    assert allocation.pmix_fence("pmix_v4", {"SLURM_PMIX_FENCE": "tree"}) == "tree"
    assert allocation.pmix_fence("pmix", {}) == "ring" and allocation.pmix_fence("pmi2", {}) is None
    # an empty SLURM_PMIX_FENCE names none: the ring is set, as the record says
    empty = allocation.srun_argv(intent, "pmix", ["a"], ["prog"], {}, environ={"SLURM_PMIX_FENCE": ""})
    assert empty[:3] == ["env", "SLURM_PMIX_FENCE=ring", "srun"]
    assert allocation.step_launcher("mpirun", object()) == ("mpirun", None)


def cluster(leaves, down=()):
    nodes = {n: {"state": "down" if n in down else "idle", "cpus": 2, "address": n}
             for members in leaves.values() for n in members}
    return Cluster("p", nodes, leaves, "slurm 22.05")


def test_layouts_place_or_say_why_not():
    c = cluster({"s0": ["a", "b"], "s1": ["c", "d"]})
    assert c.layout(2, 1) == (["--nodes=2", "--switches=1"], None)
    opts, why = c.layout(2, 2)
    assert why is None and opts == ["--nodes=2", "--nodelist=a,c"]
    assert "no leaf switch has 3 usable nodes" in c.layout(3, 1)[1]
    assert "3 nodes on 3 switches cannot be had" in c.layout(3, 3)[1]
    assert "1 usable node(s)" in cluster({"s0": ["a", "b"]}, down={"b"}).layout(2, None)[1]


def test_job_states_map_to_statuses(tmp_path):
    assert [status_of(s) for s in ("TIMEOUT", "NODE_FAIL", "FAILED", "OUT_OF_MEMORY", "CANCELLED", "LOST")] == \
        ["timeout", "failed", "failed", "failed", None, "failed"]
    out = tmp_path / "job.out"
    out.write_text("slurmstepd-n0: error: *** JOB 7 ON n0 CANCELLED AT 2026-01-01T00:00:00 DUE TO TIME LIMIT ***\n")
    assert effective_state("FAILED", out) == "TIMEOUT"
    assert effective_state("FAILED", tmp_path / "missing") == "FAILED"


def test_an_allocation_that_is_not_the_layout_asked_for_is_refused_naming_both():
    c = cluster({"s0": ["a", "b"], "s1": ["c", "d"]})
    one_switch = {"job_id": "7", "nodes": ["a", "b"]}
    allocation.check_layout(spec.parse_ref("slurm:p/2nodes-1switch"), one_switch, c)
    allocation.check_layout(spec.parse_ref("slurm:p"), one_switch, c)  # no layout asked: any allocation
    with pytest.raises(UsageError) as refused:
        allocation.check_layout(spec.parse_ref("slurm:p/2nodes-2switches"), one_switch, c)
    message = str(refused.value)
    assert "\n" not in message
    assert "asks for 2 node(s) on 2 leaf switch(es)" in message
    assert "allocation 7 has 2 node(s) on 1 leaf switch(es) (s0): a, b" in message
    with pytest.raises(UsageError, match="asks for 2 node.s. on 2 leaf .*has 3 node.s. on 2 leaf"):
        allocation.check_layout(spec.parse_ref("slurm:p/2nodes-2switches"), {"job_id": "8", "nodes": ["a", "b", "c"]},
                               c)
    three = spec.from_dict({"name": "t", "backend": "slurm", "partition": "p", "nodes": 3})
    with pytest.raises(UsageError, match="asks for 3 node.s.; allocation 9 has 2 node.s. on 2 leaf"):
        allocation.check_layout(three, {"job_id": "9", "nodes": ["a", "c"]}, c)


def test_job_facts_name_the_switches_the_nodes_span():
    leaves = {"s0": ["a", "b"], "s1": ["c", "d"], "s2": ["e"]}
    facts = job_facts("5", ["c", "a"], "p", "slurm 22.05.8", leaves)
    assert facts == {"job_id": "5", "nodes": ["c", "a"], "version": "slurm 22.05.8", "partition": "p",
                     "switches": ["s0", "s1"]}


def test_sacct_rows_read_as_scontrol_facts():
    text = "41|CANCELLED by 0|0:0|n[0-1]|batch|None\n41.batch|CANCELLED|0:15|n0||\n"
    assert parse_sacct(text, "41") == {"JobState": "CANCELLED", "ExitCode": "0:0", "NodeList": "n[0-1]",
                                       "Partition": "batch", "Reason": "None"}
    assert parse_sacct(text, "42") == {}
    assert parse_sacct("", "41") == {}


def test_a_forgotten_jobs_work_directory_says_how_it_ended(tmp_path):
    assert from_work_dir("3", tmp_path) == {}  # never started: nothing of it there
    (tmp_path / "request.json").write_text("{}")
    assert from_work_dir("3", tmp_path) == {}
    slurm_facts = {"job_id": "3", "nodes": ["a", "c"], "partition": "p"}

    def record(status):  # a whole record, as the job's run stores it (the store's checks read it)
        made = craft.record("halo", "slurm-p", 2, 0, {"elapsed_s": 1.0}, status=status)
        made["topology"] = {**made["topology"], "backend": "slurm", "slurm": slurm_facts}
        return json.dumps(made)

    # the last line cut short: a job killed mid-write
    (tmp_path / "records.jsonl").write_text(record("ok") + "\n{\"status\": \"o")
    ended = from_work_dir("3", tmp_path)
    assert (ended["JobState"], ended["NodeList"], ended["Partition"]) == ("COMPLETED", "a,c", "p")
    assert "no longer knows job 3" in ended["Reason"]
    (tmp_path / "records.jsonl").write_text(record("failed") + "\n")
    assert from_work_dir("3", tmp_path)["JobState"] == "FAILED"
    (tmp_path / "records.jsonl").unlink()
    (tmp_path / "job.out").write_text("Traceback ...\n")  # it ran, and left no record
    assert from_work_dir("3", tmp_path)["JobState"] == "FAILED"


def test_a_yaml_topology_is_validated_by_the_spec_machinery_naming_file_line_and_field(tmp_path):
    from vnetbench import topologies
    from vnetbench.core.errors import SpecError

    path = tmp_path / "t.yaml"
    at = re.escape(str(path))
    path.write_text("name: t\nbackend: slurm\npartition: p\nnodes: 2\nswitchs: 1\n")
    with pytest.raises(SpecError, match=rf"^{at}:5: switchs: unknown field \(did you mean 'switches'\?\)"):
        topologies.load(str(path))
    path.write_text("name: t\nbackend: slurm\npartition: p\nnodes: 2\nswitches: 3\n")
    with pytest.raises(SpecError, match=rf"^{at}:5: switches: 3 switches for 2 nodes; allowed: 1 to 2$"):
        topologies.load(str(path))
    path.write_text("name: t\nbackend: slurm\npartition: p\nnodes: 2\nswitches: 2\ntime_limit: 10\n")
    loaded = topologies.load(str(path))
    assert (loaded.backend, loaded.nodes, loaded.time_limit, loaded.source) == ("slurm", 2, "10", str(path))
    assert loaded.ref == str(path.resolve())  # what a batch job's node loads again
    # YAML 1.1 reads an unquoted 10:00 as 600 (base 60): Slurm is given what the file says, 10 minutes
    path.write_text("name: t\nbackend: slurm\npartition: p\ntime_limit: 10:00\n")
    assert topologies.load(str(path)).sbatch_options() == ["--partition=p", "--time=10:00"]
    with pytest.raises(UsageError, match="0 nodes; allowed: 1 to 4096"):
        spec.parse_ref("slurm:p/0nodes-1switch")


def test_outside_an_allocation_runs_are_batch_jobs_inside_one_they_are_not(monkeypatch):
    from vnetbench import topologies
    from vnetbench.topologies.base import Batch

    topology = spec.parse_ref("slurm:p")
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    assert isinstance(topologies.backend("slurm").batch(topology), Batch)
    with pytest.raises(UsageError, match="not inside a Slurm allocation"):
        topologies.realise(topology)
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "n0")
    assert topologies.backend("slurm").batch(topology) is None


def test_the_job_script_runs_the_runtimes_command_on_the_request(tmp_path):
    from vnetbench.topologies.slurm.jobs import job_name, script

    request = tmp_path / "a dir" / "request.json"
    text = script(["/opt/py thon", "-m", "vnetbench.engine.batchjob"], request)
    assert text.startswith("#!/bin/sh\n")
    assert f"exec '/opt/py thon' -m vnetbench.engine.batchjob '{request}'" in text.splitlines()
    assert job_name({"record": {"kernel": "my app; rm"}}) == "vnetbench-my_app__rm"


def test_repetitions_a_job_left_no_record_of_fail_with_the_jobs_reason(tmp_path, monkeypatch):
    from vnetbench.topologies.slurm import jobs

    monkeypatch.setattr(jobs, "version", lambda: "slurm 22.05.8")
    monkeypatch.setattr(jobs, "leaf_switches", lambda: {})
    made = craft.record("myapp", "slurm-p", 2, 0, {"elapsed_s": 1.0}, params={"steps": 3})
    (tmp_path / jobs.RECORDS).write_text(json.dumps(made) + "\n")
    (tmp_path / jobs.OUTPUT).write_text("slurmstepd: error: *** JOB 9 ON n0 CANCELLED AT now DUE TO TIME LIMIT ***\n")
    request = {"record": {"kernel": "myapp", "params": {"steps": 3}}, "ranks": 2, "repeat": 3}
    info = {"JobState": "CANCELLED", "Reason": "TimeLimit", "NodeList": "(null)", "Partition": "p"}
    records, state = jobs.collect("9", info, tmp_path, request, spec.parse_ref("slurm:p"))
    assert state == "TIMEOUT"
    assert [(r["repetition"], r["status"]) for r in records] == [(0, "ok"), (1, "timeout"), (2, "timeout")]
    failed = records[1]
    assert (failed["kernel"], failed["params"], failed["ranks"]) == ("myapp", {"steps": 3}, 2)
    assert "Slurm job 9 ended TIMEOUT (TimeLimit); no result for this repetition" in failed["validation"]["detail"]
    assert failed["slurm"]["job_id"] == "9" and failed["topology"]["slurm"]["version"] == "slurm 22.05.8"
    # a job cancelled before it ran: not run, no record
    (tmp_path / jobs.OUTPUT).unlink()
    (tmp_path / jobs.RECORDS).unlink()
    assert jobs.collect("9", {"JobState": "CANCELLED"}, tmp_path, request, spec.parse_ref("slurm:p")) == \
        ([], "CANCELLED")


def test_a_ledger_entry_is_trusted_only_as_a_sweep_writes_it():
    from vnetbench.topologies.slurm.ledger import entry_of

    good = {"job_id": "41", "work": "/s.slurm/job-x", "request": {}}
    assert entry_of({"k": good}, "k") == good
    for bad in ({"job_id": "--me", "work": "/w"}, {"job_id": 41, "work": "/w"}, {"job_id": "41"}, "41"):
        assert entry_of({"k": bad}, "k") is None
    assert entry_of({}, "k") is None


def test_srun_gives_the_ranks_the_transport_settings_in_their_own_mpis_names(monkeypatch):
    from vnetbench.mpi import flavours
    from vnetbench.topologies.slurm import SlurmBackend

    monkeypatch.setattr(allocation, "site_pmis", lambda: frozenset({"pmix", "pmi2"}))
    monkeypatch.delenv("SLURM_PMIX_FENCE", raising=False)
    c = cluster({"s0": ["a", "b"], "s1": ["c", "d"]})
    up = SlurmBackend(spec.parse_ref("slurm:p/2nodes-2switches"), {"job_id": "7", "nodes": ["a", "c"], "cpus": [1, 1],
                                                                   "partition": "p"}, c)
    launch = up.launch(2)
    assert [p["switch"] for p in launch.placement_labels] == ["s0", "s1"]
    # Open MPI 4's ranks know the shared-memory transport as vader, Open MPI 5's as sm
    argv = launch.starter(flavours.OpenMPI4("/usr/bin/mpirun", "4.1.4"), ["prog"])
    assert argv[2:4] == ["srun", "--mpi=pmix"] and "OMPI_MCA_btl=self,vader,tcp" in argv, argv
    assert launch.notes["launcher"] == "srun --mpi=pmix" and launch.notes["pmix_fence"] == "ring"
    argv = launch.starter(flavours.OpenMPI5("/venv/bin/mpirun", "5.0.5"), ["prog"])
    assert "OMPI_MCA_btl=self,sm,tcp" in argv, argv
    assert up.describe()["slurm"]["switches"] == ["s0", "s1"]
