# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Round 4 adversarial pass (issue 28): reproducers written from outside the code against this round's additions;
each failed before its fix. The scenarios that held are in docs/security.md."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _gpu_probes, _gpus


def _fake_smi(tmp_path, query_gpu_out, q_out="", nvlink_out=""):
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\nexit 0\n")
    os.chmod(str(smi), 0o755)
    fields = [field for field, _key in _gpus.QUERY_FIELDS]

    def run(argv, timeout):
        if any(a.startswith("--query-gpu=") for a in argv):
            return 0, query_gpu_out(fields), ""
        if "-q" in argv:
            return 0, q_out, ""
        if "nvlink" in argv:
            return 0, nvlink_out, ""
        return 0, "", ""
    return run, str(tmp_path)


def test_garbage_bus_id_from_query_gpu_does_not_traceback(tmp_path):
    """A driver (or a wrapper) that prints a bus id that is not hex: the -q probe's join by bus id must not raise."""
    def row(fields):
        cells = ["N/A"] * len(fields)
        cells[fields.index("index")] = "0"
        cells[fields.index("uuid")] = "GPU-aa"
        cells[fields.index("pci.bus_id")] = "ZZZZ:18:00.0"
        return ", ".join(cells) + "\n"
    q_out = "GPU 00000000:18:00.0\n    Serial Number : 123\n"
    run, where = _fake_smi(tmp_path, row, q_out=q_out)
    facts = _gpus.collect_gpus(run=run, search_paths=[where], probes=("query",))
    assert facts["devices"][0]["query"] is None


def test_normal_bus_id_of_garbage_is_itself():
    assert _gpu_probes.normal_bus_id("ZZZZ:18:00.0") == "ZZZZ:18:00.0"
    assert _gpu_probes.normal_bus_id("\x00 :x:y") == "\x00 :X:Y"


# -- the admission launcher: numbers a seed peaks file or a ledger may hold --------------------------------------------
from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _admission as admission  # noqa: E402
from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _admission_policy as policy  # noqa: E402

HUGE_INT = "1" + "0" * 400      # valid JSON, an int Python cannot turn into a float (math.isnan raises OverflowError)


def _config(tmp_path, seed_text):
    seed = tmp_path / "seed.json"
    seed.write_text(seed_text)
    config = admission.load_config(str(_write(tmp_path / "admit.json", {"seed_peaks": [str(seed)], "tree": "t"})))
    return config


def _write(path, data):
    import json
    path.write_text(json.dumps(data))
    return path


def test_seed_peak_of_a_400_digit_integer_is_dropped_not_a_traceback(tmp_path):
    config = _config(tmp_path, '{"t:a.cu": {"peak_bytes": %s, "seconds": 3}, "t:b.cu": {"peak_bytes": 4096}}' % HUGE_INT)
    peaks = admission.node_peaks(config)
    assert sorted(peaks) == ["t:b.cu"]


def test_seed_peak_near_the_float_maximum_never_overflows_the_margin(tmp_path):
    config = _config(tmp_path, '{"t:a.cu": {"peak_bytes": 1.7e308, "seconds": 3}}')
    peaks = admission.node_peaks(config)
    needed, _learned = policy.expected_bytes(peaks, "t:a.cu", 5 * 1024 ** 3, 1.15)
    assert needed >= 0
    out = __import__("io").StringIO()
    assert admission.check(config, out=out) == 0


def test_seed_seconds_of_a_400_digit_integer_is_dropped(tmp_path):
    config = _config(tmp_path, '{"t:a.cu": {"peak_bytes": 4096, "seconds": %s}}' % HUGE_INT)
    assert admission.node_peaks(config) == {}


def test_ledger_entry_with_a_400_digit_reservation_is_dropped_not_a_traceback():
    import json
    ledger = json.loads('{"1": {"state": "running", "bytes": %s, "since": 1}}' % HUGE_INT)
    assert policy.reclaim(ledger, lambda pid: True) == {}


def test_a_sparse_seed_file_larger_than_the_cap_is_never_read(tmp_path, monkeypatch):
    """A 1 TiB sparse seed (truncate -s 1T): read whole, json.load would ask for a terabyte (MemoryError is not
    caught). The cap is lowered here so the test reads nothing large either way."""
    seed = tmp_path / "seed.json"
    with open(str(seed), "wb") as handle:
        handle.truncate(1024 ** 4)
    monkeypatch.setattr(admission, "MAX_JSON_BYTES", 1024 ** 2, raising=False)
    read = []
    monkeypatch.setattr(admission.json, "load", lambda handle: read.append(1) or {})   # never reads it
    assert admission.load_json(str(seed)) == {}
    assert read == []


# -- the health check's lock ------------------------------------------------------------------------------------------
from ansible_collections.gpufleet.preflight.plugins.module_utils._node_check import _hc_runtime  # noqa: E402


def _held_lock_with(tmp_path, content):
    import fcntl
    path = str(tmp_path / "health-check-n1.lock")
    with open(path, "w") as handle:
        handle.write(content)
    holder = os.open(path, os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX)
    return path, holder


def test_a_held_lock_whose_pid_is_infinity_is_reported_not_a_traceback(tmp_path):
    """JSON reads 1e999 as inf: int(inf) raises OverflowError, which the holder's description did not catch."""
    path, holder = _held_lock_with(tmp_path, '{"pid": 1e999, "started": 1}')
    try:
        fd, why = _hc_runtime.take_lock(path)
    finally:
        os.close(holder)
    assert fd is None and "pid unknown" in why


def test_held_locks_with_other_garbage_are_reported(tmp_path):
    for content in ('[1, 2]', '"x"', '{"pid": null}', '\x00' * 5000, '{"pid": 1, "started": NaN}', '{"pid": -1e308}'):
        path, holder = _held_lock_with(tmp_path, content)
        try:
            fd, why = _hc_runtime.take_lock(path)
        finally:
            os.close(holder)
        assert fd is None and "still running" in why


# -- the node subset --------------------------------------------------------------------------------------------------
from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _node  # noqa: E402


def _port(tmp_path, device, number, state="4: ACTIVE"):
    port = tmp_path / "sys" / "class" / "infiniband" / device / "ports" / number
    port.mkdir(parents=True)
    (port / "state").write_text(state + "\n")
    return port


def test_an_infiniband_port_named_by_a_non_ascii_digit_is_listed_not_a_traceback(tmp_path):
    """'²'.isdigit() is True but int('²') raises ValueError: the ports' sort key and the entry both called it."""
    _port(tmp_path, "mlx5_0", "1")
    _port(tmp_path, "mlx5_0", "\u00b2")
    facts, errors = _node.collect_infiniband(str(tmp_path))
    assert [p["port"] for p in facts["ports"]] == ["\u00b2", 1] and errors == []


def test_infiniband_tree_with_odd_files_is_read(tmp_path):
    """Held: a device that is a file, a port that is a file, a state of control characters, a non-UTF-8 rate."""
    top = tmp_path / "sys" / "class" / "infiniband"
    top.mkdir(parents=True)
    (top / "plainfile").write_text("x")
    port = _port(tmp_path, "mlx5_1", "1", state="\x1b[31m4:\x00 ACTIVE")
    (port / "rate").write_bytes(b"\xff\xfe 400 Gb/sec")
    (top / "mlx5_1" / "ports" / "2").write_text("not a directory")
    facts, errors = _node.collect_infiniband(str(tmp_path))
    assert len(errors) == 1 and "plainfile" in errors[0]
    assert [p["port"] for p in facts["ports"]] == [1, 2]
    assert facts["ports"][0]["rate"] is None and facts["ports"][1]["state"] is None
