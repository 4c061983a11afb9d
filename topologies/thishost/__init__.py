"""What realises a topology on this Linux host: the host's facts (cpus, NUMA nodes, memory), Linux objects
(namespaces, links, bridges, tc), cgroups, the fabric of switches and uplinks, a topology's life (up, down, cleanup)
and the state that lets another process find what is up."""
