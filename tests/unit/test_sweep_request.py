"""A sweep's request: a study's defaults under the explicit options, and the failures counted by status; the
request a batch job gets, for a kernel and an application alike."""

import json
from pathlib import Path

import pytest

from vnetbench.engine import batchjob, sweep
from vnetbench import engine, kernels, workloads
from vnetbench.engine import studies
from vnetbench.mpi import selection as mpiselect
from vnetbench.core.errors import UsageError
from vnetbench.core.store import Store
from vnetbench.topologies import base
from vnetbench.workloads.app import AppWorkload


def test_the_default_is_the_quick_study():
    quick = studies.get("quick")
    asked = sweep.settle()
    assert (asked.kernel, asked.topologies, asked.ranks, asked.repeat) == (
        quick.kernel, quick.topologies, quick.ranks, quick.repeat)


def test_explicit_options_go_over_the_study_s():
    asked = sweep.settle("quick", "pingpong", ["native"], [2], 3, ["--max-size", "64"])
    assert (asked.kernel, asked.topologies, asked.ranks, asked.repeat) == ("pingpong", ["native"], [2], 3)
    assert asked.params["max_size"] == 64


@pytest.mark.parametrize("name", list(studies.STUDIES))
def test_the_study_s_kernel_options_apply_only_to_its_kernel(name):
    study = studies.get(name)
    # the workload fills the defaults that follow other options (md's electrostatics follow --system)
    expected = workloads.kind("kernel")(study.kernel, kernels.parse_params(study.kernel, study.kernel_argv)).params
    assert sweep.settle(name).params == expected
    assert expected == {**kernels.parse_params(study.kernel, study.kernel_argv),
                        **{key: value for key, value in expected.items() if key in ("electrostatics", "pme_every")}}
    other = next(k for k in kernels.names() if k != study.kernel)
    assert sweep.settle(name, other).params == kernels.defaults(other)


def test_an_unknown_kernel_is_refused_naming_the_option():
    with pytest.raises(UsageError, match=r"--kernel: unknown kernel 'nbody'; choose from stream, halo"):
        sweep.settle(kernel="nbody")


def test_failures_are_counted_by_status():
    records = [{"status": s} for s in ("ok", "failed", "timeout", "failed", "ok", "invalid")]
    assert list(sweep.failures(records).items()) == [("failed", 2), ("timeout", 1), ("invalid", 1)]
    assert not sweep.failures([{"status": "ok"}])


# ---- one workload contract: the request a batch job gets, and the hand-over to a backend's Batch ----------

class Launcher:  # what the engine and sweep read of a launcher before anything starts
    path = "/opt/mpi/bin/mpirun"
    family = "openmpi"

    def __str__(self):
        return "Open MPI 5 (test)"


class Toy:
    """A topology of the toy batch backend below."""

    backend = "toybatch"
    vms = ()

    def __init__(self, ref):
        self.ref, self.name = ref, ref.split(":", 1)[1]


class Recorder(base.Batch):
    calls = []

    def run(self, topology, request, ranks, *, command, store, launcher, on_record=None):
        self.calls.append(("run", topology, request, ranks, command, launcher))
        return []

    def sweep(self, items, *, command, store, launcher, resume, on_start=None, on_finish=None, say=None):
        self.calls.append(("sweep", items, command, resume))
        for item in items:
            on_start(item)
            record = engine.failure(workloads.from_request(item.request["workload"]), item.ranks, item.repetition,
                                    {"name": item.topology.name}, "not run: a test")
            on_finish(item, record)
        return []


@pytest.fixture
def toy_batch(monkeypatch):
    """A backend whose topologies (toybatch:NAME) run as batch jobs: every call recorded, nothing started."""
    @base.register("toybatch")
    class ToyBackend(base.Backend):
        @classmethod
        def load(cls, ref, what="--topology"):
            return Toy(ref)

        @classmethod
        def batch(cls, topology):
            return Recorder()

        def launch(self, ranks, bind=None):
            raise AssertionError("a batch backend's topology is never realised here")

    monkeypatch.setitem(base.BACKENDS, "toybatch", base.Entry("toybatch"))
    monkeypatch.setattr(mpiselect, "choose", lambda choice, program=None: (Launcher(), None))
    Recorder.calls = []
    yield Recorder.calls
    base.BACKENDS._classes.pop("toybatch", None)


def app_yaml(tmp_path) -> Path:
    path = tmp_path / "hello.yaml"
    path.write_text("name: hello\ncommand: [sh, -c, 'echo value 3']\nmetrics: [{name: value, regex: 'value (\\d+)'}]\n")
    return path


def test_a_kernel_and_an_application_go_to_a_batch_job_and_back_as_the_same_workload(tmp_path, monkeypatch):
    kernel = workloads.chosen(None, "pingpong", ["--max-size", "64"])
    again = workloads.from_request(json.loads(json.dumps(kernel.to_request())))
    assert kernel.to_request() == {"kind": "kernel", "name": "pingpong", "params": kernel.params}
    assert (again.name, again.params["max_size"]) == ("pingpong", 64)
    app = workloads.chosen(str(app_yaml(tmp_path)), None)
    assert app.to_request() == {"kind": "app", "source": str(app_yaml(tmp_path).resolve())}
    assert workloads.from_request(app.to_request()).params == app.params == {"definition": app.app.definition_hash()}
    monkeypatch.chdir(tmp_path)
    adhoc = AppWorkload.of_program(["./prog", "in.txt"], "osu")
    monkeypatch.chdir("/")  # the job starts elsewhere: relative paths still resolve where exec was typed
    back = workloads.from_request(json.loads(json.dumps(adhoc.to_request())))
    assert back.params == adhoc.params and back.program == str(tmp_path / "prog")
    assert back.app.spec.parser == "osu"


@pytest.mark.parametrize("data, message", [
    ({"kind": "nbody"}, "request: workload.kind: 'nbody' is not one of kernel, app"),
    ([], "request: workload.kind: None"),
])
def test_a_request_of_another_kind_is_refused(data, message):
    with pytest.raises(UsageError, match=message):
        workloads.from_request(data)


def test_a_file_that_is_no_request_is_refused_in_one_line(tmp_path):
    path = tmp_path / "request.json"
    path.write_text('{"workload": {"kind": "kernel"}}')
    with pytest.raises(UsageError, match=r"request.json: not a batch job's request \(KeyError\('ranks'\)\)"):
        batchjob.read_request(str(path))


def test_run_on_a_batch_backend_hands_the_request_to_its_batch(toy_batch, tmp_path):
    workload = workloads.chosen(None, "allreduce", ["--max-size", "64"])
    engine.run(workload, 2, topology="toybatch:two", repeat=3, timeout=5, bind="none",
               rank_options={"counters": True}, store=tmp_path / "s.jsonl")
    ((what, topology, request, ranks, command, launcher),) = toy_batch
    assert what == "run"
    assert topology.name == "two" and ranks == 2 and command == engine.BATCH_COMMAND
    assert command[1:] == ["-m", "vnetbench.engine.batchjob"]
    assert request == {"workload": workload.to_request(), "record": {"kernel": "allreduce", "params": workload.params},
                       "ranks": 2, "repeat": 3, "timeout": 5, "bind": "none", "rank_options": {"counters": True},
                       "mpi": Launcher.path, "topology": "toybatch:two"}
    assert set(request) | {"store"} == set(batchjob.FIELDS) | {"record"}


def test_sweep_app_on_a_batch_backend_submits_one_item_per_run(toy_batch, tmp_path):
    asked = sweep.settle(None, None, ["toybatch:a"], [2, 4], 2, app=str(app_yaml(tmp_path)))
    store = Store(tmp_path / "s.jsonl")
    plan = sweep.plan(asked.workload, asked.topologies, asked.ranks, asked.repeat, store=store, resume=True)
    started, finished = [], []
    sweep.run_all(plan, store, on_start=started.append, on_finish=lambda job, record: finished.append(job))
    ((what, items, command, resume),) = toy_batch
    assert what == "sweep"
    assert command == engine.BATCH_COMMAND and resume is True
    assert [(item.ranks, item.repetition) for item in items] == [(2, 0), (4, 0), (2, 1), (4, 1)]
    first = items[0]
    assert first.request["workload"] == {"kind": "app", "source": str(app_yaml(tmp_path).resolve())}
    assert first.request["repeat"] == 1 and first.request["record"]["kernel"] == "hello"
    assert first.key == json.dumps([list(map(str, plan.key(first.job))), 0])
    assert first.label == "hello x2 on toybatch:a, repetition 1/2"
    assert started == finished == [item.job for item in items]  # the sweep's own jobs, whatever the Batch hands back
