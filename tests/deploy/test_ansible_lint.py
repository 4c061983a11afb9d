"""ansible-lint passes on ansible/ at the production profile."""

import os
import subprocess

import pytest

from harness.ansible_run import ANSIBLE_DIR, ansible_tool

pytestmark = pytest.mark.timeout(300)


def test_the_playbooks_and_roles_pass_ansible_lint_at_the_production_profile(tmp_path):
    lint = ansible_tool("ansible-lint")
    if lint is None:
        pytest.skip("ansible-lint is missing (pip install ansible-lint)")
    # ansible-lint writes caches under ANSIBLE_HOME: keep them out of the user's home
    env = dict(os.environ, ANSIBLE_HOME=str(tmp_path / "ansible"), NO_COLOR="1")
    proc = subprocess.run([lint, "--profile", "production", "--offline"], cwd=ANSIBLE_DIR, capture_output=True,
                          text=True, timeout=280, env=env)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "Profile 'production' was required, and it passed" in proc.stdout + proc.stderr
