"""``python -m vnetbench`` is the ``vnetbench`` command."""

from .cli import main

raise SystemExit(main())
