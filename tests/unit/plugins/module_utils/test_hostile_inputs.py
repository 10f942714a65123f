# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Hostile and broken inputs (issue 28's adversarial pass): garbage from nvidia-smi and the InfiniBand tree, numbers
that overflow in planted peaks and ledger files, held locks with garbage pids, non-UTF-8 metrics and 5 MB observed
values, FIFOs and symlinks where state files belong; each is handled by name, never a traceback, and failed before
its fix. The scenarios that held are in docs/security.md."""

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
from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _admission_node as admission_node  # noqa: E402
from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _admission_policy as policy  # noqa: E402
from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _admission_census as census  # noqa: E402

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
    assert admission_node.load_json(str(seed)) == {}
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


# -- the textfile metrics writer -------------------------------------------------------------------------------------
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _metrics  # noqa: E402


def test_metrics_are_written_in_utf8_under_an_ascii_locale(tmp_path):
    """cron starts the health check with no LANG; where Python does not coerce the C locale (3.6, or
    PYTHONCOERCECLOCALE=0), a check name outside ASCII made the write fail ('ascii' codec) and the node's metrics
    were never written. node_exporter reads UTF-8 whatever the locale."""
    import subprocess
    import sys
    script = ("import sys; from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _metrics as m\n"
              "m.write_atomic(sys.argv[1], m.render({'ready': True, 'checks': [{'name': 'gpu_pr\\u00fcfung', "
              "'status': 'ok'}]}), 'x.prom')\n")
    env = dict(os.environ, LC_ALL="C", LANG="C", PYTHONCOERCECLOCALE="0", PYTHONUTF8="0",
               PYTHONPATH=os.pathsep.join(entry for entry in sys.path if entry))  # ansible-test units exports none
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], env=env, capture_output=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr.decode()[-400:]
    assert 'check="gpu_pr\u00fcfung"'.encode("utf-8") in (tmp_path / "x.prom").read_bytes()


def test_a_check_name_with_a_lone_surrogate_is_written(tmp_path):
    """A name decoded with surrogateescape (a non-UTF-8 path or service name) cannot be encoded as UTF-8 at all."""
    text = _metrics.render({"ready": False, "checks": [{"name": "svc_\udcff", "status": "failed"}]})
    _metrics.write_atomic(str(tmp_path), text, "y.prom")
    assert b'check="svc_' in (tmp_path / "y.prom").read_bytes()
    assert [p.name for p in tmp_path.iterdir()] == ["y.prom"]


# -- the reports' bounding ---------------------------------------------------------------------------------------------
from ansible_collections.gpufleet.preflight.plugins.plugin_utils import _report  # noqa: E402


def _huge_observed_result(size):
    names = ["A" * size]          # a GPU name of `size` characters: what a broken or hostile nvidia-smi prints
    check = {"name": "gpu_model", "ok": False, "status": "failed", "observed": names, "expected": ["H100"],
             "message": "GPU model is not H100", "profile": "always"}
    return {"ready": False, "checks": [check], "ansible_facts": {}}


def test_a_check_observed_value_of_5_mb_is_bounded_in_every_report():
    """MESSAGE_KEPT bounded a check's message, but its ``observed`` (node-made: GPU names, kernel lines) went whole
    into the JSON report and twice (repr) into the JUnit one, for every host."""
    report = _report.build_report({"n%d" % i: _huge_observed_result(5 * 1024 ** 2) for i in range(3)})
    for render in (_report.render_json, _report.render_junit, _report.render_markdown):
        assert len(render(report)) < 200 * 1024, render.__name__
    kept = report["hosts"]["n0"]["checks"][0]["observed"]
    assert isinstance(kept, str) and "cut" in kept


def test_a_small_observed_value_keeps_its_type():
    report = _report.build_report({"n0": _huge_observed_result(10)})
    assert report["hosts"]["n0"]["checks"][0]["observed"] == ["A" * 10]


def test_a_probe_printing_50_mb_is_parsed_only_in_part(monkeypatch):
    """Parsing 50 MB of ``-q`` took 8.2 s here, after the probe's timeout and outside its budget."""
    big = "GPU 00000000:18:00.0\n" + "    Fabric\n        State : Completed\n" * (50 * 1024 ** 2 // 40)
    seen = []
    monkeypatch.setattr(_gpu_probes, "parse_query", lambda text: seen.append(len(text)) or {})
    entry = _gpu_probes._one(lambda argv, timeout: (0, big, ""), "nvidia-smi", "query", 5)
    assert entry["state"] == "ok" and seen and seen[0] <= 8 * 1024 ** 2 and "only the first" in entry["message"]


def test_probe_output_of_binary_garbage_or_another_locale_gives_no_gpus():
    """Held: 5 MB of random bytes (decoded with replacement) and a German -q parse to nothing, no traceback."""
    import random
    rng = random.Random(1)
    garbage = bytes(rng.getrandbits(8) for _byte in range(512 * 1024)).decode("utf-8", "replace")
    for text in (garbage, "GPU 0: X (UUID: GPU-aa)\n  Verbindung 0: 26 GB/s\n"):
        for name in ("nvlink_status", "nvlink_errors", "query"):
            entry = _gpu_probes._one(lambda argv, timeout: (0, text, ""), "nvidia-smi", name, 5)
            assert entry["state"] == "ok"
    assert _gpu_probes.parse_dcgm_diag(garbage) == []


def test_seed_peaks_that_are_a_fifo_a_symlink_or_hold_bad_numbers_are_dropped(tmp_path):
    """Held: a FIFO (never blocks), a symlink (never followed), negative, zero, NaN, strings, a list; keys of
    another tree never count for this one."""
    import time
    fifo, link, target = tmp_path / "fifo.json", tmp_path / "link.json", tmp_path / "target.json"
    os.mkfifo(str(fifo))
    target.write_text('{"t:x.cu": {"peak_bytes": 4096}}')
    os.symlink(str(target), str(link))
    bad = tmp_path / "bad.json"
    bad.write_text('{"t:a.cu": {"peak_bytes": -1e12}, "t:b.cu": {"peak_bytes": 0}, "t:c.cu": {"peak_bytes": NaN}, '
                   '"t:d.cu": {"peak_bytes": "4GiB"}, "t:e.cu": [1], "other:f.cu": {"peak_bytes": 1e15}}')
    config = admission.load_config(str(_write(tmp_path / "admit.json", {
        "seed_peaks": [str(fifo), str(link), str(bad)], "tree": "t"})))
    started = time.monotonic()
    peaks = admission.node_peaks(config)
    assert time.monotonic() - started < 5
    assert sorted(peaks) == ["other:f.cu"]
    assert census.too_big(peaks, 1024 ** 3, "t") == []


def test_a_ledger_entry_whose_pid_now_names_another_process_is_reclaimed():
    """A launcher SIGKILLed (its compiler with it) whose pid is reused: the live pid held its reservation forever
    (pid 1 with 1 TB, 30 days old, kept every compile of the node waiting). The entry's start time names the
    process; a pid that started at another time is another process."""
    import time
    me = os.getpid()
    mine = admission_node.pid_start(me)
    assert mine is not None
    entry = {"state": "running", "bytes": 10 ** 12, "since": time.time() - 86400 * 30}
    ledger = {str(me): dict(entry, pid_start=mine - 1), "1": dict(entry, pid_start=admission_node.pid_start(1) + 7)}
    assert policy.reclaim(ledger, admission_node.pid_alive, admission_node.pid_start) == {}
    ledger = {str(me): dict(entry, pid_start=mine)}
    assert list(policy.reclaim(ledger, admission_node.pid_alive, admission_node.pid_start)) == [str(me)]


def test_a_world_writable_or_foreign_state_dir_is_refused(tmp_path, capsys):
    """Anyone who can write the state dir can plant a ledger entry for pid 1 (with its real start time) and every
    compile of the node waits; a world-writable one was used as it was."""
    state = tmp_path / "state"
    state.mkdir()
    os.chmod(str(state), 0o777)
    config = _write(tmp_path / "admit.json", {"state_dir": str(state), "peaks_path": str(tmp_path / "p" / "peaks.json"),
                                              "tree": "t", "budget_bytes": 1024 ** 3, "settle_seconds": 0})
    assert admission.main(["--config=%s" % config, "true", "-c", "x.cu"]) == 2
    assert "writable by every user" in capsys.readouterr().err
    if os.geteuid() != 0:
        return   # chown to another user needs root
    os.chmod(str(state), 0o755)
    os.chown(str(state), 4242, 4242)
    assert admission.main(["--config=%s" % config, "true", "-c", "x.cu"]) == 2
    assert "owned by uid 4242" in capsys.readouterr().err
