"""The slurm backend's spec, layouts and job-state mapping (no cluster needed: the Slurm tier runs a real one)."""

import json
import sys
from pathlib import Path

import pytest

from vnetbench.errors import UsageError
from vnetbench.slurmjobs import effective_state, from_work_dir, parse_sacct, status_of
from vnetbench.topologies import slurm

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "data" / "stores"))
import craft  # noqa: E402


def test_refs_and_yaml_are_validated_naming_the_field():
    t = slurm.parse_ref("slurm:batch/4nodes-4switches")
    assert (t.partition, t.nodes, t.switches, t.backend) == ("batch", 4, 4, "slurm")
    assert slurm.parse_ref("slurm:batch").nodes is None
    with pytest.raises(UsageError, match="layout '2x' is not allowed"):
        slurm.parse_ref("slurm:batch/2x")
    with pytest.raises(UsageError, match="3 switches for 4 nodes; allowed: 1 or 4"):
        slurm.parse_ref("slurm:batch/4nodes-3switches")
    with pytest.raises(UsageError, match="nodes: 0 is not allowed"):
        slurm.from_dict({"name": "t", "backend": "slurm", "partition": "p", "nodes": 0})
    with pytest.raises(UsageError, match="time_limit: 'soon' is not a Slurm time"):
        slurm.from_dict({"name": "t", "backend": "slurm", "partition": "p", "time_limit": "soon"})
    t = slurm.from_dict({"name": "t", "backend": "slurm", "partition": "p", "time_limit": "10:00", "qos": "hi"})
    assert t.sbatch_options() == ["--partition=p", "--time=10:00", "--qos=hi"]


def test_the_launcher_is_named_after_at_or_in_yaml_and_srun_renders_the_intent():
    t = slurm.parse_ref("slurm:batch/2nodes-2switches@srun")
    assert (t.launcher, t.nodes, t.name) == ("srun", 2, "slurm-batch-2nodes-2switches-srun")
    assert slurm.parse_ref("slurm:batch").launcher == "auto"
    assert slurm.parse_ref("slurm:batch").to_dict().get("launcher") is None
    with pytest.raises(UsageError, match="launcher 'pmi' is not allowed; after '@' give auto, srun, mpirun"):
        slurm.parse_ref("slurm:batch@pmi")
    with pytest.raises(UsageError, match="launcher: 'ssh' is not allowed; allowed: auto, srun, mpirun"):
        slurm.from_dict({"name": "t", "backend": "slurm", "partition": "p", "launcher": "ssh"})
    assert slurm.from_dict({"name": "t", "backend": "slurm", "partition": "p",
                            "launcher": "mpirun"}).to_dict()["launcher"] == "mpirun"
    intent = slurm.Intent(ranks=3, bind="core", mca={"btl": "self,sm,tcp"})
    argv = slurm.srun_argv(intent, "pmix", ["a", "b"], ["prog", "x"], "openmpi")
    assert argv[:2] == ["srun", "--mpi=pmix"] and "--ntasks=3" in argv and "--nodelist=a,b" in argv
    assert "--distribution=cyclic" in argv and "--cpu-bind=cores" in argv
    # Open MPI's settings through env (srun's --export would split btl's value at its commas)
    assert argv[-4:] == ["env", "OMPI_MCA_btl=self,sm,tcp", "prog", "x"]
    assert "env" not in slurm.srun_argv(intent, "pmi2", ["a"], ["prog"], "mpich")
    assert slurm.step_launcher("mpirun", object()) == ("mpirun", None)


def cluster(leaves, down=()):
    nodes = {n: {"state": "down" if n in down else "idle", "cpus": 2, "address": n}
             for members in leaves.values() for n in members}
    return slurm.Cluster("p", nodes, leaves, "slurm 22.05")


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
    slurm.check_allocation(slurm.parse_ref("slurm:p/2nodes-1switch"), one_switch, c)
    slurm.check_allocation(slurm.parse_ref("slurm:p"), one_switch, c)  # no layout asked: any allocation
    with pytest.raises(UsageError) as refused:
        slurm.check_allocation(slurm.parse_ref("slurm:p/2nodes-2switches"), one_switch, c)
    message = str(refused.value)
    assert "\n" not in message
    assert "asks for 2 node(s) on 2 leaf switch(es)" in message
    assert "allocation 7 has 2 node(s) on 1 leaf switch(es) (s0): a, b" in message
    with pytest.raises(UsageError, match="asks for 2 node.s. on 2 leaf .*has 3 node.s. on 2 leaf"):
        slurm.check_allocation(slurm.parse_ref("slurm:p/2nodes-2switches"), {"job_id": "8", "nodes": ["a", "b", "c"]},
                               c)
    three = slurm.from_dict({"name": "t", "backend": "slurm", "partition": "p", "nodes": 3})
    with pytest.raises(UsageError, match="asks for 3 node.s.; allocation 9 has 2 node.s. on 2 leaf"):
        slurm.check_allocation(three, {"job_id": "9", "nodes": ["a", "c"]}, c)


def test_job_facts_name_the_switches_the_nodes_span():
    leaves = {"s0": ["a", "b"], "s1": ["c", "d"], "s2": ["e"]}
    facts = slurm.job_facts("5", ["c", "a"], "p", "slurm 22.05.8", leaves)
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
