"""One module per ``vnetbench`` command; each has ``register(subparsers)`` setting ``func``.

A command's ``func(args) -> int`` prints for humans and returns the exit code; the work
itself lives in library modules that tests call directly.

``COMMANDS`` is the one list of them, each with the line ``vnetbench --help`` shows for it: the CLI
imports a command's module only when that command runs (a module's imports cost start-up time),
so the list of all of them must not need the modules.
"""

COMMANDS = {
    "run": "run one kernel (or an application) on a topology",
    "sweep": "run a kernel (or an application) over topologies x rank counts x repetitions",
    "report": "the study's tables from a results store",
    "compare": "compare two stores; exit 1 on a significant regression",
    "topology": "list, show, bring up and take down topologies",
    "exec": "run any MPI program on a topology",
    "hosts": "check real hosts, gather their facts, fetch their results",
    "ingest": "add records written by a direct mpirun launch to a store",
    "calibrate": "measure a topology's paths (latency, bandwidth, allreduce) for predict",
    "predict": "predict a profiled program's time and overhead on a topology, with why",
}
