"""A kernel of ``vnetbench.kernels`` as a workload: its checks, its rank-side command, and the record rank 0 prints."""

import contextlib
import json
import sys

from vnetbench import kernels
from vnetbench.core.errors import UsageError
from vnetbench.core.records import failure_record

from .base import Run, Workload



def program(kernel: str, params: dict, context: dict) -> list[str]:
    """The rank-side command; rank 0 prints its record as one JSON line on stdout."""
    return [sys.executable, "-m", "vnetbench.kernels", kernel,
            "--params", json.dumps(params, sort_keys=True), "--context", json.dumps(context, sort_keys=True)]

class KernelWorkload(Workload):
    """The kernel ``name`` with ``params`` (its options; defaults fill what is not given)."""

    kind = "kernel"
    records_on_stdout = True

    def __init__(self, name: str, params: dict | None = None):
        self.module = kernels.get(name)
        defaults = kernels.defaults(name)
        unknown = sorted(set(params or {}) - set(defaults))
        if unknown:
            raise UsageError(f"{unknown[0]}: not an option of kernel {name}")
        merged = {**defaults, **(params or {})}
        resolve = getattr(self.module, "resolve", None)
        self.name, self.params = name, (resolve(merged) if resolve else merged)

    @classmethod
    def from_argv(cls, name: str, argv: list[str]) -> "KernelWorkload":
        """The kernel with its options as typed after ``run KERNEL``."""
        return cls(name, kernels.parse_params(name, argv))

    def check(self, ranks: int) -> None:
        if ranks < self.module.MIN_RANKS:
            raise UsageError(f"--ranks: {self.name} needs at least {self.module.MIN_RANKS} ranks, got {ranks}")
        self.module.check(self.params, ranks)

    def check_rank_options(self, options: dict | None) -> dict:
        from vnetbench.kernels import numa

        options = {key: value for key, value in (options or {}).items() if value}
        unknown = sorted(set(options) - set(kernels.RANK_OPTIONS))
        if unknown:
            raise UsageError(f"{unknown[0]}: not a rank option; allowed: {', '.join(kernels.RANK_OPTIONS)}")
        numa.check_policy(options.get("mem_policy"), bool(options.get("allow_single_node")))
        return options

    def default_timeout(self, ranks: int) -> float | None:
        return self.module.default_timeout(self.params, ranks)

    @contextlib.contextmanager
    def ahead(self):
        from vnetbench.core import environment

        environment.ask_source()  # git runs on another core while this one starts the launch
        try:
            yield
        finally:
            environment.drop_asked()

    def launch_fields(self, run: Run) -> dict:
        return {"bind_requested": run.bind}

    def rank_argv(self, run: Run) -> list[str]:
        context = {"run_id": run.run_id, "repetition": run.repetition, "topology": run.realised.describe(),
                   "expected_placement": run.spec.expected_placement, "placement_labels": run.spec.placement_labels,
                   "launch": run.launch, **run.rank_options}
        if run.realised.ranks_share_this_hosts_files:
            from vnetbench.core import environment

            # asked by the launcher rather than by rank 0: a git command is milliseconds on this host and seconds
            # of a TCG guest's CPU, while the other ranks spin in their bcast (``ahead`` began it)
            context["vnetbench_git"] = environment.source()
        return program(self.name, self.params, context)

    def shown(self, argv: list[str]) -> str:
        import shlex

        # the params and context go as JSON arguments: long, and in the record already
        return shlex.join("{...}" if arg.startswith("{") else arg for arg in argv)

    def _failure(self, run: Run, status: str, detail: str, failure: dict | None = None) -> dict:
        return failure_record(kernel=self.name, params=self.params, ranks=run.ranks, status=status, detail=detail,
                              failure=failure, topology=run.realised.describe(), run_id=run.run_id,
                              repetition=run.repetition, started_at=run.started_at, launch=run.launch,
                              run_options=run.rank_options)

    def not_started(self, run: Run, what: str, vms: list[str]) -> dict:
        return self._failure(run, "failed", f"{what}; the job was not started", run.network_failure(vms))

    def judge(self, run: Run) -> dict:
        outcome = run.outcome
        if run.problem:
            return self._failure(run, "failed", f"{run.problem['detail']}; last stderr: {outcome.tail()}",
                                 run.network_failure(run.problem["vms"]))
        if outcome.timed_out:
            return self._failure(run, "timeout", f"no result after {run.timeout:g} s; the job was killed with its "
                                 f"whole process tree; last stderr: {outcome.tail()}")
        if not outcome.records:
            failure = run.rank_failure()
            who = f"{failure['detail']}; " if failure else ""
            return self._failure(run, "failed", f"{who}mpirun exited with {outcome.returncode} and no result "
                                 f"record; last stderr: {outcome.tail()}", failure)
        record = outcome.records[-1]
        record["launch"] = run.launch
        worlds = sorted({other.get("ranks") for other in outcome.records}, key=str)
        if worlds != [run.ranks] or len(outcome.records) > 1:
            # the ranks did not join one world: a launcher and an MPI library that do not belong together
            # start N singletons, each "rank 0 of 1", each with a result of its own
            record["status"] = "failed"
            record["validation"] = {"passed": False, "detail": f"{self.name}'s ranks saw a world of "
                                    f"{' and '.join(map(str, worlds))} rank(s) ({len(outcome.records)} result(s)), "
                                    f"but {run.ranks} were launched with {run.launcher}",
                                    "kernel": record["validation"]}
            return record
        if outcome.returncode not in (0, 1) and record["status"] == "ok":
            # rank 0 wrote its result, then something else died: the run as a whole did not succeed
            failure = run.rank_failure()
            who = f"{failure['detail']}; " if failure else ""
            record["status"] = "failed"
            record["validation"] = {"passed": False, "detail": f"{who}mpirun exited with {outcome.returncode} after "
                                    f"the result was written; last stderr: {outcome.tail()}",
                                    "kernel": record["validation"]}
            record["failure"] = failure
        return record

    def to_request(self) -> dict:
        return {"kind": self.kind, "name": self.name, "params": self.params}

    @classmethod
    def from_request(cls, data: dict) -> "KernelWorkload":
        return cls(data["name"], data.get("params"))
