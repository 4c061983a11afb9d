"""md's rank side: a rank's box and atoms, the staged ghost exchange, migration, and the step loop.

Imported only by ranks (through ``md.run``): it needs MPI and numba. The physics it shares with the
launcher's ``md`` comes from ``_md_physics``, which imports neither.

What crosses MPI is what LAMMPS's CommBrick sends, message for message: per step one Sendrecv per swap
with another rank for positions, and one back for ghost forces (``--newton on``); a swap with this
rank itself (an axis the grid does not split) is a copy in memory, as in LAMMPS and miniMD; at a
rebuild a count then the atoms for each migration and each border swap. A copy costs the same on
every topology while a message's cost is what a topology changes, so a message too many (or a copy
sent as one) would move md's overhead away from an MD code's.
"""

import math
from dataclasses import dataclass
from time import perf_counter as clock

import numpy as np

from . import _md_loops as loops
from ._md_physics import (CORRUPT_SHIFT, ENERGY_DRIFT_BOUND, MOMENTUM_BOUND, MOMENTUM_BOUND_PME, box_cells,
                          charges, electrostatics, ewald_alpha, lattice_constant, neighbours_within, physics,
                          pme_every, pme_grid, pme_spacing, temperature)


class Box:
    """What one rank derives from geometry alone: the periodic box, its own part, its neighbours.
    No MPI here, so tests can lay out every rank of a grid in one process."""

    def __init__(self, params, dims, coords):
        self.dims, self.coords = list(dims), list(coords)
        self.cells = np.array(box_cells(params, dims), dtype=np.int64)
        self.a = lattice_constant(params["density"])
        self.length = self.cells * self.a
        self.lo = np.array([self.bounds(axis, c)[0] for axis, c in enumerate(coords)])
        self.hi = np.array([self.bounds(axis, c)[1] for axis, c in enumerate(coords)])
        self.cutoff = physics(params)["cutoff"]
        self.reach = self.cutoff + params["skin"]
        self.natoms = 4 * int(self.cells.prod())

    def bounds(self, axis: int, coord: int) -> tuple[float, float]:
        """[lo, hi) along ``axis`` of the box at grid coordinate ``coord`` (periodic: any integer).
        Neighbouring boxes compute a shared face with the same expression, so they agree on it to
        the last bit; the outer faces are exactly 0 and L."""
        parts, length = self.dims[axis], float(self.length[axis])
        c = coord % parts
        return (0.0 if c == 0 else length * c / parts), (length if c == parts - 1 else length * (c + 1) / parts)

    def ghost_shift(self, axis: int, side: int) -> float:
        """The periodic image a ghost sent towards ``side`` (-1 down, +1 up) along ``axis`` takes."""
        if side < 0 and self.coords[axis] == 0:
            return float(self.length[axis])
        if side > 0 and self.coords[axis] == self.dims[axis] - 1:
            return -float(self.length[axis])
        return 0.0


@dataclass
class Swap:
    """One of the six staged messages: atoms ``sendlist`` go to ``dest``; ``nrecv`` come from ``src``
    into rows ``first:first + nrecv``."""

    axis: int
    dest: int
    src: int
    tag: int
    sendlist: np.ndarray
    shift: float
    first: int
    nrecv: int


class Atoms:
    """A rank's atoms (local first, then ghosts) and the messages that keep the ghosts current."""

    def __init__(self, cart, box, params, MPI):
        self.cart, self.box, self.MPI = cart, box, MPI
        self.me = cart.Get_rank()
        self.dt = params["dt"]
        self.newton = params.get("newton", "on") == "on"
        self.bad = None  # (step, text) of the first message whose checksum did not match
        self.checked = 0  # messages whose checksum was checked
        self.shifts = [cart.Shift(axis, 1) for axis in range(3)]  # (below, above) per axis
        self.x, self.v, self.ids = loops.lattice(box.cells, box.a, box.lo, box.hi, params["seed"], loops.BASIS)
        self.nlocal = self.x.shape[0]
        self.f = np.zeros_like(self.x)
        self.swaps: list[Swap] = []
        self.sendbuf, self.recvbuf = np.empty(0), np.empty(0)
        self.counts = np.zeros(2, dtype=np.int64), np.zeros(2, dtype=np.int64)  # a count message, out and in
        self.neigh = np.empty(0, dtype=np.int32)
        self.numneigh = self.start = None
        self.migrated = self.wrapped = 0  # atoms sent to another box, and atoms wrapped into the periodic box
        self.strays = 0  # atoms that arrived outside this box: they moved more than a box between rebuilds
        self.corrupt_at = None  # the step at which this rank corrupts one message (--corrupt-step)
        # charges (--electrostatics pme): an atom's follows from its basis site, id % 4; ghosts' come with
        # their positions in the border messages, as LAMMPS's atom_style charge sends them
        self.charged = electrostatics(params) == "pme"
        self.basis_q = np.array(charges(params))
        self.q = self.basis_q[self.ids % 4] if self.charged else np.zeros(0)
        self.alpha = ewald_alpha(box.cutoff, params.get("ewald_tolerance") or 1e-5) if self.charged else 0.0
        self.tables = loops.coul_tables(self.alpha, box.cutoff) if self.charged else None
        self._thermalise(params["temperature"])

    def _thermalise(self, target):
        # zero the total momentum, then scale to the temperature: LAMMPS's "velocity create"
        total = np.empty(4)
        self.cart.Allreduce(np.array([*self.v.sum(axis=0), self.nlocal], dtype=np.float64), total)
        self.v -= total[:3] / self.box.natoms
        ke = self.cart.allreduce(float(0.5 * (self.v * self.v).sum()))
        now = temperature(ke, self.box.natoms)
        self.v *= np.sqrt(target / now) if now > 0 else 0.0
        if int(total[3]) != self.box.natoms:
            raise RuntimeError(f"the lattice gave {int(total[3])} atoms, not {self.box.natoms}")

    def _buffers(self, doubles):
        if self.sendbuf.size < doubles:
            self.sendbuf = np.empty(int(doubles * 1.25) + 64)
        if self.recvbuf.size < doubles:
            self.recvbuf = np.empty(int(doubles * 1.25) + 64)

    def _exchange(self, values, dest, nrecv, src, tag, step, what):
        """``sendbuf[:values]`` with its checksum in the same message to ``dest``; ``recvbuf[:nrecv]`` from
        ``src``, its checksum checked: the exact sum of what was packed, so any changed bit shows."""
        buf = self.sendbuf[:values + 1]
        buf[values] = loops.checksum(buf, values)
        if step == self.corrupt_at and values and what == "positions":
            buf[0] += CORRUPT_SHIFT  # after the checksum, as a fault on the way would be
            self.corrupt_at = None  # one message only
        into = self.recvbuf[:nrecv + 1]
        self.cart.Sendrecv([buf, self.MPI.DOUBLE], dest, tag, [into, self.MPI.DOUBLE], src, tag)
        self.checked += 1
        if into[nrecv] != loops.checksum(into, nrecv) and self.bad is None:
            self.bad = (step, f"{what} from rank {src} at step {step}: checksum differs")
        return into

    def _count(self, count, dest, src, tag, step, what) -> int:
        """``count`` to ``dest`` and the count from ``src`` (LAMMPS's MPI_Sendrecv of one int before a
        message whose size the receiver must know), with its check value (the bitwise complement)."""
        out, got = self.counts
        out[0], out[1] = count, ~count
        self.cart.Sendrecv([out, self.MPI.INT64_T], dest, tag, [got, self.MPI.INT64_T], src, tag)
        self.checked += 1
        if got[1] != ~got[0] and self.bad is None:
            self.bad = (step, f"{what} count from rank {src} at step {step}: checksum differs")
        return int(got[0])

    def send(self, swap, step):
        """Positions of one swap's atoms to its neighbour, and the neighbour's into our ghost rows."""
        count = swap.sendlist.size
        if swap.dest == self.me:
            loops.copy_shifted(self.x, swap.sendlist, count, swap.axis, swap.shift, swap.first)
            return
        loops.pack(self.x, swap.sendlist, count, swap.axis, swap.shift, self.sendbuf)
        into = self._exchange(3 * count, swap.dest, 3 * swap.nrecv, swap.src, swap.tag, step, "positions")
        loops.unpack(self.x, swap.first, swap.nrecv, into)

    def send_border(self, swap, step):
        """A border swap: positions, and with charges each atom's charge in the same message."""
        if not self.charged:
            self.send(swap, step)
            return
        count = swap.sendlist.size
        if swap.dest == self.me:
            loops.copy_shifted(self.x, swap.sendlist, count, swap.axis, swap.shift, swap.first)
            self.q[swap.first:swap.first + count] = self.q[swap.sendlist]
            return
        loops.pack_q(self.x, self.q, swap.sendlist, count, swap.axis, swap.shift, self.sendbuf)
        into = self._exchange(4 * count, swap.dest, 4 * swap.nrecv, swap.src, swap.tag, step, "positions")
        loops.unpack_q(self.x, self.q, swap.first, swap.nrecv, into)

    def forward(self, step):
        for swap in self.swaps:
            self.send(swap, step)

    def reverse(self, step):
        """Forces on ghosts back to their owners, the swaps in reverse order (a ghost of a ghost
        hands its force to the ghost it came from, which hands it on)."""
        for swap in reversed(self.swaps):
            if swap.dest == self.me:
                loops.add_ghost_rows(self.f, swap.sendlist, swap.sendlist.size, swap.first)
                continue
            loops.pack_rows(self.f, swap.first, swap.nrecv, self.sendbuf)
            into = self._exchange(3 * swap.nrecv, swap.src, 3 * swap.sendlist.size, swap.dest, 50 + swap.tag,
                                  step, "ghost forces")
            loops.add_rows(self.f, swap.sendlist, swap.sendlist.size, into)

    def migrate(self, step):
        """Atoms wrapped into the periodic box, then, along each axis the grid splits, those that left the
        box along it go to the neighbours, as LAMMPS's Comm::exchange sends them: all of them to the
        lower neighbour (and, with more than two boxes along the axis, to the upper one too), a count
        first; a receiver keeps those inside its box (an atom that crossed a corner travels in up to
        three hops). Ghosts are dropped."""
        box = self.box
        x, v, ids = self.x[:self.nlocal], self.v[:self.nlocal], self.ids[:self.nlocal]
        self.wrapped += loops.wrap(x, x.shape[0], box.length)
        coords = box.coords
        for axis in range(3):
            parts = box.dims[axis]
            if parts == 1:
                continue  # the box spans the axis: wrapping was all
            going = loops.leaving(x, x.shape[0], axis, box.lo[axis], box.hi[axis]) != 0
            keep = ~going
            count = int(going.sum())
            self.migrated += count
            below, above = self.shifts[axis]
            # (dest, src, the sender's grid coordinate, tag): to the lower neighbour, from the upper; with
            # more than two boxes along the axis the other way too
            routes = [(below, above, coords[axis] + 1, 100 + 2 * axis)]
            if parts > 2:
                routes.append((above, below, coords[axis] - 1, 101 + 2 * axis))
            counts = [self._count(count, dest, src, tag, step, "migrating atoms") for dest, src, _, tag in routes]
            self._buffers(7 * max(count, *counts) + 1)
            out = self.sendbuf
            out[:3 * count] = x[going].ravel()
            out[3 * count:6 * count] = v[going].ravel()
            out[6 * count:7 * count] = ids[going]
            arrived = [(x[keep], v[keep], ids[keep])]
            for (dest, src, sender, tag), nrecv in zip(routes, counts):
                got = self._exchange(7 * count, dest, 7 * nrecv, src, tag, step, "migrating atoms")
                gx = got[:3 * nrecv].reshape(nrecv, 3)
                mine = (gx[:, axis] >= box.lo[axis]) & (gx[:, axis] < box.hi[axis])
                if parts > 2:
                    # the sender's leavers towards its other neighbour come too: theirs, not strays
                    lo, hi = box.bounds(axis, 2 * sender - coords[axis])
                    onward = (gx[:, axis] >= lo) & (gx[:, axis] < hi)
                    self.strays += int((~mine & ~onward).sum())
                else:
                    self.strays += int((~mine).sum())
                # boolean indexing copies: the next exchange reuses the receive buffer
                arrived.append((gx[mine], got[3 * nrecv:6 * nrecv].reshape(nrecv, 3)[mine],
                                got[6 * nrecv:7 * nrecv][mine].astype(np.int64)))
            x = np.concatenate([p[0] for p in arrived])
            v = np.concatenate([p[1] for p in arrived])
            ids = np.concatenate([p[2] for p in arrived])
        self.x, self.v, self.ids, self.nlocal = np.ascontiguousarray(x), np.ascontiguousarray(v), ids, x.shape[0]

    def borders(self, step):
        """The six swaps: along x, then y, then z, atoms within cutoff + skin of a face (ghosts
        received along earlier axes included, so edges and corners arrive in two or three hops)."""
        box = self.box
        self.swaps = []
        x = self.x[:self.nlocal]
        if self.charged:
            self.q = self.basis_q[self.ids[:self.nlocal] % 4]
        for axis in range(3):
            before = x.shape[0]
            below, above = self.shifts[axis]
            for side, dest, src in ((-1, below, above), (1, above, below)):
                chosen = np.empty(before, dtype=np.int64)
                if side < 0:
                    count = loops.select(x, before, axis, True, box.lo[axis] + box.reach, chosen)
                else:
                    count = loops.select(x, before, axis, False, box.hi[axis] - box.reach, chosen)
                tag = 2 * axis + (side > 0)
                nrecv = count if dest == self.me else self._count(count, dest, src, tag, step, "ghost")
                swap = Swap(axis, dest, src, tag, chosen[:count].copy(), box.ghost_shift(axis, side),
                            x.shape[0], nrecv)
                x = np.concatenate([x, np.empty((nrecv, 3))])
                self.x = x
                if self.charged:
                    self.q = np.concatenate([self.q, np.empty(nrecv)])
                self._buffers(4 * max(count, nrecv) + 1)
                self.send_border(swap, step)
                self.swaps.append(swap)
        self.x = np.ascontiguousarray(x)
        self.f = np.zeros_like(self.x)

    def build(self):
        n = self.nlocal
        self.numneigh = np.empty(n, dtype=np.int32)
        self.start = np.empty(n, dtype=np.int64)
        if self.neigh.size == 0:
            density = self.box.natoms / float(np.prod(self.box.length))
            guess = 0.6 * neighbours_within(self.box.reach, density)
            self.neigh = np.empty(int(n * guess) + 64, dtype=np.int32)
        while True:
            got = loops.build(self.x, n, self.x.shape[0], self.box.lo, self.box.hi, self.box.reach,
                              self.neigh, self.numneigh, self.start, self.newton)
            if got >= 0:
                return got
            self.neigh = np.empty(int(-got * 1.2) + 64, dtype=np.int32)

    def force(self, energy: bool) -> tuple[float, float]:
        """(Lennard-Jones energy, real-space Coulomb energy) of the rank's pairs; forces into ``f``."""
        cut2 = self.box.cutoff * self.box.cutoff
        if self.charged:
            return loops.force_coul(self.x, self.f, self.q, self.nlocal, self.neigh, self.numneigh, self.start,
                                    cut2, self.alpha, *self.tables, energy, self.newton)
        return loops.force(self.x, self.f, self.nlocal, self.neigh, self.numneigh, self.start, cut2, energy,
                           self.newton), 0.0

    def self_energy(self) -> float:
        """The Ewald self term of the local atoms, -alpha / sqrt(pi) sum q^2."""
        q = self.q[:self.nlocal]
        return -self.alpha / math.sqrt(math.pi) * float(np.dot(q, q))


PHASES = ("force_s", "neighbour_s", "comm_s", "migrate_s", "reduce_s", "integrate_s")
PME_PHASES = ("pme_spread_s", "pme_fft_s", "pme_solve_s", "pme_gather_s")


def simulate(cart, params, dims, MPI):
    """Run md on this rank; ``(metrics, validation)`` on rank 0, None elsewhere."""
    rank = cart.Get_rank()
    box = Box(params, dims, cart.Get_coords(rank))
    atoms = Atoms(cart, box, params, MPI)
    atoms.corrupt_at = params["corrupt_step"] if rank == 0 else None
    steps, rebuild, every = params["steps"], params["rebuild_every"], params["thermo_every"]
    atoms.borders(0)
    pairs = atoms.build()
    thermo = []
    partial, total = np.zeros(7), np.zeros(7)
    pme, pme_every_n = None, pme_every(params)
    if atoms.charged:
        from ._md_pme import Pme

        pme = Pme(cart, MPI, box, pme_grid(box.length, pme_spacing(params)), params.get("pme_order") or 4,
                  atoms.alpha, params["skin"], params.get("pme_fft") or "r2c")

    def reduce(step, pe, coul):
        ke, px, py, pz = loops.kinetic(atoms.v, atoms.nlocal)
        partial[:] = ke, pe + coul, px, py, pz, atoms.nlocal, coul
        cart.Allreduce(partial, total, MPI.SUM)
        n = box.natoms
        t = temperature(total[0], n)
        row = {"step": step, "temperature": t, "ke": total[0] / n, "pe": total[1] / n,
               "etotal": (total[0] + total[1]) / n, "atoms": int(total[5]),
               "momentum": float(np.linalg.norm(total[2:5])) / n / np.sqrt(max(t, 1e-12))}
        if pme is not None:
            row["coul"] = total[6] / n
        thermo.append(row)

    def forces(step, energy):
        """Short-range forces, then (on a PME step) the reciprocal ones, as an impulse of every PME step's
        weight (r-RESPA's Verlet-I, NAMD's fullElectFrequency); (short-range energy, Coulomb energy)."""
        pe, coul = atoms.force(energy)
        if pme is not None and step % pme_every_n == 0:
            reciprocal = pme.compute(atoms.x, atoms.q, atoms.nlocal, atoms.f, float(pme_every_n), energy, step)
            if energy:
                coul += reciprocal + atoms.self_energy()
        return pe, coul

    pe, coul = forces(0, True)
    if atoms.newton:
        atoms.reverse(0)
    reduce(0, pe, coul)
    if pme is not None:  # the step loop's share only
        pme.spent = dict.fromkeys(pme.spent, 0.0)
        pme.transpose_bytes = pme.halo_bytes = pme.evaluations = 0
    spent = dict.fromkeys(PHASES, 0.0)
    rebuilds, most_pairs = 0, pairs
    cart.Barrier()
    begin = clock()
    for step in range(1, steps + 1):
        t0 = clock()
        loops.integrate_first(atoms.x, atoms.v, atoms.f, atoms.nlocal, atoms.dt)
        t1 = clock()
        spent["integrate_s"] += t1 - t0
        if step % rebuild == 0:
            atoms.migrate(step)
            atoms.borders(step)
            t2 = clock()
            most_pairs = max(most_pairs, atoms.build())
            spent["migrate_s"] += t2 - t1
            spent["neighbour_s"] += clock() - t2
            rebuilds += 1
        else:
            atoms.forward(step)
            spent["comm_s"] += clock() - t1
        t3 = clock()
        energy = step % every == 0 or step == steps
        pme_before = sum(pme.spent.values()) if pme is not None else 0.0
        pe, coul = forces(step, energy)
        t4 = clock()
        spent["force_s"] += t4 - t3 - ((sum(pme.spent.values()) - pme_before) if pme is not None else 0.0)
        if atoms.newton:
            atoms.reverse(step)
            t4b = clock()
            spent["comm_s"] += t4b - t4
            t4 = t4b
        loops.integrate_second(atoms.v, atoms.f, atoms.nlocal, atoms.dt)
        t5 = clock()
        spent["integrate_s"] += t5 - t4
        if energy:
            reduce(step, pe, coul)
            spent["reduce_s"] += clock() - t5
    elapsed = clock() - begin
    pme_spent = list(pme.spent.values()) if pme is not None else [0.0] * len(PME_PHASES)
    slowest = np.empty(1 + len(PHASES) + len(PME_PHASES))
    cart.Allreduce(np.array([elapsed, *spent.values(), *pme_spent]), slowest, MPI.MAX)
    own = {"rank": rank, "atoms": atoms.nlocal, "ghosts": atoms.x.shape[0] - atoms.nlocal,
           "pairs": most_pairs, "strays": atoms.strays, "bad": atoms.bad, "checked": atoms.checked,
           "migrated": atoms.migrated, "wrapped": atoms.wrapped}
    if pme is not None:
        own.update({"checked": atoms.checked + pme.checked, "bad": atoms.bad or pme.bad,
                    "pme_outside": pme.outside, "pme_transpose_bytes": pme.transpose_bytes,
                    "pme_halo_bytes": pme.halo_bytes})
    everyone = cart.gather(own, root=0)
    if rank != 0:
        return None
    metrics = _metrics(params, box, slowest, thermo, everyone, rebuilds)
    if pme is not None:
        metrics.update(_pme_metrics(params, pme, atoms, everyone, slowest[1 + len(PHASES):]))
    return metrics, _verdict(box, thermo, everyone)


def _pme_metrics(params, pme, atoms, everyone, spent) -> dict:
    out = {name: float(value) for name, value in zip(PME_PHASES, spent)}
    out.update({
        "pme_grid": pme.layout.grid.tolist(),
        "pme_order": pme.order,
        "pme_fft": pme.fft,
        "pme_every": pme_every(params),
        "pme_spacing": pme_spacing(params),
        "ewald_alpha": atoms.alpha,
        "ewald_tolerance": params.get("ewald_tolerance") or 1e-5,
        "charges": atoms.basis_q.tolist(),
        "pme_evaluations": pme.evaluations,
        # bytes every rank sent to other ranks in the step loop, summed over ranks
        "pme_transpose_bytes": sum(e["pme_transpose_bytes"] for e in everyone),
        "pme_halo_bytes": sum(e["pme_halo_bytes"] for e in everyone),
    })
    return out


def _metrics(params, box, slowest, thermo, everyone, rebuilds):
    steps, n = params["steps"], box.natoms
    first, last = thermo[0]["etotal"], thermo[-1]["etotal"]
    locals_ = [entry["atoms"] for entry in everyone]
    out = {
        "elapsed_s": float(slowest[0]),
        **{name: float(value) for name, value in zip(PHASES, slowest[1:])},
        "atom_steps_per_s": n * steps / float(slowest[0]) if slowest[0] > 0 else None,
        "atoms": n,
        "atoms_per_rank": {"min": min(locals_), "max": max(locals_)},
        "ghosts_per_rank": {"min": min(e["ghosts"] for e in everyone), "max": max(e["ghosts"] for e in everyone)},
        "pairs_per_atom": sum(e["pairs"] for e in everyone) / n,
        "neighbours_within_cutoff": neighbours_within(box.cutoff, params["density"]),
        "migrated": sum(e["migrated"] for e in everyone),
        "migrated_across_edges": sum(e["wrapped"] for e in everyone),
        "thermo": thermo,
        "energy_drift": (last - first) / abs(first) if first else None,
        "momentum_per_atom": max(row["momentum"] for row in thermo),
        "cells": box.cells.tolist(),
        "box": box.length.tolist(),
        "dims": box.dims,
        "cutoff": box.cutoff,
        "skin": params["skin"],
        "steps": steps,
        "rebuilds": rebuilds,
        "newton": params.get("newton", "on"),
        "messages_checked": sum(e["checked"] for e in everyone),
        "system": params.get("system") or "lj",
        "electrostatics": electrostatics(params),
        "weak": params["weak"],
    }
    return {key: (value if not isinstance(value, float) or np.isfinite(value) else None)
            for key, value in out.items()}


def _verdict(box, thermo, everyone) -> dict:
    problems = []
    bad = sorted((e["bad"] + (e["rank"],) for e in everyone if e["bad"]))
    if bad:
        more = f" (and {len(bad) - 1} more ranks)" if len(bad) > 1 else ""
        problems.append(f"rank {bad[0][2]}: {bad[0][1]}{more}")
    outside = sum(e.get("pme_outside", 0) for e in everyone)
    if outside:
        problems.append(f"{outside} times an atom's splines left its rank's PME brick: it moved more than the skin "
                        f"between rebuilds")
    strays = [(e["rank"], e["strays"]) for e in everyone if e["strays"]]
    if strays:
        problems.append(f"{sum(s for _, s in strays)} atoms arrived outside their new box (ranks "
                        f"{[r for r, _ in strays]}): they moved more than a box between rebuilds")
    counted = [row for row in thermo if row["atoms"] != box.natoms]
    if counted:
        problems.append(f"{counted[0]['atoms']} atoms at step {counted[0]['step']}, not {box.natoms}")
    energies = [row["etotal"] for row in thermo]
    drift = abs(energies[-1] - energies[0]) / abs(energies[0]) if energies[0] else float("inf")
    if not np.all(np.isfinite(energies)) or not drift <= ENERGY_DRIFT_BOUND:
        problems.append(f"total energy moved {drift:.3g} of its start (bound {ENERGY_DRIFT_BOUND:g})")
    bound = MOMENTUM_BOUND_PME if "coul" in thermo[0] else MOMENTUM_BOUND
    worst = max(thermo, key=lambda row: row["momentum"] if np.isfinite(row["momentum"]) else np.inf)
    if not worst["momentum"] <= bound:
        problems.append(f"total momentum {worst['momentum']:.3g} per atom (in thermal velocities) at step "
                        f"{worst['step']}, bound {bound:g}")
    if problems:
        return {"passed": False, "detail": "; ".join(problems)}
    return {"passed": True,
            "detail": f"{sum(e['checked'] for e in everyone)} messages' checksums; "
                      f"{box.natoms} atoms at {len(thermo)} thermo steps; momentum per atom <= "
                      f"{max(row['momentum'] for row in thermo):.2g} (bound {bound:g}); energy drift "
                      f"{drift:.2g} (bound {ENERGY_DRIFT_BOUND:g})"}
