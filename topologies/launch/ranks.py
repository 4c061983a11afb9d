"""Which VM each rank runs on, for the backends whose VMs are this host's (netns, qemu): in proportion to the
VMs' vCPUs, consecutive ranks together (block) or dealt out one at a time (round-robin). Pure."""


def rank_counts(ranks: int, vcpus: list[int]) -> list[int]:
    """Ranks per VM, in proportion to vCPUs (largest remainders first, then earlier VMs)."""
    total = sum(vcpus)
    shares = [ranks * v / total for v in vcpus]
    counts = [int(s) for s in shares]
    rest = sorted(range(len(vcpus)), key=lambda i: (-(shares[i] - counts[i]), i))
    for i in rest[:ranks - sum(counts)]:
        counts[i] += 1
    return counts


def place(ranks: int, vcpus: list[int], policy: str) -> list[int]:
    """The VM index of each rank: ``block`` gives consecutive ranks to one VM, ``round-robin``
    deals ranks out one VM at a time (skipping VMs that have their share), as Open MPI's
    ``--map-by slot`` and ``--map-by node`` do on hosts with those slot counts."""
    counts = rank_counts(ranks, vcpus)
    if policy == "block":
        return [i for i, count in enumerate(counts) for _ in range(count)]
    left, order = list(counts), []
    while len(order) < ranks:
        for i in range(len(left)):
            if left[i]:
                order.append(i)
                left[i] -= 1
    return order
