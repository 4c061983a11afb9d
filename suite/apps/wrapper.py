"""The rank side of an application run: note where this rank is, from inside it, then become the program.

``python -m vnetbench.apps.wrapper [--guard SHIM] [--env NAME=VALUE ...] -- PROGRAM [ARGS]``: writes this rank's
placement (host, network namespace, addresses, cpus) to the job's folder and tells the job's watch that the
rank started, then execs PROGRAM in the same process, so that the pid the watch follows is the program's.
With --guard, PROGRAM runs with the world-size shim preloaded (worldsize.py), writing into the job's folder;
with --profile CAP:SHIM also with the MPI profiler's interposer (vnetbench.profile.preload), after the guard.
"""

import json
import os
import sys

PLACEMENT_DIR = "placement"


def rank_from_env() -> int:
    for var in ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"):
        if var in os.environ:
            return int(os.environ[var])
    return 0


def note(rank: int) -> None:
    from vnetbench.core.rundir import JOB_ENV as ENV
    from vnetbench.kernels.__main__ import mark
    from vnetbench.kernels.placement import here

    folder = os.environ.get(ENV)
    if not folder or not os.path.isdir(folder):
        return  # a direct launch: nobody to tell
    mark(rank)
    os.makedirs(os.path.join(folder, PLACEMENT_DIR), exist_ok=True)
    path = os.path.join(folder, PLACEMENT_DIR, f"{rank}.json")
    with open(f"{path}.tmp", "w") as handle:
        json.dump(here(rank), handle)
    os.replace(f"{path}.tmp", path)


def preload(shim: str) -> None:
    """The program's environment: ``shim`` preloaded (after any preload already set), writing beside the
    placements. Nothing when this is no job of vnetbench's or the shim is not on this rank's host."""
    from vnetbench.core.rundir import JOB_ENV as ENV

    from .worldsize import DIR_ENV, FOLDER

    folder = os.environ.get(ENV)
    if not folder or not os.path.isdir(folder) or not os.path.isfile(shim):
        return
    os.makedirs(os.path.join(folder, FOLDER), exist_ok=True)
    os.environ[DIR_ENV] = os.path.join(folder, FOLDER)
    already = os.environ.get("LD_PRELOAD", "").strip()
    os.environ["LD_PRELOAD"] = f"{already}:{shim}" if already else shim


def main(argv: list[str]) -> int:
    guard = profile = None
    if argv[:1] == ["--guard"] and len(argv) > 1:
        guard, argv = argv[1], argv[2:]
    if argv[:1] == ["--profile"] and len(argv) > 1:
        profile, argv = argv[1], argv[2:]
    # the definition's env goes by argv: every launcher and backend carries argv to the rank unchanged
    while argv[:1] == ["--env"] and len(argv) > 1:
        name, _, value = argv[1].partition("=")
        os.environ[name] = value
        argv = argv[2:]
    argv = argv[1:] if argv[:1] == ["--"] else argv
    if not argv:
        print("vnetbench.apps.wrapper: error: PROGRAM: missing", file=sys.stderr)
        return 2
    try:
        note(rank_from_env())
    except OSError as exc:  # the record then lacks this rank's placement and says so; the run goes on
        print(f"vnetbench.apps.wrapper: cannot record placement: {exc}", file=sys.stderr)
    if guard:
        try:
            preload(guard)
        except OSError as exc:  # the record then says the world was not observed; the run goes on
            print(f"vnetbench.apps.wrapper: cannot set up the world-size guard: {exc}", file=sys.stderr)
    if profile:
        from vnetbench.profile import preload as profiler

        try:
            profiler.apply(profile)  # after the guard: the guard's MPI_Init calls ours, ours the library's
        except OSError as exc:  # the record then says which ranks wrote no profile; the run goes on
            print(f"vnetbench.apps.wrapper: cannot set up the profiler: {exc}", file=sys.stderr)
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        print(f"vnetbench.apps.wrapper: cannot start {argv[0]}: {exc.strerror}", file=sys.stderr)
        return 127


def command(program: list[str], env: dict[str, str], guard: str | None = None, profile: str | None = None) -> list[str]:
    """The rank-side argv that runs ``program`` with ``env`` added, through this wrapper (with the
    world-size shim at ``guard`` preloaded, when given, and the profiler ``profile`` names after it)."""
    pairs = [part for name, value in sorted(env.items()) for part in ("--env", f"{name}={value}")]
    return [sys.executable, "-m", "vnetbench.apps.wrapper", *(["--guard", guard] if guard else []),
            *(["--profile", profile] if profile else []), *pairs, "--", *program]


def read_placement(job_dir, ranks: int) -> list[dict]:
    """The placements the ranks wrote, in rank order (missing ranks left out)."""
    out = []
    for rank in range(ranks):
        try:
            with open(os.path.join(job_dir, PLACEMENT_DIR, f"{rank}.json")) as handle:
                out.append(json.load(handle))
        except (OSError, ValueError):
            continue
    return out


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
