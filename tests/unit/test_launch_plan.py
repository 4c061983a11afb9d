"""The planned mpirun argv for the native topology, and kernel option parsing. No MPI is started."""

import json

import pytest

from vnetbench import kernels, mpi
from vnetbench.engine import launch
from vnetbench.workloads import kernel as kernel_workload
from vnetbench.core.errors import UsageError
from vnetbench.topologies.launch.binding import binding
from vnetbench.topologies.local import LocalRealised
from vnetbench.topologies.model.spec import load_topology


def test_ranks_that_fit_are_bound_to_cores():
    mca, notes = binding(2, 2, None)
    assert notes["bind"] == "core"
    assert mca == {}
    assert notes["oversubscribed"] is False
    spec = LocalRealised(load_topology("native")).launch(1)
    assert spec.mpirun_args[spec.mpirun_args.index("--bind-to") + 1] == "core"


def test_oversubscription_unbinds_and_yields():
    mca, notes = binding(4, 2, None)
    assert notes["bind"] == "none"
    assert mca == {"mpi_yield_when_idle": "1"}
    assert notes["oversubscribed"] is True and "yield" in notes["yield_when_idle"]
    argv = LocalRealised(load_topology("native")).launch(8).mpirun_args
    assert argv[argv.index("--map-by") + 1] == ":OVERSUBSCRIBE" and argv[argv.index("--bind-to") + 1] == "none"


def test_core_binding_beyond_cores_is_refused():
    with pytest.raises(UsageError, match="--bind: core binding needs ranks <= cores"):
        binding(4, 2, "core")


def test_native_launch_argv_is_an_argv_list():
    realised = LocalRealised(load_topology("native"))
    spec = realised.launch(8)
    program = kernel_workload.program("halo", {"steps": 3}, {"run_id": "x"})
    argv = launch.mpirun_argv(spec, program)
    assert argv[0] == str(mpi.mpirun())
    assert argv[1:3] == ["-n", "8"]
    assert ["--mca", "mpi_yield_when_idle", "1"] == argv[argv.index("mpi_yield_when_idle") - 1:][:3]
    assert argv[argv.index("-m") + 1:argv.index("-m") + 3] == ["vnetbench.kernels", "halo"]
    assert json.loads(argv[argv.index("--params") + 1]) == {"steps": 3}


def test_too_many_ranks_for_one_host_is_refused():
    with pytest.raises(UsageError, match="--ranks: 5000 is beyond"):
        LocalRealised(load_topology("native")).launch(5000)


def test_kernel_options_parse_with_defaults():
    params = kernels.parse_params("pingpong", ["--max-size", "1024", "--validate"])
    assert params["max_size"] == 1024 and params["validate"] is True
    assert params["window"] == 64
    # windows above 8 KiB apart from the small sizes' (calibrate: 64 small, 8 large): the buffer holds the larger
    from vnetbench.kernels import pingpong

    split = kernels.parse_params("pingpong", ["--max-size", "1048576", "--large-window", "8", "--bidirectional"])
    assert split["bidirectional"] is True
    assert [pingpong._window(split, s) for s in (8192, 16384)] == [64, 8]
    assert pingpong._buffer_bytes(split) == 8 << 20


@pytest.mark.parametrize("argv, phrase", [
    (["--max-size", "1000"], "--max-size: 1000 is not allowed; use a power of two"),
    (["--min-size", "64", "--max-size", "8"], "--min-size: 64 is larger than --max-size 8"),
    (["--window", "0"], "argument --window: 0 is out of range; allowed: 1 to 4096"),
    (["--iterations", "lots"], "argument --iterations: 'lots' is not a whole number"),
    (["--max-size", "4194304", "--window", "8", "--large-window", "4096"],
     "--window: 8 (--large-window 4096) x --max-size 4194304 bytes needs 16384 MiB per rank"),
    (["--frobnicate"], "--frobnicate: not an option of kernel pingpong"),
])
def test_bad_kernel_options_name_the_option(argv, phrase):
    with pytest.raises(UsageError) as info:
        params = kernels.parse_params("pingpong", argv)
        kernels.get("pingpong").check(params, 2)
    assert phrase in str(info.value)


def test_unknown_kernel_lists_the_known_ones():
    with pytest.raises(UsageError, match="kernel: unknown kernel 'nbody'; choose from stream, halo, md, pingpong, allreduce"):
        kernels.get("nbody")


def test_record_lines_are_recognised_and_other_output_is_not():
    assert launch._is_record('{"schema_version": 1, "kernel": "halo"}') == {"schema_version": 1, "kernel": "halo"}
    assert launch._is_record('{"schema_version": 99, "kernel": "halo"}') is None
    assert launch._is_record("hello {") is None
    assert launch._is_record("{not json") is None


def test_native_fast_path_describes_native_exactly_as_the_spec_model_does():
    from vnetbench import topologies
    from vnetbench.topologies.model.spec import load_topology

    fast = topologies.load("native")
    assert fast.to_dict() == load_topology("native").to_dict()
    assert (fast.name, fast.backend) == ("native", "local")


def test_ranks_on_this_host_leave_out_libfabric_s_btl_unless_the_user_chose_the_btls(monkeypatch):
    monkeypatch.delenv("OMPI_MCA_btl", raising=False)
    argv = LocalRealised(load_topology("native")).launch(2).mpirun_args
    assert argv[argv.index("btl") - 1:argv.index("btl") + 2] == ["--mca", "btl", "^ofi,tcp"]
    monkeypatch.setenv("OMPI_MCA_btl", "self,tcp")
    assert "btl" not in LocalRealised(load_topology("native")).launch(2).mpirun_args
