# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""health_check_bundle: the zip application the health_check role installs, run by a bare Python (the oldest node
Python here) with an empty environment as slurmd runs it; the policy validated against the readiness table."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import json
import subprocess

import pytest

from ansible_collections.gpufleet.preflight.plugins.action import health_check_bundle


def oldest_python():
    found = sorted(glob.glob("/root/.pyenv/versions/3.8*/bin/python3.8")) + ["/usr/bin/python3"]
    return found[0]


def test_bundle_runs_on_a_bare_python(tmp_path):
    data, modules = health_check_bundle.bundle_bytes()
    assert data == health_check_bundle.bundle_bytes()[0]  # reproducible: a second install changes nothing
    assert "ansible.module_utils.basic" not in modules
    pyz = tmp_path / "hc.pyz"
    pyz.write_bytes(data)
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"policy": {"profiles": [], "min_available_memory": "1MiB", "max_build_processes": 100000,
                                             "max_memory_pressure": 100,
                                             "custom_checks": [{"name": "c", "query": "memory.host.total_bytes", "min": 0}]}}))
    done = subprocess.run([oldest_python(), "-I", str(pyz), "--config", str(config), "--mode", "npd", "-v"],
                          env={}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60, check=False)
    text = done.stdout.decode()
    assert done.returncode == 0, (text, done.stderr.decode())
    assert text.startswith("ready: ")


def test_complete_policy_names_the_option():
    assert health_check_bundle.complete_policy({})["expected_gpus"] == 8
    for given, words in (({"min_avail": 1}, "unknown option min_avail"), ({"expected_gpus": "x"}, "expected_gpus"),
                         ({"build_path": "rel"}, "build_path")):
        with pytest.raises(ValueError, match=words):
            health_check_bundle.complete_policy(given)
