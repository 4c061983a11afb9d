"""The deployment tier's fixtures: real sshd hosts in network namespaces, and Ansible run against them.

Every test here needs root, iproute2, util-linux and Debian's openssh-server (scripts/test
installs it when missing); without them the tier is skipped, saying what is missing.
"""

import pytest

from harness.ansible_run import ansible_tool
from harness.sshd_hosts import SshdHosts, missing_requirements


@pytest.fixture(scope="module")
def make_hosts():
    """make_hosts(count, **options) -> SshdHosts, up; all torn down when the module's tests are done."""
    reason = missing_requirements()
    if reason:
        pytest.skip(f"SSH hosts: {reason}")
    made = []

    def make(count: int = 2, **options) -> SshdHosts:
        hosts = SshdHosts(count, **options)
        made.append(hosts)  # before start: a half-started harness is torn down too
        hosts.__enter__()
        return hosts

    yield make
    problems = []
    for hosts in made:
        try:
            hosts.close()
        except RuntimeError as exc:
            problems.append(str(exc))
    assert not problems, problems


@pytest.fixture(scope="module")
def require_ansible():
    if ansible_tool("ansible-playbook") is None:
        pytest.skip("ansible-playbook is missing (pip install 'vnetbench[deploy]')")
