"""The core every layer stands on: errors, processes, run folders, records and the store, option parsing, the one
registry type, bounded file reading, the facts of this environment and the MPI library a rank loads.

Its modules import only each other (and the standard library): kernels/ and topologies/ import nothing of vnetbench
but this package (tests/unit/test_layers.py). Importing it imports none of them: every MPI rank passes here.
"""
