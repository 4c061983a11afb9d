"""``python -m vnetbench.topologies.hosts FILE [--group GROUP]``: FILE as a hosts topology file (JSON), or why it
is not one (exit 2); the Ansible role vnetbench_hostfile runs it on each file before writing it."""

import json
import sys

from vnetbench.core.errors import UsageError

from . import HostsBackend


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) not in (1, 3) or len(argv) == 3 and argv[1] != "--group":
        print("usage: python -m vnetbench.topologies.hosts FILE [--group GROUP]", file=sys.stderr)
        return 2
    ref = f"inventory:{argv[0]}#{argv[2]}" if len(argv) == 3 else argv[0]
    try:
        topology = HostsBackend.load(ref, "FILE")
    except UsageError as exc:
        print(f"vnetbench: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(topology.to_dict(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
