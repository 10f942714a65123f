# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node-local health check: arguments, config, exit codes, the 80-character line, and the program itself as
the role installs it (a zip application run by a bare Python with an empty environment, as slurmd runs it)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import io
import json
import os

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._node_check import _health_check as hc
from ansible_collections.gpufleet.preflight.plugins.module_utils._node_check import _hc_runtime


def test_parse_args():
    assert hc.parse_args([], {"SLURMD_NODENAME": "n1"}) == ("slurm", hc.DEFAULT_CONFIG, False, False)
    assert hc.parse_args(["--mode", "npd", "--config", "/x", "-v"], {}) == ("npd", "/x", True, False)
    assert hc.parse_args(["--check"], {}) == ("check", hc.DEFAULT_CONFIG, False, True)
    for argv, words in ((["--mode", "nope"], "--mode must be"), (["--config"], "needs a value"), (["-x"], "unknown argument")):
        with pytest.raises(ValueError, match=words):
            hc.parse_args(argv, {})


@pytest.mark.parametrize("text,words", [
    ("{", "not JSON"),
    ("[]", "JSON object"),
    ('{"polcy": {}}', "unknown keys polcy"),
    ('{"policy": {"min_available_memry": 1}}', "unknown options min_available_memry"),
    ('{"slurm": {"reason_prefix": "two words"}}', "reason_prefix"),
    ('{"slurm": {"node_name": "gpu[1-8]"}}', "slurm: node_name: 'gpu\\[1-8\\]' is not one Slurm node name"),
    ('{"slurm": {"node_name": "ALL"}}', "not one Slurm node name"),
    ('{"slurm": {"resume": "no"}}', "resume must be true or false"),
    ('{"deadline_seconds": 0}', "deadline_seconds: 0 must be a number of seconds from 5 to 600"),
])
def test_bad_config(tmp_path, text, words):
    path = tmp_path / "c.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=words):
        hc.load_config(str(path))


def test_exit_codes_and_first_line():
    failed = dict(name="build_processes", status="failed", message="2 build processes still running: x; wait")
    unknown = dict(name="gpu_count", status="unknown", message="unknown: nvidia-smi timed out after 1 s")
    assert hc.exit_code(True, []) == 0
    assert hc.exit_code(False, [failed, unknown]) == 1
    assert hc.exit_code(False, [unknown]) == 2
    assert hc.first_line(False, [failed], "") == "not ready: build_processes: 2 build processes still running"
    # a hung probe alone: the run exits 2, and its first line (what NPD and slurmd show) says unknown, not "not ready"
    assert hc.first_line(False, [unknown], "") == "unknown: gpu_count: nvidia-smi timed out after 1 s"
    assert hc.first_line(False, [failed, unknown], "").startswith("not ready: build_processes, gpu_count")
    many = [dict(failed, name="check_number_%d" % i) for i in range(9)]
    assert len(hc.first_line(False, many, "")) == 80


def test_main_on_this_host_writes_metrics(tmp_path):
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"policy": {"profiles": [], "min_available_memory": "1MiB", "max_build_processes": 100000,
                                             "max_memory_pressure": 100}, "metrics_dir": str(tmp_path),
                                  "slurm": {"state_dir": str(tmp_path / "state")}}))
    out = io.StringIO()
    assert hc.main(["--config", str(config), "--mode", "check"], {"PATH": "/usr/bin:/bin"}, out) == 0
    assert out.getvalue().startswith("ready: ")
    assert 'gpufleet_preflight_ready{source="health_check"} 1' in (tmp_path / "gpufleet_preflight_health_check.prom").read_text()


def test_missing_config_is_unknown():
    out = io.StringIO()
    assert hc.main(["--config", "/nonexistent/c.json"], {}, out) == 2
    first = out.getvalue().splitlines()[0]
    assert first.startswith("unknown: config /nonexistent/c.json") and len(first) <= 80


def test_a_live_previous_run_is_reported_not_doubled(tmp_path):
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"policy": {"profiles": []}, "slurm": {"state_dir": str(tmp_path), "node_name": "n1"}}))
    fd, _why = _hc_runtime.take_lock(_hc_runtime.lock_path(str(tmp_path), "n1"))
    try:
        out, err = io.StringIO(), io.StringIO()
        assert hc.main(["--config", str(config), "--mode", "check"], {"PATH": "/usr/bin:/bin"}, out, err) == 2
    finally:
        os.close(fd)
    assert out.getvalue().startswith("unknown: a previous run is still running (pid ")
    assert len(out.getvalue().splitlines()) == 1 and "this run did nothing" in err.getvalue()


def test_a_check_skipped_for_a_hung_probe_is_always_shown():
    hung = dict(name="fabric", status="skipped", message="unknown, not counted against the node: nvidia-smi -q did not "
                "answer within 2.0s and was killed (set preflight_gpu_probe_timeout_fails to fail on it)")
    board = dict(name="nvlink", status="skipped", message="not applicable: no NVLink on this board")
    assert hc.shown(hung, False) and hc.shown(dict(hung, status="failed"), False)
    assert not hc.shown(board, False) and hc.shown(board, True) and not hc.shown(dict(board, status="ok"), True)


def _lock_config(tmp_path, state_dir):
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"policy": {"profiles": []}, "slurm": {"state_dir": str(state_dir), "node_name": "n1"}}))
    return str(config)


@pytest.mark.parametrize("plant", ["fifo", "symlink", "file_as_state_dir"])
def test_a_lock_that_cannot_be_taken_stops_the_run(tmp_path, plant):
    """Only the lock keeps two runs from acting in Slurm at once: a run that cannot take it (a FIFO or a symlink
    planted at the lock, a state dir that is no directory) does nothing, says why and exits 2 (unknown). It ran on."""
    state = tmp_path / "state"
    if plant == "file_as_state_dir":
        state.write_text("")
    else:
        state.mkdir()
        lock = _hc_runtime.lock_path(str(state), "n1")
        if plant == "fifo":
            os.mkfifo(lock)
        else:
            os.symlink(str(tmp_path / "elsewhere"), lock)
    out, err = io.StringIO(), io.StringIO()
    assert hc.main(["--config", _lock_config(tmp_path, state), "--mode", "check"], {"PATH": "/usr/bin:/bin"}, out, err) == 2
    assert out.getvalue().startswith("unknown: lock ") and len(out.getvalue().splitlines()) == 1, out.getvalue()
    assert "the check did not run" in err.getvalue()
    assert not (tmp_path / "elsewhere").exists()


def test_a_node_not_ready_keeps_a_log_bundle(tmp_path):
    """Issue 38, the remediation ladder's first step: bundle_dir keeps one bundle per not-ready run, none when ready."""
    policy = {"profiles": [], "min_available_memory": "1MiB", "max_build_processes": 100000, "max_memory_pressure": 100}
    bundles = tmp_path / "bundles"
    config = tmp_path / "c.json"
    for min_memory, code, kept in (("1MiB", 0, 0), ("1024TiB", 1, 1)):
        config.write_text(json.dumps({"policy": dict(policy, min_available_memory=min_memory), "bundle_dir": str(bundles),
                                      "slurm": {"state_dir": str(tmp_path / "state"), "node_name": "n1"}}))
        out = io.StringIO()
        assert hc.main(["--config", str(config), "--mode", "check"], {"PATH": "/usr/bin:/bin"}, out) == code
        assert len(os.listdir(str(bundles))) == kept if bundles.exists() else kept == 0
    assert "bundle: kept %s" % bundles in out.getvalue(), out.getvalue()
    assert os.listdir(str(bundles))[0].startswith("gpufleet-bundle-n1-")
