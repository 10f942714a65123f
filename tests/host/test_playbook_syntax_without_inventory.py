# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A user's playbook that imports the collection's playbooks, checked where no inventory is configured (issue 39):
``ansible-playbook --syntax-check`` and ``ansible-lint`` (which runs that syntax check) failed, unskippably, because
the "matches no host" guard in each play's ``hosts:`` fired while ansible-core templated it. A real run still
refuses a pattern that matches nothing. Run from an empty directory: no ansible.cfg, no inventory."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import subprocess
import sys

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.path.dirname(sys.executable)
SITE = """---
- name: Gate the fleet
  ansible.builtin.import_playbook: gpufleet.preflight.preflight
- name: Provision the ready nodes
  hosts: gpufleet_preflight_ready
  gather_facts: false
  tasks:
    - name: Say hello
      ansible.builtin.debug:
        msg: hello
- name: Reap
  ansible.builtin.import_playbook: gpufleet.preflight.reap
- name: Stop builds
  ansible.builtin.import_playbook: gpufleet.preflight.build_stop
"""


def run(tmp_path, *argv):
    (tmp_path / "site.yml").write_text(SITE)
    env = dict((key, value) for key, value in os.environ.items()
               if not key.startswith("ANSIBLE_") or key == "ANSIBLE_COLLECTIONS_PATH")
    env.update(ANSIBLE_NOCOLOR="1", ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".tmp", "collections"),
               HOME=str(tmp_path), PATH=BIN + os.pathsep + os.environ.get("PATH", ""))
    return subprocess.run(list(argv), cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, env=env, check=False, timeout=300)


@pytest.mark.parametrize("option", ["--syntax-check", "--list-tasks", "--list-hosts"])
def test_a_syntax_check_or_listing_without_an_inventory_passes(tmp_path, option):
    result = run(tmp_path, "ansible-playbook", option, "site.yml")
    assert result.returncode == 0, result.stdout
    assert "matches no host" not in result.stdout, result.stdout


def test_ansible_lint_of_it_without_an_inventory_passes(tmp_path):
    if not os.path.exists(os.path.join(BIN, "ansible-lint")):
        pytest.skip("ansible-lint is not installed in this venv")
    result = run(tmp_path, "ansible-lint", "--offline", "site.yml")
    assert result.returncode == 0, result.stdout
    assert "syntax-check" not in result.stdout, result.stdout


def test_a_real_run_without_a_matching_host_is_still_refused(tmp_path):
    result = run(tmp_path, "ansible-playbook", "site.yml")
    assert result.returncode != 0, result.stdout
    assert ("preflight_hosts=all matches no host of the inventory: nothing was checked and no report was written"
            in result.stdout), result.stdout
    assert not (tmp_path / "reports").exists()
