# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The nvidia-smi probes beyond the one ``--query-gpu`` call: ``nvlink -s`` (link state), ``nvlink -e`` (error
counters) and ``-q`` (the Fabric section, GPU Reset Status, GPU Recovery Action).

They run only when a check that reads them is on, side by side, each with its own timeout, all inside one budget:
a probe that does not answer in time is reported as ``timeout`` with its command, never as a fault of the node.
Pure parsers first; ``run_probes`` at the bottom does the I/O.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import time

from ansible_collections.gpufleet.preflight.plugins.module_utils._run import side_by_side

# probe name -> nvidia-smi arguments. Names are what the facts, checks and messages call them.
PROBES = (
    ("nvlink_status", ("nvlink", "-s")),
    ("nvlink_errors", ("nvlink", "-e")),
    ("query", ("-q",)),
)
PROBE_ARGS = dict(PROBES)
# Characters of a probe's output parsed: -q of 8 H100s is under 200 KB; a stub printing 50 MB is cut here.
PARSED_KEPT = 8 * 1024 ** 2

# Numbers are bounded ASCII digits: int() of a 5000-digit field raises ValueError (Python 3.11's digit limit).
_GPU_HEADER_RE = re.compile(r"^GPU\s+([0-9]{1,9}):\s*(.*?)\s*\(UUID:\s*(GPU-[0-9A-Fa-f-]+)\)\s*$")
_LINK_RE = re.compile(r"^\s*Link\s+([0-9]{1,9}):\s*(.*?)\s*$")
_SPEED_RE = re.compile(r"^([0-9]+(?:\.[0-9]+)?)\s*GB/s$", re.IGNORECASE)
_COUNTER_RE = re.compile(r"([A-Za-z][A-Za-z ]*?)\s*(?:Errors?|Counter)?\s*:\s*([0-9]{1,19}|N/A)", re.IGNORECASE)
_Q_GPU_RE = re.compile(r"^GPU\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")
_Q_ITEM_RE = re.compile(r"^(\s*)([^:]+?)\s*:\s*(.*?)\s*$")
_Q_SECTION_RE = re.compile(r"^(\s*)(\S.*?)\s*$")
_MISSING = ("", "n/a", "[n/a]", "not supported", "[not supported]", "requested functionality has been deprecated")


def _value(text):
    """A ``-q`` value: N/A, not supported and 'deprecated' (r570+) -> None."""
    cleaned = (text or "").strip()
    return None if cleaned.lower() in _MISSING else cleaned


# What ``nvlink -s`` prints under a GPU whose every link is down (the driver's own words, ``inActive`` as it spells it).
_ALL_INACTIVE_RE = re.compile(r"all links are inactive", re.IGNORECASE)
NOTE_KEPT = 200


def parse_nvlink_status(text):
    """``nvidia-smi nvlink -s`` -> ``{uuid: {"index", "name", "links": {n: GB/s or None when inactive}, "state"}}``.

    ``state``: ``links`` (links listed; ``<inactive>`` is a link that is down), ``none`` (the GPU alone: a board
    without NVLink, or one whose links the driver does not show), ``all_inactive`` (``NVML: Unable to retrieve
    NVLink information as all links are inActive``: every link down) or ``unreadable`` (anything else printed under
    the GPU, ``[Unknown Error]``; the text in ``note``). Only ``none`` may be read as "no NVLink", and only by a
    check that knows the model has none.
    """
    gpus, current = {}, None
    for line in (text or "").splitlines():
        header = _GPU_HEADER_RE.match(line.strip())
        if header:
            current = {"index": int(header.group(1)), "name": header.group(2), "links": {}, "state": "none"}
            gpus[header.group(3)] = current
            continue
        if current is None or not line.strip():
            continue
        link = _LINK_RE.match(line)
        if link:
            speed = _SPEED_RE.match(link.group(2))
            current["links"][int(link.group(1))] = float(speed.group(1)) if speed else None
            if current["state"] == "none":
                current["state"] = "links"
        elif _ALL_INACTIVE_RE.search(line):
            current["state"] = "all_inactive"
        elif current["state"] != "all_inactive":
            current["state"] = "unreadable"
            current["note"] = line.strip()[:NOTE_KEPT]
    return gpus


def _counter_key(label):
    return re.sub(r"[^a-z0-9]+", "_", label.strip().lower()).strip("_")


def parse_nvlink_errors(text):
    """``nvidia-smi nvlink -e`` -> ``{uuid: {link: {counter: value}}}``.

    Drivers print one counter per line (``Link 0: Replay Errors: 0``) or several on one line; both are read.
    ``N/A`` counters (Blackwell reports some as not supported) are left out.
    """
    gpus, current = {}, None
    for line in (text or "").splitlines():
        header = _GPU_HEADER_RE.match(line.strip())
        if header:
            current = gpus.setdefault(header.group(3), {})
            continue
        link = _LINK_RE.match(line)
        if not link or current is None:
            continue
        counters = current.setdefault(int(link.group(1)), {})
        for label, value in _COUNTER_RE.findall(link.group(2)):
            if value.upper() != "N/A":
                counters[_counter_key(label)] = int(value)
    return gpus


def parse_query(text):
    """``nvidia-smi -q`` -> ``{bus id (upper case): {section path: value}}`` for the items the checks read.

    Keys are ``Section/Item`` paths (``Fabric/State``, ``GPU Reset Status/Reset Required``, ``GPU Recovery Action``),
    nested by indentation exactly as nvidia-smi prints them.
    """
    gpus, current, stack = {}, None, []
    for line in (text or "").splitlines():
        if not line.strip():
            continue
        gpu = _Q_GPU_RE.match(line.strip()) if not line.startswith(" ") else None
        if gpu:
            current, stack = {}, []
            gpus[gpu.group(1).upper()] = current
            continue
        if current is None:
            continue
        item = _Q_ITEM_RE.match(line)
        section = _Q_SECTION_RE.match(line)
        indent = len((item or section).group(1))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if item:
            path = "/".join([name for _level, name in stack] + [item.group(2)])
            current[path] = _value(item.group(3))
        else:
            stack.append((indent, section.group(2)))
    return gpus


def query_summary(items):
    """One GPU's ``-q`` items -> the facts the checks read (None where the board does not report it)."""
    return {
        "fabric_state": items.get("Fabric/State"),
        "fabric_status": items.get("Fabric/Status"),
        "fabric_health_summary": items.get("Fabric/Health/Summary"),
        "reset_required": _yes(items.get("GPU Reset Status/Reset Required")),
        "drain_and_reset_recommended": _yes(items.get("GPU Reset Status/Drain and Reset Recommended")),
        "recovery_action": items.get("GPU Recovery Action"),
        "serial": items.get("Serial Number"),
    }


def _yes(value):
    if value is None:
        return None
    return value.strip().lower() in ("yes", "true", "1")


def normal_bus_id(bus_id):
    """``00000000:18:00.0`` (query-gpu) and ``00000000:18:00.0`` (-q) compare equal; case and domain width vary."""
    if not bus_id:
        return None
    domain, _sep, rest = bus_id.strip().upper().rpartition(":")
    head, _colon, bus = domain.rpartition(":")
    if not bus or not re.match(r"\A[0-9A-F]*\Z", head):
        return bus_id.strip().upper()  # not a bus id a driver prints: compared as it is, never a traceback
    return "%08X:%s:%s" % (int(head or "0", 16), bus, rest)


_RESULTS = ("pass", "fail", "warn", "skip")


def parse_dcgm_diag(text):
    """``dcgmi diag -r 1`` table -> ``[{"section", "test", "result", "detail"}]``: result Pass/Fail/Warn/Skip; the
    rows after a test with an empty first cell (or ``Warning``) are its detail, joined."""
    tests, section = [], None
    for line in (text or "").splitlines():
        line = line.strip()
        if line.startswith("|-----") or line.startswith("+-----"):
            section = line.strip("|+- ").split(" ")[0] or section
            continue
        if not line.startswith("|") or line.count("|") < 3:
            continue
        cells = [cell.strip() for cell in line.strip("|").split("|", 1)]
        if len(cells) < 2:  # ``|: ||||``: the bars were all at its ends, no row of the table
            continue
        first, second = cells
        if section in (None, "Metadata") or first == "Diagnostic":
            continue
        word = second.split(" ", 1)[0].lower()
        if first and first.lower() not in ("warning", "info") and word in _RESULTS:
            tests.append({"section": section, "test": first, "result": second.split(" ", 1)[0], "detail": ""})
        elif tests and second:
            tests[-1]["detail"] = (tests[-1]["detail"] + " " + second).strip()
    return tests


def probe_command(name):
    return "nvidia-smi " + " ".join(PROBE_ARGS[name])


# ---- I/O below: runs the probes -----------------------------------------------------------------------


def _one(run, smi, name, timeout):
    started = time.monotonic()
    if timeout <= 0:
        return {"state": "timeout", "seconds": 0.0, "command": probe_command(name),
                "message": "%s not run: the GPU probe budget was spent before it could start" % probe_command(name)}
    rc, out, err = run([smi] + list(PROBE_ARGS[name]), timeout)
    seconds = round(time.monotonic() - started, 3)
    entry = {"state": "ok", "seconds": seconds, "command": probe_command(name), "message": ""}
    if rc is None:
        entry.update(state="timeout", message="%s did not answer within %.1fs and was killed" % (probe_command(name), timeout))
        return entry
    if rc != 0:
        first = next((line.strip() for line in (err or out or "").splitlines() if line.strip()), "")
        entry.update(state="error", message="%s exited %s%s" % (probe_command(name), rc, ": " + first if first else ""))
        return entry
    if len(out or "") > PARSED_KEPT:   # parsing 50 MB of -q took 8 s, after the timeout and past the budget
        entry["message"] = "%s printed %d characters: only the first %d were read" % (probe_command(name), len(out), PARSED_KEPT)
        out = out[:PARSED_KEPT]
    try:
        entry["gpus"] = parse_probe(name, out)
    except Exception as exc:  # pylint: disable=broad-except  # output no driver prints: this probe unknown, not the node's facts
        entry.update(state="error", message="%s: output not understood (%s: %s)" % (probe_command(name), type(exc).__name__,
                                                                                    str(exc)[:200]))
    return entry


def parse_probe(name, out):
    """A probe's output -> its ``gpus`` (per UUID for nvlink, per bus id for ``-q``)."""
    if name == "nvlink_status":
        return parse_nvlink_status(out)
    if name == "nvlink_errors":
        return parse_nvlink_errors(out)
    return dict((bus, query_summary(items)) for bus, items in parse_query(out).items())


def run_dcgm_diag(run, dcgmi, busy, timeout):
    """``dcgmi diag -r 1`` (seconds; DCGM's quick readiness level) -- never on a node running work: ``busy`` is why
    not (a list of processes, or that they could not be listed)."""
    command = "dcgmi diag -r 1"
    if dcgmi is None:
        return {"state": "absent", "seconds": 0.0, "command": command, "message": "dcgmi not installed", "tests": None}
    if busy:
        return {"state": "not_run", "seconds": 0.0, "command": command, "tests": None,
                "message": "%s not run: %s (a diagnostic never runs beside work)" % (command, busy)}
    started = time.monotonic()
    rc, out, err = run([dcgmi, "diag", "-r", "1"], timeout)
    entry = {"state": "ok", "seconds": round(time.monotonic() - started, 3), "command": command, "message": "",
             "tests": None}
    if rc is None:
        entry.update(state="timeout", message="%s did not answer within %.1fs and was killed" % (command, timeout))
    elif not parse_dcgm_diag(out):
        first = next((line.strip() for line in (err or out or "").splitlines() if line.strip()), "no output")
        entry.update(state="error", message="%s exited %s: %s (is nv-hostengine running?)" % (command, rc, first))
    else:
        entry["tests"] = parse_dcgm_diag(out)
    return entry


def run_probes(run, smi, names, timeout, budget):
    """``{probe: {state, seconds, command, message, gpus}}`` for each probe asked for, side by side.

    Each probe waits at most ``timeout`` seconds and never past ``budget`` seconds from now: the caller (a Slurm
    HealthCheckProgram is killed at 60 s) gets an answer in time whatever the driver does.
    """
    names = [name for name, _args in PROBES if name in (names or ())]
    if not names:
        return {}
    each = min(float(timeout), float(budget))
    return side_by_side(dict((name, lambda name=name: _one(run, smi, name, each)) for name in names))
