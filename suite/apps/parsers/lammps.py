"""LAMMPS logs: the last run's loop time, speed (timesteps/s, tau/day, atom-steps/s where printed),
atoms, steps and procs, and the MPI task timing breakdown (Pair, Neigh, Comm, Output, Modify, Other).

A log with several ``run`` commands holds one "Loop time" block per run; the last is read (the
production run follows set-up runs). The breakdown's average seconds and share of the loop are
``metrics["breakdown_s"]`` and ``metrics["breakdown_pct"]`` by section.
"""

import re

from vnetbench.kernels.contract import Metric

from . import ParseError, parse_number

LOOP = re.compile(r"^Loop time of (\S+) on (\d+) procs for (\d+) steps with (\d+) atoms", re.M)
PERF = re.compile(r"^Performance: (.*)$", re.M)
SECTIONS = ("Pair", "Bond", "Kspace", "Neigh", "Comm", "Output", "Modify", "Other")
SCALARS = {
    "loop_time_s": Metric("loop_time_s", "loop time", "s", "lower", scaling=True),
    "timesteps_per_s": Metric("timesteps_per_s", "timesteps per second", "1/s", "higher"),
    "tau_per_day": Metric("tau_per_day", "simulated tau per day", "tau/day", "higher"),
    "matom_steps_per_s": Metric("matom_steps_per_s", "atom-steps per second", "M/s", "higher"),
    "atoms": Metric("atoms", "atoms", "", None),
    "steps": Metric("steps", "steps", "", None),
}


def parse(text: str) -> dict:
    loops = list(LOOP.finditer(text))
    if not loops:
        raise ParseError("no 'Loop time of ... on N procs for N steps with N atoms' line: the run did not "
                         "finish a loop")
    loop = loops[-1]
    m = {"loop_time_s": parse_number(loop.group(1)), "procs": int(loop.group(2)), "steps": int(loop.group(3)),
         "atoms": int(loop.group(4))}
    after = text[loop.end():]
    perf = PERF.search(after)
    if perf:
        for value, unit in re.findall(r"([0-9.eE+-]+) (tau/day|ns/day|timesteps/s|Matom-step/s|katom-step/s)",
                                      perf.group(1)):
            key = {"tau/day": "tau_per_day", "ns/day": "ns_per_day", "timesteps/s": "timesteps_per_s",
                   "Matom-step/s": "matom_steps_per_s", "katom-step/s": "katom_steps_per_s"}[unit]
            m[key] = parse_number(value)
    table = re.search(r"^MPI task timing breakdown:\n.*\n-+\n((?:\w+ +\|.*\n?)+)", after, re.M)
    if table:
        m["breakdown_s"], m["breakdown_pct"] = {}, {}
        for line in table.group(1).splitlines():
            cells = [cell.strip() for cell in line.split("|")]
            if len(cells) != 6:
                raise ParseError(f"LAMMPS timing breakdown: damaged row {line.strip()[:80]!r}")
            section = cells[0].lower()
            m["breakdown_s"][section] = parse_number(cells[2])
            m["breakdown_pct"][section] = parse_number(cells[5])
    return m


def metrics(m):
    out = [(metric, m.get(key)) for key, metric in SCALARS.items() if key in m]
    for kind, unit, label in (("breakdown_s", "s", "time in"), ("breakdown_pct", "%", "share of loop in")):
        parts = m.get(kind) if isinstance(m.get(kind), dict) else {}
        for section, value in parts.items():
            out.append((Metric(f"{kind}.{section}", f"{label} {section}", unit, "lower" if unit == "s" else None),
                        value))
    return out


def table(names):
    return [name for name in ("loop_time_s", "timesteps_per_s", "breakdown_s.comm") if name in names]


def headline(m):
    return [(column, m.get(key)) for column, key in (("loop (s)", "loop_time_s"), ("steps/s", "timesteps_per_s"),
                                                     ("atoms", "atoms")) if key in m]
