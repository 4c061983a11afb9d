"""The study's experiments as sweeps, scaled to this machine: ``quick`` (the default), ``namd``, ``stream``.

The study ran 4, 8 and 16 processes on a host with 16 logical cpus: a quarter, a half and
all of them. Here rank counts keep those fractions of the cpus this process may use, with
at least 2 ranks (a halo needs neighbours) and a largest count of at least 4, so that every
VM of a 4-VM topology gets a rank. Memory sizes are the kernels' own defaults, which are
already sized to the machine (STREAM arrays 4x the last-level cache per rank).
"""

from dataclasses import dataclass, field

from vnetbench.mpi import usable_cpus

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
    warmup: int = 0  # unrecorded runs of each configuration before its measured ones (sweep --warmup)


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


def _kernel_available(name: str) -> bool:
    try:
        from vnetbench import kernels

        kernels.get(name)
        return True
    except ImportError:  # the kernel is not part of this installation
        return False


# md at the stmv preset on this project's 2-cpu development machine (2 ranks, native): 1.6-1.8 s per
# step and 10-12 s of start-up per run (launch, lattice, ghosts, the first lists and forces), measured
# while other agents kept the machine about half busy (a run at load 3.7 took 3.8 s per step). The
# study's 500 steps are scaled down so that its runs fit NAMD_BUDGET_S; the step count does not
# change an overhead (a ratio of step-loop times). With PME (stmv's default since md has it) a step costs more:
# the real-space Coulomb term makes a pair 1.3x dearer (36 against 28 ns, measured) and a PME evaluation of the
# 160^3 grid took 1.5 s at one rank, every 2nd step: about 2.5 s per step at 2 ranks, estimated from those parts.
# A whole run (`run md --system stmv --steps 10`, 2 ranks) took 4.56 s per step at load 3.4, where the short-range
# md took 3.8 at load 3.7: 1.2x, so about 2 s on a half-busy machine; 2.5 leaves room.
STMV_STEP_S = 2.5
STMV_SETUP_S = 12.0
NAMD_BUDGET_S = 15 * 60
STUDY_STEPS = 500


def namd_ranks(cpus: int) -> list[int]:
    """The study's rank counts that fit the cpus (an oversubscribed host is no baseline: N/A)."""
    fit = [n for n in study_ranks(cpus) if n <= cpus]
    return fit or [max(1, cpus)]


def namd_runs(cpus: int, ranks: list[int], repeat: int) -> float:
    """Runs of the namd study in units of a native run: a 1vm run has half the cpus (the study's
    8 vCPUs of 16), so its ranks take twice as long once they outnumber them."""
    total = 0.0
    for topology in SIX:
        for n in ranks:
            if n >= _vms(topology):
                total += 2.0 if topology == "1vm" and n > max(1, cpus // 2) else 1.0
    return total * repeat


def namd_steps(cpus: int, runs: float) -> int:
    """md steps per run (a multiple of 10, 10 to 500, so of stmv's --pme-every 2) so that ``runs`` fit the budget
    on ``cpus``."""
    per_run = NAMD_BUDGET_S / max(1.0, runs) - STMV_SETUP_S
    step = STMV_STEP_S * 2 / max(2, cpus)  # the work divides over the cpus, at best
    return max(10, min(STUDY_STEPS, int(per_run / step) // 10 * 10))


def _vms(topology: str) -> int:
    return {"2vm-1vswitch": 2, "2vm-2vswitch": 2, "4vm-1vswitch": 4, "4vm-4vswitch": 4}.get(topology, 1)


def _quick(cpus: int) -> Study:
    ranks = study_ranks(cpus)[-2:]
    topologies = ["native", "2vm-1vswitch", "2vm-2vswitch"]
    note = _scaling_note(cpus, ranks)
    if not _kernel_available("md"):
        return Study("quick", "allreduce over one and two virtual switches (no md kernel here)", "allreduce",
                     ["--max-size", "65536", "--iterations", "200", "--large-iterations", "20"], topologies,
                     ranks, 2, [note, "the md kernel is not installed: the quick sweep uses allreduce"])
    return Study("quick", "a short md sweep: native against two VMs on one and on two virtual switches",
                 "md", ["--cells", "20", "--steps", "100"], topologies, ranks, 2,
                 [note, "md on LAMMPS's in.lj at 20x20x20 fcc cells (32,000 atoms), 100 steps, so that it "
                        "finishes in about a minute; --study namd runs the STMV-sized system",
                  "configurations alternate, each after one warm-up run that is not stored"], warmup=1)


def _namd(cpus: int) -> Study:
    ranks = namd_ranks(cpus)
    runs = namd_runs(cpus, ranks, 3)
    steps = namd_steps(cpus, runs)
    notes = [_scaling_note(cpus, ranks)]
    if max(ranks) < 4:
        notes.append(f"rank counts above {cpus} are left out: the host would be oversubscribed, and an "
                     "oversubscribed baseline compares nothing (N/A); so the 4-VM configurations, which need "
                     "4 ranks, are skipped on this host")
    notes += ["md --system stmv: 1,064,960 atoms (the study's STMV has 1,066,628) with a 5.8 sigma cutoff, "
              "about 700 neighbours per atom as NAMD's 12 A cutoff at biomolecular density, so each step's "
              "work per byte exchanged is the study's rather than a short-cutoff liquid's",
              "with PME electrostatics, as NAMD's STMV benchmark: charges on the lattice, real-space Ewald in the "
              "pair loop and a 160x160x160 grid whose distributed FFT's all-to-all transposes run every 2nd step "
              "(the benchmark's fullElectFrequency 2)",
              f"{steps} steps instead of the study's {STUDY_STEPS}: scaled so that the runs finish in about "
              f"{NAMD_BUDGET_S // 60} minutes on {cpus} cpu(s) (md takes about {STMV_STEP_S:g} s per step on "
              "2 cpus, plus its set-up); overheads are ratios of step-loop times, which the step count "
              "does not change",
              "a cell whose ranks outnumber their VM's vCPUs (1vm here) is shown as N/A rather than compared",
              "halo stays available (--kernel halo) as the communication-pattern kernel: it moves whole "
              "boundary layers every step and is tens of times more network-bound than MD"]
    return Study("namd", "the NAMD study: md at STMV size on the six configurations x process counts x 3 "
                 "repetitions", "md", ["--system", "stmv", "--steps", str(steps)], SIX, ranks, 3, notes)


def numa_nodes() -> int:
    from vnetbench.topologies.thishost.host import node_cpus

    return len(node_cpus()) or 1


def _stream(cpus: int) -> Study:
    ranks = powers_of_two(1, cpus)
    notes = [f"ranks 1 to {cpus} in powers of two, as the study's 1 to 16 threads on 16 logical cpus; "
             "one rank per thread, bandwidths summed over ranks",
             "2vm-1vswitch places each of its two VMs on the NUMA node with the most idle cpus; "
             "it needs 2 ranks or more"]
    if numa_nodes() < 2:
        notes.append("this machine has one NUMA node: both VMs share it (the study put each VM on its own)")
    return Study("stream", "the STREAM study: native against two VMs, each on its own NUMA node, summed",
                 "stream", [], ["native", "2vm-1vswitch"], ranks, 3, notes)


STUDIES = {"quick": _quick, "namd": _namd, "stream": _stream}


def get(name: str, cpus: int | None = None) -> Study:
    from vnetbench.core.errors import UsageError

    if name not in STUDIES:
        raise UsageError(f"--study: unknown study {name!r}; choose from {', '.join(STUDIES)}")
    return STUDIES[name](cpus or usable_cpus())
