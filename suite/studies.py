"""The study's experiments as sweeps, scaled to this machine: ``quick`` (the default), ``namd``, ``stream``.

The study ran 4, 8 and 16 processes on a host with 16 logical cpus: a quarter, a half and
all of them. Here rank counts keep those fractions of the cpus this process may use, with
at least 2 ranks (a halo needs neighbours) and a largest count of at least 4, so that every
VM of a 4-VM topology gets a rank. Memory sizes are the kernels' own defaults, which are
already sized to the machine (STREAM arrays 4x the last-level cache per rank).
"""

from dataclasses import dataclass, field
from pathlib import Path

from .mpi import usable_cpus

SIX = ["native", "1vm", "2vm-1vswitch", "2vm-2vswitch", "4vm-1vswitch", "4vm-4vswitch"]


@dataclass(frozen=True)
class Study:
    name: str
    description: str
    kernel: str
    kernel_argv: list[str]
    topologies: list[str]
    ranks: list[int]
    repeat: int
    notes: list[str] = field(default_factory=list)


def study_ranks(cpus: int) -> list[int]:
    """The study's 4/8/16 processes on 16 logical cpus, as fractions of ``cpus``."""
    return sorted({max(2, cpus // 4), max(2, cpus // 2), max(4, cpus)})


def powers_of_two(low: int, high: int) -> list[int]:
    out, n = [], 1
    while n <= max(low, high):
        if n >= low:
            out.append(n)
        n *= 2
    return out


def _scaling_note(cpus: int, ranks: list[int]) -> str:
    over = [n for n in ranks if n > cpus]
    text = (f"rank counts {','.join(map(str, ranks))} scaled to the {cpus} logical cpu(s) this process may use "
            "(the study: 4/8/16 processes on 16 logical cpus, a quarter, a half and all of them)")
    if over:
        text += f"; {','.join(map(str, over))} ranks oversubscribe the cpus and yield when idle"
    return text


def _halo_available() -> bool:
    try:
        from . import kernels

        kernels.get("halo")
        return True
    except ImportError:  # the halo kernel is not part of this installation
        return False


def quick(cpus: int) -> Study:
    ranks = study_ranks(cpus)[-2:]
    topologies = ["native", "2vm-1vswitch", "2vm-2vswitch"]
    note = _scaling_note(cpus, ranks)
    if not _halo_available():
        return Study("quick", "allreduce over one and two virtual switches (no halo kernel here)", "allreduce",
                     ["--max-size", "65536", "--iterations", "200", "--large-iterations", "20"], topologies,
                     ranks, 2, [note, "the halo kernel is not installed: the quick sweep uses allreduce"])
    return Study("quick", "a short halo sweep: native against two VMs on one and on two virtual switches",
                 "halo", ["--steps", "100", "--global", "48,48,48"], topologies, ranks, 2,
                 [note, "a small grid and 100 steps, so that it finishes in a few minutes; "
                        "--study namd runs the study's size"])


def namd(cpus: int) -> Study:
    ranks = study_ranks(cpus)
    return Study("namd", "the NAMD study: halo on the six configurations x process counts x 3 repetitions",
                 "halo", [], SIX, ranks, 3,
                 [_scaling_note(cpus, ranks), "halo's default grid, about a million cells, like the study's "
                  "1,066,628 atoms; 4-VM configurations need at least 4 ranks"])


def numa_nodes(root: Path = Path("/sys/devices/system/node")) -> int:
    try:
        return max(1, len([p for p in root.iterdir() if p.name.startswith("node") and p.name[4:].isdigit()]))
    except OSError:
        return 1


def stream(cpus: int) -> Study:
    ranks = powers_of_two(1, cpus)
    notes = [f"ranks 1 to {cpus} in powers of two, as the study's 1 to 16 threads on 16 logical cpus; "
             "one rank per thread, bandwidths summed over ranks",
             "2vm-1vswitch places each of its two VMs on the NUMA node with the most idle cpus; "
             "it needs 2 ranks or more"]
    if numa_nodes() < 2:
        notes.append("this machine has one NUMA node: both VMs share it (the study put each VM on its own)")
    return Study("stream", "the STREAM study: native against two VMs, each on its own NUMA node, summed",
                 "stream", [], ["native", "2vm-1vswitch"], ranks, 3, notes)


STUDIES = {"quick": quick, "namd": namd, "stream": stream}


def get(name: str, cpus: int | None = None) -> Study:
    from .errors import UsageError

    if name not in STUDIES:
        raise UsageError(f"--study: unknown study {name!r}; choose from {', '.join(STUDIES)}")
    return STUDIES[name](cpus or usable_cpus())
