# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gpus collector against this host's real nvidia-smi, or the fact that there is none."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import subprocess

from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _gpus
from ansible_collections.gpufleet.preflight.plugins.module_utils._run import find_executable, run_with_timeout, search_path


def test_gpus_on_this_host():
    smi = find_executable("nvidia-smi", search_path(_gpus.DEFAULT_SEARCH_DIRS))
    facts = _gpus.collect_gpus(run_with_timeout, timeout=30)
    if smi is None:
        assert facts["state"] == "not_found" and facts["present"] is False
        assert facts["message"].startswith("nvidia-smi not found on PATH or in /usr/bin")
        return
    listed = subprocess.run([smi, "-L"], stdout=subprocess.PIPE, universal_newlines=True, timeout=30, check=False)
    assert facts["state"] == "ok", facts["message"]
    assert facts["count"] == len([line for line in listed.stdout.splitlines() if line.startswith("GPU ")])
    assert facts["driver_version"] and facts["cuda_version"]
    for dev in facts["devices"]:
        assert dev["uuid"] in listed.stdout
        assert dev["memory_total_bytes"] > 0 and dev["compute_capability"]
        assert isinstance(dev["compute_apps"], list)
