"""Test harnesses that stand in for real machines (sshd hosts in network namespaces)."""
