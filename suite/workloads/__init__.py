"""What the engine runs: a kernel (``KernelWorkload``) or an application definition (``AppWorkload``), one contract.

- ``Workload`` (``base``): the contract - name and params as recorded, checks, timeout, rank-side argv, how a
  run's outcome becomes a record, and the request form a batch job reads;
- ``chosen(app, kernel, argv)``: the workload a command was asked for (``--app FILE`` or a kernel with options);
- ``from_request(data)``: the workload a batch job's request carries.

The kinds are registered in ``KINDS``; nothing outside this package tells a kernel from an application.
"""

from vnetbench.core.errors import UsageError
from vnetbench.core.registry import Registry

from .base import Run, Workload

# request "kind" -> the class, in this package
KINDS = Registry("workload.kind", {"kernel": "kernel:KernelWorkload", "app": "app:AppWorkload"}, package=__name__,
                 noun="workload kind")


def kind(name: str) -> type[Workload]:
    return KINDS.load(name)


def chosen(app: str | None, kernel: str | None, argv=(), *, defaults=(), typed: str | None = None) -> Workload:
    """The application defined in ``app`` (a path), else ``kernel`` with ``defaults`` and then ``argv`` (kernel
    options, as typed). ``typed`` is how the kernel was named on the command line: beside ``app`` it is
    refused, as are kernel options."""
    if app is not None:
        if typed or argv:
            raise UsageError(f"--app: runs the application instead of a kernel; drop {typed or ' '.join(argv)!r}")
        return kind("app").load(app)
    if kernel is None:
        from vnetbench import kernels

        raise UsageError(f"KERNEL: missing; choose from {', '.join(kernels.names())} ('vnetbench run --help' "
                         f"describes them)")
    return kind("kernel").from_argv(kernel, [*defaults, *argv])


def from_request(data: dict) -> Workload:
    """The workload of a batch job's request (``Workload.to_request``)."""
    name = data.get("kind") if isinstance(data, dict) else None
    if name not in KINDS:
        raise UsageError(f"request: workload.kind: {name!r} is not one of {', '.join(KINDS)}")
    return kind(name).from_request(data)


__all__ = ["KINDS", "Run", "Workload", "chosen", "from_request", "kind"]
