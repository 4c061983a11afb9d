"""The rank side of ``--profile``: the interposer preloaded into the program's environment, then the program.

``python -m vnetbench.profile.preload CAP:SHIM -- PROGRAM [ARGS]`` (a kernel's rank; an application's rank gets
the same from the apps wrapper's ``--profile``) execs PROGRAM in the same process (the job's watch follows its
pid) with SHIM appended to LD_PRELOAD - after any shim already there: the world-size guard's MPI_Init must come
first, ours calls the library's PMPI_Init - and the folder it writes into, ``profile`` in the job's folder.
CAP > 0 also keeps a trace of at most CAP bytes of events per rank.
"""

import os
import sys

DIR_ENV = "VNETBENCH_PROFILE_DIR"  # interposer.c reads these
TRACE_ENV = "VNETBENCH_PROFILE_TRACE_BYTES"
FOLDER = "profile"  # in the job's folder


def apply(token: str, environ=None) -> None:
    """Set ``environ`` (os.environ) up for the interposer ``token`` names (``Profiling.token``). Nothing when
    this is no job of vnetbench's or the interposer is not on this rank's host."""
    from vnetbench.core.rundir import JOB_ENV

    environ = os.environ if environ is None else environ
    cap, _, shim = token.partition(":")
    folder = environ.get(JOB_ENV)
    if not folder or not os.path.isdir(folder) or not os.path.isfile(shim):
        return
    os.makedirs(os.path.join(folder, FOLDER), exist_ok=True)
    environ[DIR_ENV] = os.path.join(folder, FOLDER)
    if cap.isdigit() and int(cap) > 0:
        environ[TRACE_ENV] = cap
    already = [part for part in environ.get("LD_PRELOAD", "").replace(" ", ":").split(":") if part]
    environ["LD_PRELOAD"] = ":".join([*already, shim])


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m vnetbench.profile.preload CAP:SHIM -- PROGRAM [ARGS]", file=sys.stderr)
        return 2
    try:
        apply(argv[0])
    except OSError as exc:  # the record then says which ranks wrote no profile; the run goes on
        print(f"vnetbench.profile.preload: cannot set up the profiler: {exc}", file=sys.stderr)
    try:
        os.execvp(argv[2], argv[2:])
    except OSError as exc:
        print(f"vnetbench.profile.preload: cannot start {argv[2]}: {exc.strerror}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
