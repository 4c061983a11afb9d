"""The explicit backend interface: one registry by name, an intent every launcher flavour renders, and
topologies/ standing below the runtime (tests/unit/test_layers.py)."""

import ipaddress
from pathlib import Path

import pytest

from vnetbench.engine import launch
from vnetbench import topologies
from vnetbench.mpi import flavours
from vnetbench.core.errors import SpecError, UsageError
from vnetbench.topologies import base
from vnetbench.topologies.netns import plan
from vnetbench.topologies.thishost.host import HostFacts
from vnetbench.topologies.launch.intent import Intent, prrte_args
from vnetbench.topologies.model.spec import load_topology

SMALL = HostFacts(cpus_by_node={0: (0, 1)}, memory=24 << 30)
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", base.names())
def test_every_registered_backend_is_a_backend_class_of_its_name(name):
    cls = topologies.backend(name)
    assert issubclass(cls, base.Backend) and cls.backend == name


@pytest.mark.parametrize("name", base.names())
def test_the_spec_model_accepts_exactly_the_registry_s_names(name):
    from vnetbench.topologies.model.spec import from_dict

    data = {"name": "t", "backend": name}
    try:
        from_dict(data)
    except Exception as exc:  # the backend may need more fields; never "backend: expected one of"
        assert "backend: expected one of" not in str(exc)
    with pytest.raises(Exception, match=r"backend: expected one of local, netns"):
        from_dict({"name": "t", "backend": "vmware"})


def test_an_unknown_backend_is_refused_naming_those_available():
    with pytest.raises(UsageError, match=rf"^backend: unknown backend 'vmware'; "
                                         rf"choose from {', '.join(base.names())}$"):
        topologies.backend("vmware")


def test_the_refs_offered_are_those_a_backend_loads():
    offered = base.ref_prefixes(with_plugins=False)
    for name, entry in base.BACKENDS.items():
        loads = topologies.backend(name).load.__func__ is not base.Backend.load.__func__
        assert loads == bool(entry.refs or entry.prefixes), name
        assert (name in offered) == entry.refs and set(entry.prefixes) <= set(offered)
    assert "local" not in offered and "netns" not in offered and {"hostfile", "inventory"} <= set(offered)
    for prefix in offered:
        assert base.prefix_owner(prefix) in base.BACKENDS


def test_a_yaml_topology_naming_no_backend_is_the_registry_s_default():
    assert base.default_backend({"name": "t", "vms": [{"name": "a"}]}) == base.DEFAULT_VM_BACKEND == "netns"
    assert base.default_backend({"name": "t"}) == base.DEFAULT_HOST_BACKEND == "local"
    assert base.default_backend(["not", "a", "mapping"]) == "local"


def test_a_backend_that_reads_no_yaml_refuses_it_naming_itself():
    class Refless(base.Backend):
        backend = "refless"

        def launch(self, ranks, bind=None):
            raise AssertionError

    with pytest.raises(SpecError, match=r"^t.yaml: backend: the refless backend reads no YAML topology; "
                                        r"use a ref refless:\.\.\.$"):
        Refless.from_data({"name": "t", "backend": "refless"}, "t.yaml")


def test_a_plugin_s_entry_point_may_name_its_module_or_an_object_in_it(monkeypatch, tmp_path):
    from importlib.metadata import EntryPoint

    points = [EntryPoint("toy", "toyplug:ToyBackend", base.PLUGIN_GROUP),
              EntryPoint("toy2", "toyplug", base.PLUGIN_GROUP),
              EntryPoint("netns", "elsewhere", base.PLUGIN_GROUP),  # an in-tree name is never taken over
              EntryPoint("broken", "toyplug_absent", base.PLUGIN_GROUP)]
    monkeypatch.setattr("importlib.metadata.entry_points", lambda group: [p for p in points if p.group == group])
    monkeypatch.setattr(base.BACKENDS, "_plugins", None)
    assert base.BACKENDS.plugins() == {"toy": base.Entry("toyplug"), "toy2": base.Entry("toyplug"),
                               "broken": base.Entry("toyplug_absent")}
    assert base.names()[-3:] == ("toy", "toy2", "broken") and base.prefix_owner("toy2") == "toy2"
    with pytest.raises(UsageError, match=r"backend: 'broken': its module toyplug_absent \(entry point group "
                                         r"vnetbench.backends\) does not import: No module named 'toyplug_absent'"):
        topologies.backend("broken")
    monkeypatch.setattr(base.BACKENDS, "_plugins", None)


def test_native_loads_without_the_spec_model():
    import subprocess
    import sys

    probe = ("import sys; from vnetbench import topologies; t = topologies.load('native'); "
             "print(type(t).__name__, t.backend, 'pydantic' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.split() == ["NativeTopology", "local", "False"]


def test_a_yaml_topology_naming_its_backend_loads_only_that_backend(tmp_path):
    # a file whose backend: is given is no other backend's to claim: neither the hosts backend's models nor the
    # plugins' entry points (importlib.metadata over every installed distribution) are read for it
    import subprocess
    import sys

    spec = tmp_path / "t.yaml"
    spec.write_text("name: two\nbackend: netns\nswitches: [{name: s1}]\nvms:\n"
                    "  - {name: vm1, vcpus: 1, memory: 64MB, switch: s1}\n"
                    "  - {name: vm2, vcpus: 1, memory: 64MB, switch: s1}\n")
    probe = ("import sys; from vnetbench import topologies; from vnetbench.topologies import base; "
             "t = topologies.load(sys.argv[1]); "
             "print(t.backend, 'vnetbench.topologies.hosts' in sys.modules, base.BACKENDS._plugins is not None)")
    out = subprocess.run([sys.executable, "-c", probe, str(spec)], capture_output=True, text=True, timeout=60,
                         check=True).stdout
    assert out.split() == ["netns", "False", "False"]
    # a hostfile is still the hosts backend's (it claims it)
    hostfile = tmp_path / "hosts.txt"
    hostfile.write_text("10.3.0.11 slots=1  # vnetbench: switch=s1\n")
    out = subprocess.run([sys.executable, "-c", probe.replace("t.backend", "type(t).__name__"), str(hostfile)],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.split()[:2] == ["HostsTopology", "True"]


def test_a_backend_without_launch_cannot_be_made():
    class Half(base.Backend):
        pass

    with pytest.raises(TypeError, match="launch"):
        Half(None)


def test_the_interface_answers_without_probing():
    native = topologies.realise(topologies.load("native"))
    with native:
        assert native.brought_up is False and native.health() is None
        assert native.describe()["backend"] == "local"
        spec = native.launch(1)
    assert spec.intent.ranks == 1 and spec.mpirun_args[:2] == ["-n", "1"]


def _netns_spec(name="2vm-2vswitch"):
    topology = load_topology(name, host=SMALL)
    lay = plan.layout(topology, SMALL, ipaddress.IPv4Network("10.9.9.0/24"))
    return plan.launch_spec(lay, 2, None, agent="/v/bin/python -m vnetbench.topologies.netns.agent")


def test_an_emulated_topology_states_its_intent():
    intent = _netns_spec().intent
    assert (intent.ranks, intent.hosts, intent.bind) == (2, [("2vm-2vswitch-vm1", 1), ("2vm-2vswitch-vm2", 1)], "none")
    assert (intent.subnet, intent.iface) == ("10.9.9.0/24", "eth0")
    assert intent.agent.endswith("vnetbench.topologies.netns.agent")


def test_the_open_mpi_5_rendering_reads_back_as_the_same_intent():
    spec = _netns_spec()
    again = flavours.intent_from_prrte(prrte_args(spec.intent))
    for key in ("ranks", "hosts", "map_by", "bind", "agent", "subnet", "iface", "mca", "prte"):
        assert getattr(again, key) == getattr(spec.intent, key), key
    assert spec.mca["prte:prte_if_include"] == "10.9.9.0/24" and spec.mca["btl_tcp_if_include"] == "10.9.9.0/24"


def test_every_flavour_carries_out_the_backend_s_intent():
    spec = _netns_spec()
    orte = launch.mpirun_argv(spec, ["./hello"], flavours.OpenMPI4("/usr/bin/mpirun", "4.1.4"))
    assert ["--mca", "oob_tcp_if_include", "10.9.9.0/24"] == orte[orte.index("oob_tcp_if_include") - 1:][:3]
    assert orte[orte.index("plm_rsh_agent") + 1].endswith("vnetbench.topologies.netns.agent")
    prrte = launch.mpirun_argv(spec, ["./hello"], flavours.OpenMPI5("/v/bin/mpirun", "5.0.8"))
    assert prrte == ["/v/bin/mpirun", *spec.mpirun_args, "./hello"]
    env = launch.launcher_env(spec, flavours.Mpich("/usr/bin/mpiexec.hydra", "4.0.2"))
    assert env["FI_TCP_IFACE"] == "eth0" and env["UCX_TLS"] == "self,tcp"


def test_an_intent_without_hosts_is_this_host_alone():
    assert prrte_args(Intent(ranks=4, bind="none", oversubscribe=True, mca={"mpi_yield_when_idle": "1"})) == [
        "-n", "4", "--map-by", ":OVERSUBSCRIBE", "--bind-to", "none", "--mca", "mpi_yield_when_idle", "1"]
