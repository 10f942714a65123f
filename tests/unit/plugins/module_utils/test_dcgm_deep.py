# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Deeper DCGM diagnostics (issue 37 item 2): the ``-j`` parser on documents in NVIDIA's format, the idle gate (compute
processes, a live admission ledger entry), the kept result and its validity window, and runs of the stand-in dcgmi:
never beside work, never past the budget."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import subprocess
import time

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _dcgm_deep
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _gpu_health_checks
from ansible_collections.gpufleet.preflight.plugins.module_utils._run import run_with_timeout

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures", "gpus", "dcgm")
DCGMI = os.path.normpath(os.path.join(HERE, "..", "..", "..", "fleet", "stubs", "dcgmi"))
NOW = 1764900000.0


def read(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def test_level_2_document_parses_one_row_per_test_and_gpu():
    rows = _dcgm_deep.parse_dcgm_json(read("diag-r2-pass.json"))
    assert len(rows) == 17 and not _dcgm_deep.failures(rows)
    assert {"category": "Hardware", "test": "GPU Memory", "gpu": "1", "result": "Pass", "detail": ""} in rows
    assert [r["detail"] for r in rows if r["test"] == "PCIe" and r["gpu"] == "0"] == ["GPU 0 GPU to Host bandwidth:\t\t25.12 GB/s"]


def test_level_2_memory_failure_names_gpu_and_dcgm_error():
    failed = _dcgm_deep.failures(_dcgm_deep.parse_dcgm_json(read("diag-r2-memory-fail.json")))
    assert [(r["test"], r["gpu"]) for r in failed] == [("GPU Memory", "1")]
    assert "out of memory (DCGM error 83)" in failed[0]["detail"]


def test_dcgm_4_document_is_read_too():
    text = json.dumps({"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [
        {"name": "memory", "results": [{"entity_group": "GPU", "entity_id": 3, "status": "Fail",
                                        "warnings": [{"warning": "bad page", "error_id": 12}]}]}]}]}})
    assert _dcgm_deep.parse_dcgm_json(text) == [{"category": "Hardware", "test": "memory", "gpu": "3", "result": "Fail",
                                                 "detail": "bad page (DCGM error 12)"}]


@pytest.mark.parametrize("text", ["", "Error: Unable to connect to host engine.", "[]", '{"x": 1}', "null"])
def test_what_is_no_diagnostic_document_is_a_value_error(text):
    with pytest.raises(ValueError):
        _dcgm_deep.parse_dcgm_json(text)


def test_idle_gate():
    assert _dcgm_deep.idle_reason([], []) is None
    assert "could not be listed" in _dcgm_deep.idle_reason(None, [])
    assert "1 compute process(es) on the GPUs: python3 (pid 4425)" in _dcgm_deep.idle_reason([{"pid": 4425, "name": "python3"}], [])
    ledger = {"4711": {"state": "running", "bytes": 1, "since": 1}, "4712": {"state": "done"}, "bad": "x"}
    assert _dcgm_deep.admitted_compiles(ledger) == ["4711"]
    assert "admitted by the build admission ledger (pid 4711)" in _dcgm_deep.idle_reason([], ["4711"])
    assert _dcgm_deep.idle_reason([], ["4711"], alive=lambda pid: False) is None   # its launcher is gone


def test_kept_result_is_judged_without_rerunning():
    rows = _dcgm_deep.parse_dcgm_json(read("diag-r2-pass.json"))
    kept = _dcgm_deep.kept_result(2, rows, 95.0, NOW, 24)
    assert kept["valid_until"] - kept["verified_at"] == 24 * 3600 and kept["passed"]
    ok, message = _gpu_health_checks.judge_kept(kept, 24, NOW + 3600)
    assert ok and "passed 1.0 h ago" in message
    ok, message = _gpu_health_checks.judge_kept(kept, 12, NOW + 13 * 3600)
    assert not ok and "expired (13.0 h old, 12 h allowed)" in message and "to refresh" in message
    ok, message = _gpu_health_checks.judge_kept(None, 24, NOW)
    assert not ok and message.startswith("no DCGM level-2 result is kept on the node: run ") and "to refresh" in message
    ok, message = _gpu_health_checks.judge_kept(kept, 24, NOW, min_level=4)
    assert not ok and "level 2, level 4 is required" in message
    bad = _dcgm_deep.kept_result(2, _dcgm_deep.parse_dcgm_json(read("diag-r2-memory-fail.json")), 95.0, NOW, 24)
    ok, message = _gpu_health_checks.judge_kept(bad, 24, NOW + 60)
    assert not ok and "GPU Memory on GPU 1" in message and "drain the node" in message
    assert not _gpu_health_checks.judge_kept({"verified_at": "x", "level": 2}, 24, NOW)[0]


@pytest.fixture
def node(tmp_path):
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    shutil.copy(DCGMI, str(tmp_path / "dcgmi"))

    def run(argv, timeout):
        return run_with_timeout(argv, timeout, env=dict(os.environ, GPUFLEET_STUB_DIR=str(stubs)))
    return {"dir": stubs, "dcgmi": str(tmp_path / "dcgmi"), "run": run, "state": str(tmp_path / "state" / "dcgm.json")}


def runs(node):
    path = node["dir"] / "dcgm-runs.log"
    return path.read_text().splitlines() if path.exists() else []


def test_level_2_run_keeps_its_result(node):
    (node["dir"] / "dcgm-diag-r2.json").write_text(read("diag-r2-memory-fail.json"))
    entry = _dcgm_deep.run_deep_diag(node["run"], node["dcgmi"], 2, None, 30, node["state"], 12, now=lambda: NOW)
    assert entry["state"] == "ok" and runs(node) == ["diag -r 2 -j"]
    kept = _dcgm_deep.load_kept(node["state"])
    assert kept == entry["kept"] and not kept["passed"] and kept["valid_until"] == NOW + 12 * 3600


def test_busy_node_never_starts_the_diagnostic(node, tmp_path):
    (node["dir"] / "dcgm-diag-r2.json").write_text(read("diag-r2-pass.json"))
    launcher = subprocess.Popen(["sleep", "60"])
    try:    # a real launcher pid in the ledger, as _admission writes it
        state_dir = tmp_path / "admission"
        state_dir.mkdir()
        (state_dir / "ledger.json").write_text(json.dumps({str(launcher.pid): {
            "state": "running", "bytes": 2 << 30, "since": time.time(), "group": "b1"}}))
        admitted = _dcgm_deep.admitted_compiles(_dcgm_deep.read_ledger(str(state_dir)))
        busy = _dcgm_deep.idle_reason([], admitted, _dcgm_deep.pid_alive)
        entry = _dcgm_deep.run_deep_diag(node["run"], node["dcgmi"], 2, busy, 30, node["state"])
        assert entry["state"] == "not_run" and "admitted by the build admission ledger (pid %d)" % launcher.pid in entry["message"]
    finally:
        launcher.kill()
        launcher.wait()
    assert runs(node) == [] and _dcgm_deep.load_kept(node["state"]) is None
    assert _dcgm_deep.idle_reason([], admitted, _dcgm_deep.pid_alive) is None   # the launcher gone: idle again


def test_hung_diagnostic_is_killed_at_its_budget(node):
    (node["dir"] / "sleep-dcgm").write_text("60")
    started = time.monotonic()
    entry = _dcgm_deep.run_deep_diag(node["run"], node["dcgmi"], 3, None, 1.5, node["state"])
    assert time.monotonic() - started < 6
    assert entry["state"] == "timeout" and "ran past its budget of 1.5s" in entry["message"]
    assert _dcgm_deep.load_kept(node["state"]) is None


def test_no_hostengine_absent_dcgmi_and_bad_level(node):
    down = _dcgm_deep.run_deep_diag(node["run"], node["dcgmi"], 2, None, 30, node["state"])
    assert down["state"] == "error" and "is nv-hostengine running?" in down["message"]
    assert _dcgm_deep.run_deep_diag(node["run"], None, 2, None, 30, node["state"])["state"] == "absent"
    assert _dcgm_deep.run_deep_diag(node["run"], node["dcgmi"], 1, None, 30, node["state"])["state"] == "error"


def test_readiness_check_reads_the_kept_result_and_says_how_to_refresh():
    dev = {"index": 0, "name": "NVIDIA B200", "uuid": "GPU-aa", "compute_apps": []}
    kept = _dcgm_deep.kept_result(2, _dcgm_deep.parse_dcgm_json(read("diag-r2-pass.json")), 95.0, NOW, 24)

    def facts(record):
        return {"gpus": {"present": True, "state": "ok", "count": 1, "devices": [dev],
                         "dcgm_result": {"path": "/var/lib/gpufleet/dcgm-diag.json", "record": record}}}
    assert _gpu_health_checks.check_dcgm_result(facts(kept), {}) is None   # not asked for: no cost, no verdict
    policy = {"dcgm_result_max_age": 12, "dcgm_result_min_level": 2}
    fresh = _gpu_health_checks.check_dcgm_result(facts(kept), policy, now=lambda: NOW + 3600)
    assert fresh["ok"], fresh
    stale = _gpu_health_checks.check_dcgm_result(facts(kept), policy, now=lambda: NOW + 13 * 3600)
    assert not stale["ok"] and "expired" in stale["message"] and "to refresh /var/lib/gpufleet/dcgm-diag.json" in stale["message"]
    missing = _gpu_health_checks.check_dcgm_result(facts(None), policy, now=lambda: NOW)
    assert not missing["ok"] and "no DCGM level-2 result is kept" in missing["message"]
