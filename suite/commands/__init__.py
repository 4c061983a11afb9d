"""One module per ``vnetbench`` command; each has ``register(subparsers)`` setting ``func``.

A command's ``func(args) -> int`` prints for humans and returns the exit code; the work
itself lives in library modules that tests call directly.
"""
