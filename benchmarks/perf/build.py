"""Compiling the C references with the virtual environment's mpicc into benchmarks/build/."""

import subprocess
from pathlib import Path

from vnetbench import mpi
from vnetbench.core.errors import LaunchError

from . import HarnessError

HERE = Path(__file__).resolve().parent.parent
SOURCES = HERE / "c"
BUILD = HERE / "build"
REFERENCES = ("stream_ref", "pingpong_ref", "halo_ref")
# The C gets what numba's LLVM gets: code for this CPU (-march=native), and floating point
# that may not trap (LLVM's default; gcc's -ftrapping-math kept it from if-converting the
# clamps in halo's unpack-and-check loop: 91 us a step against numba's 65, 77 without it).
# No fast-math: results stay bit-identical.
FLAGS = ["-O3", "-march=native", "-fno-trapping-math", "-Wall", "-Wextra"]


def compile_all(out: Path = BUILD) -> dict[str, Path]:
    """name -> binary, every reference compiled afresh (a second or two) with the same flags."""
    try:
        mpicc = str(mpi.mpicc())
    except LaunchError as exc:
        raise HarnessError(str(exc)) from exc
    out.mkdir(parents=True, exist_ok=True)
    binaries = {}
    for name in REFERENCES:
        binary = out / name
        argv = [mpicc, *FLAGS, "-o", str(binary), str(SOURCES / f"{name}.c"), "-lm"]
        done = subprocess.run(argv, capture_output=True, text=True, env=mpi.run_env())
        if done.returncode != 0:
            raise HarnessError(f"{' '.join(argv)} failed:\n{done.stderr.strip()}")
        binaries[name] = binary
    return binaries


def compiler_version() -> str:
    try:
        done = subprocess.run([str(mpi.mpicc()), "--version"], capture_output=True, text=True, env=mpi.run_env())
    except (OSError, LaunchError):
        return "unknown"
    return (done.stdout.splitlines() or ["unknown"])[0]
