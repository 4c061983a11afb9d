"""Why a program costs what it costs on a topology: calibrate a topology's paths, replay a profiled program's
trace over them, predict its elapsed time and overhead (``vnetbench calibrate``, ``vnetbench predict``).

- ``paths``: which path each pair of ranks takes on a topology (same host or VM, one switch, across uplinks),
  from the spec and the placement alone - nothing is brought up;
- ``calibration``: measuring a topology's paths with the pingpong and allreduce kernels, the calibration record,
  finding a fresh one in a store;
- ``model``: a calibration as costs (a message's one-way time and its occupancy of the path, a collective's
  time), and extrapolation to paths a calibration does not hold (another uplink rate, more hosts);
- ``replay``: the LogGP-style discrete-event replay of a trace over a model;
- ``forecast``: ``predict``'s whole answer (both replays, the overhead, the breakdown, what it rests on).

docs/predict.md explains the model.
"""
