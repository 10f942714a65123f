# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The admission launcher's reads of the node and its config file (plugins/module_utils/_build/_admission.py); its
pure policy in test_admission_policy.py, the launcher with real processes and cgroups in tests/build/test_admission*.py."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import io
import json
import os
import subprocess
import sys

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _admission as admission

GIB = 1024 ** 3


def test_load_config_refuses_unknown_keys_and_decimal_units_naming_them(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"budget_bytes": "64GB"}))
    with pytest.raises(ValueError, match="budget_bytes: '64GB' is ambiguous"):
        admission.load_config(str(config))
    config.write_text(json.dumps({"margn": 1.2}))
    with pytest.raises(ValueError, match="unknown admission setting.*margn"):
        admission.load_config(str(config))
    with pytest.raises(ValueError, match="not a readable regular file"):
        admission.load_config(str(tmp_path / "missing.json"))
    config.write_text(json.dumps({"default_bytes": "1GiB", "default_times": 4}))
    loaded = admission.load_config(str(config))
    assert loaded["default_bytes"] == 4 * GIB and loaded["state_dir"] == str(tmp_path)
    assert loaded["peaks_path"] == str(tmp_path / "peaks.json")


def test_check_names_the_sources_above_the_budget(tmp_path):
    (tmp_path / "peaks.json").write_text(json.dumps({"t:fp8.cu": {"peak_bytes": 15 * GIB, "seconds": 900}}))
    (tmp_path / "seed.json").write_text(json.dumps({"t:moe.cu": {"peak_bytes": 13 * GIB, "seconds": 600},
                                                    "t:small.cu": {"peak_bytes": GIB}}))
    config = dict(admission.DEFAULTS, peaks_path=str(tmp_path / "peaks.json"), seed_peaks=[str(tmp_path / "seed.json")],
                  tree="t", budget_bytes=12 * GIB, reserve_bytes=0)
    out = io.StringIO()
    assert admission.check(config, out) == 0
    report = json.loads(out.getvalue())
    assert [row["source"] for row in report["too_big"]] == ["t:fp8.cu", "t:moe.cu"]
    assert "t:fp8.cu (15.0 GiB, held when compiled)" in report["message"] and report["budget_bytes"] <= 12 * GIB


def test_a_dead_launchers_doorbell_goes_with_its_entry(tmp_path):
    """A launcher SIGKILLed while it waited leaves its FIFO; the next one that reads the ledger removes it with the
    entry. A live process's doorbell (a pid in use) is left alone."""
    node = admission.node
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    config = {"state_dir": str(tmp_path)}
    ledger = {str(dead.pid): {"state": "waiting", "bytes": 1, "since": 1.0},
              str(os.getpid()): {"state": "waiting", "bytes": 1, "since": 1.0, "pid_start": -1}}
    node.save_json(str(tmp_path / "ledger.json"), ledger)
    for pid in (dead.pid, os.getpid()):
        os.close(node.open_doorbell(str(tmp_path), pid))
    kept = admission.read_ledger(config)
    assert list(kept) == []   # both reclaimed: one is dead, the other's start time is not this process's
    assert not os.path.exists(node.doorbell_path(str(tmp_path), dead.pid))
    assert os.path.exists(node.doorbell_path(str(tmp_path), os.getpid()))
