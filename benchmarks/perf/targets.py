"""The targets: for each kernel, the C reference and the vnetbench program, and what to compare.

A ``Pair`` is two programs run alternately; each run yields one value per ``Check``. Values
are taken from the programs' JSON output (never from text meant for people), and a run whose
result is not valid yields nothing but its reason.
"""

import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .programs import Finished

OPS = ("copy", "scale", "add", "triad")


class Unusable(Exception):
    """A run finished but its output cannot be compared (invalid result, no record)."""


@dataclass(frozen=True)
class Check:
    """One target: ``measured`` = subject / reference ("ratio"), subject - reference ("difference") or the
    subject's own value ("value": the reference is shown for scale), passing when it is on the right side of
    ``threshold`` (>= for higher-is-better values)."""

    key: str
    label: str
    unit: str
    kind: str          # "ratio" | "difference" | "value"
    threshold: float
    higher_is_better: bool
    # over repetitions: "best" (max or min of each side), "median" (of each side), or "paired"
    # (median of the per-repetition differences or ratios: a reference and its subject run
    # back to back, so a slow drift in the machine's load cancels out)
    statistic: str = "best"
    strict: bool = False     # "under 0.5 s": the threshold itself fails

    def summarise(self, samples: list[float]) -> float:
        if self.statistic in ("median", "paired"):
            return statistics.median(samples)
        return max(samples) if self.higher_is_better else min(samples)

    def measure(self, reference: float, subject: float) -> float:
        if self.kind == "value":
            return subject
        return subject / reference if self.kind == "ratio" else subject - reference

    def compare(self, reference: list[float | None], subject: list[float | None]) -> tuple[float, float, float]:
        """(reference, subject, measured) from per-repetition samples (None: that run failed)."""
        ref = [value for value in reference if value is not None]
        sub = [value for value in subject if value is not None]
        summary = self.summarise(ref), self.summarise(sub)
        if self.statistic == "paired":
            return (*summary, statistics.median(self.per_pair(reference, subject)))
        return (*summary, self.measure(*summary))

    def per_pair(self, reference: list[float | None], subject: list[float | None]) -> list[float]:
        """The measure of each repetition where both sides gave a value: how far the pairs spread."""
        return [self.measure(r, s) for r, s in zip(reference, subject) if r is not None and s is not None]

    def decided(self, interval: tuple[float, float] | None) -> bool:
        """Whether the noise could not turn the verdict: the interval of the measured value lies on one side of
        the threshold (None: no interval, as for a best-of or a single value: the verdict stands)."""
        return interval is None or self.passes(interval[0]) == self.passes(interval[1])

    def passes(self, measured: float) -> bool:
        ok_side = measured >= self.threshold if (self.kind == "ratio" and self.higher_is_better) \
            else measured <= self.threshold
        return ok_side and not (self.strict and measured == self.threshold)


def bootstrap_interval(statistic: Callable, draws: int = 4000) -> tuple[float, float]:
    """The 90% bootstrap interval of ``statistic(rng)``, a statistic of samples ``rng`` draws again with
    replacement. Seeded: one set of samples, one interval (benchmarks/md_fidelity.py decides its rows so too)."""
    import random

    rng = random.Random(20261126)
    values = sorted(statistic(rng) for _ in range(draws))
    return values[int(0.05 * draws)], values[int(0.95 * draws) - 1]


def median_interval(values: list[float]) -> tuple[float, float]:
    """The 90% bootstrap interval of the median of ``values`` (the pairs' measures)."""
    return bootstrap_interval(lambda rng: statistics.median(rng.choices(values, k=len(values))))


@dataclass(frozen=True)
class Pair:
    name: str
    reference: list[str]
    subject: list[str]
    read_reference: Callable[[Finished], dict[str, float]]
    read_subject: Callable[[Finished], dict[str, float]]
    checks: list[Check]
    repeat: int = 1
    timeout: float = 600.0
    notes: dict = field(default_factory=dict)
    reference_env: dict | None = None  # the reference's whole environment (None: as the subject's)
    warmup: bool = False  # run each side once, unrecorded, first (page cache, compiled code, link directories)


@dataclass(frozen=True)
class Settings:
    """What one harness run measures; ``quick`` trades repetitions and iterations for time."""

    ranks: int
    repeat: int
    overhead_repeat: int
    stream_repeat: int
    stream_ntimes: int
    stream_array_size: int
    pingpong: dict
    halo_steps: int

    @classmethod
    def make(cls, quick: bool, ranks: int, repeat: int | None = None,
             stream_array_size: int | None = None) -> "Settings":
        from vnetbench.kernels import stream

        array_size = stream_array_size or stream.default_array_size(stream.llc_bytes())
        if quick:
            pingpong = {"iterations": 2000, "warmup": 100, "large_iterations": 200, "large_warmup": 10,
                        "window": 64, "bw_iterations": 50}
            # STREAM's verdict is a median of pairs: five is the fewest that a single disturbed pair cannot move
            return cls(ranks, repeat or 3, repeat or 3, repeat or 5, 10, array_size, pingpong, 200)
        # the kernels' own defaults (OSU's counts, STREAM's 20 repetitions, 500 halo steps)
        pingpong = {"iterations": 10000, "warmup": 100, "large_iterations": 1000, "large_warmup": 10,
                    "window": 64, "bw_iterations": 100}
        # STREAM and 1 MiB bandwidth vary by +-15% from run to run on a shared VM (memory traffic
        # of other guests, huge-page coverage): best of 9 is what settles a 5% target
        # --repeat sets the launch overhead's pairs too: an undecided verdict's note asks for more
        return cls(ranks, repeat or 9, repeat or 9, repeat or 9, 20, array_size, pingpong, 500)


def _kernel(name: str, options: dict) -> list[str]:
    argv = [sys.executable, "-m", "vnetbench.kernels", name]
    for key, value in options.items():
        argv += [f"--{key.replace('_', '-')}", str(value)]
    return argv


def _record(run: Finished) -> dict:
    records = [line for line in run.json_lines() if "schema_version" in line and "kernel" in line]
    if not records:
        raise Unusable("no result record on stdout")
    record = records[-1]
    if record.get("status") != "ok":
        raise Unusable(f"status {record.get('status')}: {record.get('validation', {}).get('detail')}")
    return record


def _reference_output(run: Finished) -> dict:
    lines = run.json_lines()
    if not lines:
        raise Unusable("no JSON on stdout")
    if lines[-1].get("valid") is False:
        raise Unusable("the reference's own check failed")
    return lines[-1]


def _stream_values(per_rank: list[dict]) -> dict[str, float]:
    """Each rank's best-time MB/s per op ("copy.rank0", ...); the mean over ranks as a diagnostic."""
    values = {f"{op}.rank{entry['rank']}": entry["bandwidth_mbps"][op] for entry in per_rank for op in OPS}
    values.update({f"{op}.mean": statistics.fmean(entry["bandwidth_mbps"][op] for entry in per_rank) for op in OPS})
    return values


def stream_pair(settings: Settings, launch: list[str], binary: Path) -> Pair:
    n, ntimes = settings.stream_array_size, settings.stream_ntimes
    # every rank against the C rank in the same slot, each repetition a pair run back to back:
    # the median of the pairs' ratios, so a slow stretch of the machine falls on both sides
    checks = [Check(f"{op}.rank{rank}", f"STREAM {op}, rank {rank}", "MB/s", "ratio", 0.98, True,
                    statistic="paired")
              for op in OPS for rank in range(settings.ranks)]
    return Pair(
        name="stream",
        reference=[*launch, str(binary), str(n), str(ntimes)],
        subject=[*launch, *_kernel("stream", {"array_size": n, "ntimes": ntimes})],
        read_reference=lambda run: _stream_values(_reference_output(run)["per_rank"]),
        read_subject=lambda run: _stream_values(_record(run)["metrics"]["per_rank"]),
        checks=checks,
        repeat=settings.stream_repeat,
        notes={"array_size": n, "ntimes": ntimes, "ranks": settings.ranks,
               "value": "each rank's best-time bandwidth; verdict: median over repetitions of vnetbench / C"},
    )


def _pingpong_values(sizes: list[dict]) -> dict[str, float]:
    by_size = {entry["bytes"]: entry for entry in sizes}
    if 8 not in by_size or (1 << 20) not in by_size:
        raise Unusable("8 B or 1 MiB missing from the sizes measured")
    small = by_size[8]
    # diagnostics beside the two targets: the mean (the kernel's headline) and the minimum
    return {"latency": small["latency_p50_us"], "bandwidth": by_size[1 << 20]["bandwidth_mbps"],
            "latency_mean": small["latency_us"], "latency_min": small["latency_min_us"]}


def pingpong_pair(settings: Settings, launch: list[str], binary: Path) -> Pair:
    opts = {"min_size": 8, "max_size": 1 << 20, **settings.pingpong}
    order = ("min_size", "max_size", "iterations", "warmup", "large_iterations", "large_warmup", "window",
             "bw_iterations")
    return Pair(
        name="pingpong",
        reference=[*launch, str(binary), *(str(opts[key]) for key in order)],
        subject=[*launch, *_kernel("pingpong", opts)],
        read_reference=lambda run: _pingpong_values(_reference_output(run)["sizes"]),
        read_subject=lambda run: _pingpong_values(_record(run)["metrics"]["sizes"]),
        checks=[Check("latency", "pingpong latency 8 B (p50)", "us", "difference", 0.5, False),
                Check("bandwidth", "pingpong bandwidth 1 MiB", "MB/s", "ratio", 0.95, True)],
        repeat=settings.repeat,
        notes={**opts, "latency": "median of the half round trips of one run"},
    )


def _halo_values(step_s: dict) -> dict[str, float]:
    return {"step": step_s["median"] * 1e3, "step_min": step_s["min"] * 1e3, "step_mean": step_s["mean"] * 1e3}


HALO = {"global": "102,102,102", "compute": 0, "neighbours": 26, "halo_width": 1, "reduce_every": 1}


def halo_pair(settings: Settings, launch: list[str], binary: Path) -> Pair:
    opts = {**HALO, "steps": settings.halo_steps}
    grid = opts["global"].split(",")
    return Pair(
        name="halo",
        reference=[*launch, str(binary), *grid, str(opts["steps"]), str(opts["compute"]), str(opts["neighbours"]),
                   str(opts["halo_width"]), str(opts["reduce_every"])],
        subject=[*launch, *_kernel("halo", opts)],
        read_reference=lambda run: _halo_values(_reference_output(run)["step_s"]),
        read_subject=lambda run: _halo_values(_record(run)["metrics"]["step_s"]),
        checks=[Check("step", "halo step, --compute 0 (median)", "ms", "ratio", 1.10, False)],
        repeat=settings.repeat,
        notes={**opts, "step": "median over steps of the slowest rank's step time"},
    )
