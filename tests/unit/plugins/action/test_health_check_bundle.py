# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""health_check_bundle: the zip application the health_check role installs, run by a bare Python (the oldest node
Python here) with an empty environment as slurmd runs it; the policy validated against the readiness table."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import json
import os
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
                                             "custom_checks": [{"name": "c", "query": "memory.host.total_bytes", "min": 0}]},
                                  "slurm": {"state_dir": str(tmp_path / "state")}}))
    done = subprocess.run([oldest_python(), "-I", str(pyz), "--config", str(config), "--mode", "npd", "-v"],
                          env={}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60, check=False)
    text = done.stdout.decode()
    assert done.returncode == 0, (text, done.stderr.decode())
    assert text.startswith("ready: ")
    assert len(text.splitlines()) == 1, text  # npd: the one line node-problem-detector keeps, no "took 0.05 s"
    assert "took " in done.stderr.decode()


def test_complete_policy_names_the_option():
    assert health_check_bundle.complete_policy({})["expected_gpus"] == 8
    for given, words in (({"min_avail": 1}, "unknown option min_avail"), ({"expected_gpus": "x"}, "expected_gpus"),
                         ({"build_path": "rel"}, "build_path")):
        with pytest.raises(ValueError, match=words):
            health_check_bundle.complete_policy(given)


def test_a_policy_that_cannot_finish_before_slurmd_kills_it_is_refused():
    """Issue 28.6: gpu_timeout 61 under slurmd (killed at 60 s) ran 61 s, killed every time."""
    policy = health_check_bundle.complete_policy({"profiles": ["gpu"], "gpu_timeout": 61})
    with pytest.raises(ValueError, match="gpu_timeout: 61.0 s cannot fit the health check's 50 s deadline"):
        health_check_bundle.check_deadline(policy, 50, "slurm", True, 5)
    with pytest.raises(ValueError, match="at most 55 s"):
        health_check_bundle.check_deadline(health_check_bundle.complete_policy({}), 58, "slurm", True, 5)
    assert health_check_bundle.check_deadline(health_check_bundle.complete_policy({"profiles": ["gpu"]}), 50, "slurm",
                                              True, 5) == 50
    custom = health_check_bundle.complete_policy({"profiles": [], "custom_checks": [
        {"name": "c", "query": "gpus.count", "min": 1}], "gpu_timeout": 61})
    with pytest.raises(ValueError, match="gpu_timeout"):  # a custom check on the gpus facts runs nvidia-smi too
        health_check_bundle.check_deadline(custom, 50, "slurm", True, 5)
    # no GPU profile: nvidia-smi is never run, its timeout is not waited on
    assert health_check_bundle.check_deadline(health_check_bundle.complete_policy({"gpu_timeout": 61, "profiles": []}), 50, "slurm",
                                              True, 5) == 50


def test_the_bundle_carries_its_bytecode_and_the_same_bytes_from_every_controller_process():
    """zipimport writes no cache: without .pyc beside each .py every run compiled the program again (0.13 s of CPU).
    Compiled with a fixed hash seed, so two controller processes give the same zip (the copy task changes nothing)."""
    import hashlib
    import io
    import sys
    import zipfile
    code = ("import hashlib; from ansible_collections.gpufleet.preflight.plugins.action import health_check_bundle as b; "
            "print(hashlib.sha256(b.bundle_bytes()[0]).hexdigest())")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(entry for entry in sys.path if entry))  # ansible-test exports none
    digests = set(subprocess.check_output([sys.executable, "-c", code], universal_newlines=True, env=env).strip()
                  for _attempt in range(2))
    assert len(digests) == 1
    data, _modules = health_check_bundle.bundle_bytes()
    assert hashlib.sha256(data).hexdigest() in digests
    names = set(zipfile.ZipFile(io.BytesIO(data)).namelist())
    sources = [name for name in names if name.endswith(".py") and name != "__main__.py"
               and zipfile.ZipFile(io.BytesIO(data)).getinfo(name).file_size]
    assert sources and all(name[:-3] + ".pyc" in names for name in sources)
