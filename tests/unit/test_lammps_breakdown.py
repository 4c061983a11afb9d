"""benchmarks/md_common.py reads LAMMPS's timing breakdown (the slowest rank's seconds per section) and
md_fidelity.py puts the two codes' communication side by side from it."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from md_common import LOOP, breakdown  # noqa: E402
from md_fidelity import overheads  # noqa: E402

# Debian's lmp (LAMMPS 20220623), in.lj at 2 ranks under Open MPI 4.1, as printed on this machine
OUTPUT = """\
Loop time of 6.87048 on 2 procs for 100 steps with 256000 atoms

Performance: 6287.769 tau/day, 14.555 timesteps/s
98.8% CPU use with 2 MPI tasks x 1 OpenMP threads

MPI task timing breakdown:
Section |  min time  |  avg time  |  max time  |%varavg| %total
---------------------------------------------------------------
Pair    | 5.2268     | 5.3051     | 5.3835     |   3.4 | 77.22
Neigh   | 0.84689    | 0.8661     | 0.88532    |   2.1 | 12.61
Comm    | 0.48491    | 0.54372    | 0.60252    |   8.0 |  7.91
Output  | 0.0010048  | 0.0012297  | 0.0014546  |   0.6 |  0.02
Modify  | 0.12988    | 0.13005    | 0.13022    |   0.0 |  1.89
Other   |            | 0.02426    |            |       |  0.35

Nlocal:        128000.0 ave      128003 max      127997 min
"""


def test_each_section_is_read_at_its_slowest_rank():
    after = OUTPUT[LOOP.search(OUTPUT).end():]
    assert breakdown(after) == {"pair": 5.3835, "neigh": 0.88532, "comm": 0.60252, "output": 0.0014546,
                                "modify": 0.13022}


def test_no_breakdown_is_no_sections():
    assert breakdown("Loop time of 1.0 on 1 procs for 10 steps with 32000 atoms\n") == {}


def run(loop_s, comm, side):
    if side == "lammps":
        return {"loop_s": loop_s, "sections_s": {"pair": loop_s - comm, "comm": comm}}
    # md's communication is its ghost exchange and its migration together, as in LAMMPS's Comm section
    return {"loop_s": loop_s, "phases_s": {"force_s": loop_s - comm, "comm_s": 0.8 * comm, "migrate_s": 0.2 * comm}}


def test_communication_added_is_paired_within_each_repetition():
    # per repetition (native loop, comm; topology loop, comm): LAMMPS's comm grows by 0.6, 0.7, 0.5 s; md's
    # (ghost exchange + migration) by 0.7, 0.8, 0.6 s
    lammps = [((6.0, 0.3), (6.6, 0.9)), ((6.2, 0.2), (6.9, 0.9)), ((5.9, 0.4), (6.4, 0.9))]
    md = [((5.5, 0.3), (6.2, 1.0)), ((5.6, 0.3), (6.4, 1.1)), ((5.4, 0.2), (6.0, 0.8))]
    samples = {"lj": {"native": {"lammps": [run(*a, "lammps") for a, _ in lammps],
                                 "md": [run(*a, "md") for a, _ in md]},
                      "2vm-2vswitch": {"lammps": [run(*b, "lammps") for _, b in lammps],
                                       "md": [run(*b, "md") for _, b in md]}}}
    (row,) = overheads(samples, ["lj"], ["native", "2vm-2vswitch"])
    assert abs(row["lammps_comm_added_s"] - 0.6) < 1e-9
    assert abs(row["md_comm_added_s"] - 0.7) < 1e-9


def test_runs_that_did_not_say_give_no_communication_figure():
    plain = {"lj": {where: {side: [{"loop_s": 6.0 if where == "native" else 6.5}] * 3 for side in ("md", "lammps")}
                    for where in ("native", "2vm-2vswitch")}}
    (row,) = overheads(plain, ["lj"], ["native", "2vm-2vswitch"])
    assert row["lammps_comm_added_s"] is None and row["md_comm_added_s"] is None
    assert abs(row["md_added_s"] - 0.5) < 1e-9
