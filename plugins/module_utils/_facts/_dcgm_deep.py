# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Deeper DCGM diagnostics (issue 37 item 2): ``dcgmi diag -r N -j`` at level 2 (3 and 4 opt-in), run only on an idle
node (no compute process on the GPUs, no compile admitted by the build admission ledger) within a time budget, the
result kept on the node with ``verified_at`` and ``valid_until``; the node-local check reads the kept result and never
reruns the diagnostic. Pure parsers and decisions first; the few functions that read files or run dcgmi last."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import time

from ansible_collections.gpufleet.preflight.plugins.module_utils._atomic import write_file
from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _bandwidth_tests

LEVELS = (2, 3, 4)
DEFAULT_LEVEL = 2
DEFAULT_VALID_HOURS = 24.0
STATE_FILE = _bandwidth_tests.RESULT_DIR + "/" + _bandwidth_tests.RESULT_FILES["dcgm_diag"]
LEDGER_FILE = "ledger.json"
_RESULTS = ("pass", "fail", "warn", "skip")


def diag_command(level):
    return "dcgmi diag -r %d -j" % int(level)


def _tests_of(document):
    """The ``test_categories`` of a ``dcgmi diag -j`` document (DCGM 3.x ``DCGM GPU Diagnostic``, 4.x ``DCGM
    Diagnostic``)."""
    if not isinstance(document, dict):
        return None
    for key in ("DCGM GPU Diagnostic", "DCGM Diagnostic"):
        if isinstance(document.get(key), dict):
            return document[key].get("test_categories")
    return document.get("test_categories")


def _gpu_of(result):
    for key in ("gpu_id", "gpu_ids", "entity_id"):
        if result.get(key) not in (None, ""):
            return str(result[key])
    return None


def _warnings_of(result):
    words = []
    for warning in result.get("warnings") or ():
        if isinstance(warning, dict):
            text = warning.get("warning") or warning.get("message") or ""
            if warning.get("error_id") is not None:
                text = "%s (DCGM error %s)" % (text, warning["error_id"])
            words.append(text.strip())
        elif warning:
            words.append(str(warning))
    if result.get("info"):
        info = result["info"]
        words.extend(str(item) for item in (info if isinstance(info, list) else [info]) if item)
    return "; ".join(word for word in words if word)


def parse_dcgm_json(text):
    """``dcgmi diag -r N -j`` output -> ``[{"category", "test", "gpu", "result", "detail"}]`` (one row per test and
    GPU; result Pass/Fail/Warn/Skip); ValueError where the text is no diagnostic document."""
    document = json.loads(text or "")
    categories = _tests_of(document)
    if not isinstance(categories, list):
        raise ValueError("no test_categories in the dcgmi diag document")
    rows = []
    for category in categories:
        if not isinstance(category, dict):
            continue
        for test in category.get("tests") or ():
            if not isinstance(test, dict):
                continue
            for result in test.get("results") or ():
                if not isinstance(result, dict) or str(result.get("status", "")).lower() not in _RESULTS:
                    continue
                rows.append({"category": category.get("category"), "test": test.get("name"), "gpu": _gpu_of(result),
                             "result": str(result["status"]).capitalize(), "detail": _warnings_of(result)})
    return rows


def failures(rows):
    """The rows that fail the node: ``Fail`` only (Warn and Skip are reported, not failed)."""
    return [row for row in rows or () if row.get("result") == "Fail"]


def admitted_compiles(ledger):
    """Pids of compiles the admission ledger has started (``state: running``) or queued (``waiting``); the ledger is
    read as ``_admission`` writes it, never changed here."""
    if not isinstance(ledger, dict):
        return []
    return sorted(pid for pid, entry in ledger.items()
                  if isinstance(entry, dict) and entry.get("state") in ("running", "waiting"))


def idle_reason(compute_apps, admitted, alive=lambda pid: True):
    """Why the node is not idle (a string), or None: a compute process on a GPU, or a compile the ledger admitted
    whose launcher still lives."""
    apps = [app for app in compute_apps or () if app]
    if compute_apps is None:
        return "the GPUs' compute processes could not be listed"
    if apps:
        names = ", ".join("%s (pid %s)" % (app.get("name") or "?", app.get("pid")) for app in apps[:3]
                          if isinstance(app, dict)) or str(apps[:3])
        return "%d compute process(es) on the GPUs: %s" % (len(apps), names)
    live = [pid for pid in admitted or () if alive(pid)]
    if live:
        return "%d compile(s) admitted by the build admission ledger (pid %s)" % (len(live), ", ".join(map(str, live[:5])))
    return None


def kept_result(level, rows, seconds, now, valid_hours):
    """The record kept on the node: the verdict, when verified and until when it is valid."""
    failed = failures(rows)
    return {"level": int(level), "command": diag_command(level), "passed": not failed, "seconds": seconds,
            "verified_at": round(now, 3), "valid_until": round(now + float(valid_hours) * 3600, 3),
            "failures": failed, "tests": rows}


# ---- I/O below: reads the ledger and the kept record, runs dcgmi ------------------------------------------------


def read_ledger(state_dir):
    """The admission ledger under ``state_dir`` (read-only: no lock taken, nothing reclaimed); {} where absent."""
    try:
        with open(os.path.join(state_dir, LEDGER_FILE)) as handle:
            data = json.load(handle)
    except (IOError, OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def pid_alive(pid):
    try:
        os.kill(int(pid), 0)
    except (OSError, ValueError):
        return False
    return True


def load_kept(path):
    try:
        with open(path) as handle:
            data = json.load(handle)
    except (IOError, OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def save_kept(path, record):
    """Write ``record`` atomically (a reader sees the old or the new one, never half); 0644: a result others read."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    write_file(path, json.dumps(record, sort_keys=True), mode=0o644)


def run_deep_diag(run, dcgmi, level, busy, budget, state_path, valid_hours=DEFAULT_VALID_HOURS, now=time.time):
    """Run ``dcgmi diag -r level -j`` when ``busy`` is None, for at most ``budget`` seconds; keep a result that
    parsed at ``state_path``. Returns ``{state, seconds, command, message, kept}``; never runs beside work."""
    command = diag_command(level)
    entry = {"state": "ok", "seconds": 0.0, "command": command, "message": "", "kept": None}
    if int(level) not in LEVELS:
        entry.update(state="error", message="DCGM level %s is not one of %s" % (level, ", ".join(map(str, LEVELS))))
    elif dcgmi is None:
        entry.update(state="absent", message="dcgmi not installed")
    elif busy:
        entry.update(state="not_run", message="%s not run: %s (an active test runs only on an idle node)" % (command, busy))
    if entry["state"] != "ok":
        return entry
    started = time.monotonic()
    rc, out, err = run([dcgmi, "diag", "-r", str(int(level)), "-j"], float(budget))
    entry["seconds"] = round(time.monotonic() - started, 3)
    if rc is None:
        entry.update(state="timeout", message="%s ran past its budget of %.1fs and was killed" % (command, float(budget)))
        return entry
    try:
        rows = parse_dcgm_json(out)
    except ValueError:
        first = next((line.strip() for line in (err or out or "").splitlines() if line.strip()), "no output")
        entry.update(state="error", message="%s exited %s: %s (is nv-hostengine running?)" % (command, rc, first))
        return entry
    entry["kept"] = kept_result(level, rows, entry["seconds"], now(), valid_hours)
    save_kept(state_path, entry["kept"])
    return entry


def compute_apps_of(gpus):
    """Every compute process the ``gpufleet_gpus`` facts list, or None where they could not be listed (or no GPU
    was listed: an active test needs GPUs it can see)."""
    devices = (gpus or {}).get("devices") or []
    if not devices or any(dev.get("compute_apps") is None for dev in devices):
        return None
    return [app for dev in devices for app in dev["compute_apps"]]


def busy_reason(gpus, params):
    """The idle gate every active test passes: why the node is busy (a string), or None (``gpus`` facts, the
    admission ledgers under ``params["admission_state_dirs"]``)."""
    admitted = []
    for state_dir in params.get("admission_state_dirs") or ():
        admitted.extend(admitted_compiles(read_ledger(state_dir)))
    busy = idle_reason(compute_apps_of(gpus), admitted, pid_alive)
    if busy and (gpus or {}).get("state") not in (None, "ok"):
        busy = "the GPUs could not be listed (%s)" % gpus.get("message")
    return busy


def summary(test, entry):
    """One line a person reads: how the test went and until when its result holds, or why it did not run."""
    kept = entry.get("kept")
    if not kept:
        return "%s: %s" % (test, entry.get("message") or entry.get("state"))
    failures = [row if isinstance(row, str) else "%s on GPU %s" % (row.get("test"), row.get("gpu")) for row in kept.get("failures") or ()]
    verdict = "passed" if kept.get("passed") else "FAILED: " + "; ".join(failures[:3]) + ("; ..." if len(failures) > 3 else "")
    if kept.get("judged") is False:
        verdict = "measured, no verdict (%s)" % entry.get("message")
    return "%s: %s in %.0f s: %s; valid until %s" % (test, entry["command"], entry["seconds"], verdict,
                                                     time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(kept["valid_until"])))


def run_active_test(run, gpus, executable, params, now=time.time):
    """The ``active_test`` module's work: the idle gate, then ``params["test"]`` (the DCGM diagnostic, or a bandwidth
    test of ``_bandwidth_tests``) within ``params["budget"]``, kept at ``result_path``; with its ``summary``."""
    busy = busy_reason(gpus, params)
    test = params.get("test") or "dcgm_diag"
    if test != "dcgm_diag":
        entry = _bandwidth_tests.run_bandwidth_test(run, test, executable, busy, params, gpus,
                                                    lambda record: save_kept(params["result_path"], record), now)
    else:
        entry = run_deep_diag(run, executable, params["level"], busy, params["budget"], params["result_path"],
                              params["valid_hours"], now)
    entry["summary"] = summary(test, entry)
    return entry
