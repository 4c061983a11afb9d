"""Compatibility only, until setup.cfg's ``vnetbench-agent`` names vnetbench.topologies.netns.agent:main: remove then."""
import sys

from .netns.agent import main

if __name__ == "__main__":
    sys.exit(main())
