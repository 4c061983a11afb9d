"""How ranks are reached on a realised topology: the launch intent every launcher flavour renders (hosts, slots,
binding, the subnet MPI stays on), cpu binding, rank placement, the SSH launch agent, and the probe of a host."""
