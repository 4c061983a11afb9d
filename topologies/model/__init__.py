"""The topology model: a topology as plain, validated data - the spec (hosts, VMs, switches, uplinks, placement),
its YAML reading and validation, units, the study's presets, and how VMs are sized on a host's cpus and memory."""
