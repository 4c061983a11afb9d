"""A backend is one package: a toy backend written here into a temporary folder, registered through the
``vnetbench.backends`` entry-point group by a dist-info beside it (no vnetbench file names it), goes through the
real CLI - topology show/up/status/down, hosts check, run, a sweep over it and native - with real mpirun and real
ranks."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import mpi_env, requires_mpi
from harness import hoststate
from vnetbench.core import procs
from vnetbench.topologies.base import PLUGIN_GROUP

pytestmark = [requires_mpi, pytest.mark.timeout(120)]

# ranks on this host, as the local backend runs them, and a life of its own: one state file per topology that
# is up, in $TOYHOST_STATE ("kept": left up by 'topology up'; else brought up by a run, which removes it)
TOY = '''
"""toyhost: a toy vnetbench backend, "toy:NAME"."""

import json
import os
import sys
import time
from pathlib import Path

from vnetbench.core.errors import UsageError
from vnetbench.topologies.base import Backend, HostReport, LaunchSpec, register
from vnetbench.topologies.launch.binding import binding
from vnetbench.topologies.thishost.host import usable_cpus
from vnetbench.topologies.launch.intent import Intent, one_host_transport

STATE = Path(os.environ["TOYHOST_STATE"])


class ToyTopology:
    backend = "toy"
    vms = switches = hosts = ()

    def __init__(self, name):
        self.name, self.description, self.source = name, "a toy: this host", f"toy:{name}"

    def to_dict(self):
        return {"name": self.name, "backend": self.backend}


@register("toy")
class ToyBackend(Backend):
    @classmethod
    def load(cls, ref, what="--topology"):
        name = ref.partition(":")[2]
        if not name.isalnum():
            raise UsageError(f"{what}: {ref!r}: a toy is named with letters and digits")
        return ToyTopology(name)

    @classmethod
    def show(cls, topology, preview):
        return [f"backend toy: ranks on this host, state in {STATE}"]

    @classmethod
    def up(cls, topology):
        (STATE / topology.name).write_text(json.dumps({"since": time.time(), "kept": True}))
        return [f"{topology.name} up in {{took}}"]

    @classmethod
    def down(cls, ref, topology=None):
        path = STATE / ref.partition(":")[2]
        if topology is None or not path.exists():
            return None
        path.unlink()
        return f"{topology.name} down"

    @classmethod
    def status(cls):
        return [{"name": p.name, "backend": cls.backend, "id": p.name, "subnet": None, "vms": 0,
                 "age_s": time.time() - json.loads(p.read_text())["since"], "state": "up"}
                for p in sorted(STATE.iterdir())]

    @classmethod
    def cleanup(cls, everything=False, force=False):
        gone = [p for p in sorted(STATE.iterdir()) if everything or not json.loads(p.read_text())["kept"]]
        for p in gone:
            p.unlink()
        return [f"toy topology {p.name}" for p in gone]

    @classmethod
    def check_hosts(cls, topology, *, venv, timeout, clock_tolerance, mpi):
        return [HostReport(name=topology.name, address="127.0.0.1", reached=True, probe={"python": sys.version})]

    def __init__(self, topology):
        super().__init__(topology)
        self.path = STATE / topology.name
        self.brought_up = not self.path.exists()
        if self.brought_up:
            self.path.write_text(json.dumps({"since": time.time(), "kept": False}))

    def launch(self, ranks, bind=None):
        mca, notes = binding(ranks, usable_cpus(), bind)
        intent = Intent(ranks=ranks, bind=notes["bind"], oversubscribe=notes["oversubscribed"],
                        mca={**one_host_transport(), **mca})
        return LaunchSpec(intent=intent, notes=notes)

    def describe(self):
        return {**super().describe(), "attached": not self.brought_up}

    def close(self):
        if self.brought_up:
            self.path.unlink(missing_ok=True)
'''
TINY = ["--max-size", "1024", "--iterations", "50", "--large-iterations", "5"]


@pytest.fixture
def toy(tmp_path):
    """(run the CLI with the toy installed, its state folder); the host as it was afterwards."""
    site = tmp_path / "site"
    (site / "toyhost").mkdir(parents=True)
    (site / "toyhost" / "__init__.py").write_text(textwrap.dedent(TOY))
    info = site / "toyhost-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toyhost\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{PLUGIN_GROUP}]\ntoy = toyhost:ToyBackend\n")
    state = tmp_path / "state"
    state.mkdir()
    env = {**mpi_env(), "TOYHOST_STATE": str(state),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}

    def cli(*args, check=0):
        proc = subprocess.run([sys.executable, "-m", "vnetbench", *map(str, args)], capture_output=True, text=True,
                              timeout=90, env=env, cwd=tmp_path)
        assert proc.returncode == check, f"{args}: exit {proc.returncode}, expected {check}\n{proc.stderr[-3000:]}"
        return proc

    before = hoststate.network()
    with hoststate.shm_unchanged():
        try:
            yield cli, state
        finally:
            cli("topology", "cleanup", "--all")
    assert not procs.marked("TOYHOST_STATE", state), "left running"
    assert hoststate.differences(before, hoststate.network()) == {}


def test_a_backend_dropped_in_as_a_package_runs_through_the_cli(toy, tmp_path):
    cli, state = toy
    shown = cli("topology", "show", "toy:lab").stdout
    assert shown.splitlines() == ["lab (toy:lab): a toy: this host", f"backend toy: ranks on this host, state in {state}"]
    assert json.loads(cli("topology", "show", "toy:lab", "--json").stdout)["spec"] == {"name": "lab", "backend": "toy"}
    # a YAML topology naming it: the interface's default refuses, naming the backend and its refs
    (tmp_path / "lab.yaml").write_text("name: lab\nbackend: toy\n")
    refused = cli("topology", "show", tmp_path / "lab.yaml", check=2).stderr
    assert "backend: the toy backend reads no YAML topology; use a ref toy:..." in refused
    assert "toy:" in cli("topology", "show", "nonesuch", check=2).stderr  # the refs offered include the plugin's

    (checked,) = json.loads(cli("hosts", "check", "--topology", "toy:lab", "--json").stdout)
    assert (checked["name"], checked["ok"]) == ("lab", True)

    assert cli("topology", "up", "toy:lab").stdout.startswith("lab up in ")
    assert [(r["name"], r["backend"]) for r in json.loads(cli("topology", "status", "--json").stdout)] == [
        ("lab", "toy")]

    store = tmp_path / "run.jsonl"
    out = cli("run", "allreduce", "--topology", "toy:lab", "--ranks", 2, *TINY, "--store", store, "--json").stdout
    (record,) = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert record["status"] == "ok", record["validation"]
    assert record["topology"] == {"name": "lab", "backend": "toy", "spec": {"name": "lab", "backend": "toy"},
                                  "attached": True}
    assert record["ranks"] == 2 and len(record["placement"]) == 2
    assert sorted(p.name for p in state.iterdir()) == ["lab"]  # the run used it as it was up, and left it up

    # a sweep over a toy topology that is not up (the sweep brings it up and takes it down) and native
    swept = tmp_path / "sweep.jsonl"
    cli("sweep", "--kernel", "allreduce", "--topologies", "toy:spare,native", "--ranks", 2, "--repeat", 1,
        "--store", swept, *TINY)
    records = [json.loads(line) for line in swept.read_text().splitlines()]
    assert [(r["topology"]["name"], r["topology"]["backend"], r["status"]) for r in records] == [
        ("spare", "toy", "ok"), ("native", "local", "ok")]
    assert records[0]["topology"]["attached"] is False
    assert sorted(p.name for p in state.iterdir()) == ["lab"]

    assert cli("topology", "down", "toy:lab").stdout == "lab down\n"
    assert cli("topology", "status").stdout == "no vnetbench topology is up\n"
    assert list(state.iterdir()) == []
