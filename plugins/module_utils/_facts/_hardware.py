# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Node hardware beyond the GPUs (issue 37 item 3), each part opt-in, read within a deadline and said absent (with
why) where the node cannot answer: processes stuck in D state (``/proc``, no tool), the CPU frequency governor
(``/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor``), NVMe health (``nvme smart-log -o json``), the BMC's
event log entries since the previous run (``ipmitool sel elist``, the last entry id kept beside the probe cache) and
sensors past a threshold (``ipmitool sensor``).

Pure parsers first; the readers (a ``root`` for fixture trees, a ``run`` for nvme-cli) at the bottom.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import time

from ansible_collections.gpufleet.preflight.plugins.module_utils._atomic import write_file
from ansible_collections.gpufleet.preflight.plugins.module_utils._run import find_executable

PARTS = ("d_state", "cpu_governor", "nvme", "ipmi_sel", "sensors")
D_STATE_PIDS_KEPT = 10
# /proc/<pid>/stat: "pid (comm) S ppid ..." -- comm may hold spaces and parentheses: split at the last ')'.
_STAT_RE = re.compile(r"^([0-9]{1,10}) \((.*)\) (\S) ")
_CPU_DIR = re.compile(r"^cpu[0-9]{1,6}$")
_NVME_CTRL = re.compile(r"^nvme[0-9]{1,4}$")
_HEX_ID = re.compile(r"^[0-9a-fA-F]{1,8}$")
SEL_STATE = "ipmi-sel-%s.json"  # per node: a state dir in a home shared over NFS must not mix two BMCs
SEL_KEPT = 20
# nvme-cli's smart-log JSON keys (1.x and 2.x) -> ours.
NVME_KEYS = (("critical_warning", "critical_warning"), ("avail_spare", "available_spare"),
             ("spare_thresh", "available_spare_threshold"), ("percent_used", "percentage_used"),
             ("media_errors", "media_errors"), ("num_err_log_entries", "error_log_entries"))


def parse_stat(text):
    """``/proc/<pid>/stat`` -> ``(pid, comm, state, start_ticks)`` or None."""
    match = _STAT_RE.match(text or "")
    if not match:
        return None
    rest = text[match.end():].split()
    start = int(rest[18]) if len(rest) > 18 and rest[18].isdigit() else None
    return int(match.group(1)), match.group(2), match.group(3), start


def stuck(first, second):
    """Processes in D state in both samples (same pid and start time): ``[(pid, comm)]``."""
    before = set((pid, start) for pid, _comm, state, start in first if state == "D")
    return sorted((pid, comm) for pid, comm, state, start in second if state == "D" and (pid, start) in before)


def governor_counts(governors):
    """``{cpu: governor}`` -> ``{governor: how many CPUs}``."""
    counts = {}
    for governor in governors.values():
        counts[governor] = counts.get(governor, 0) + 1
    return counts


def parse_sel(text):
    """``ipmitool sel elist`` -> ``[{id, when, sensor, event, direction}]`` (ids are hex; ``Pre-Init`` times kept)."""
    entries = []
    for line in (text or "").splitlines():
        parts = [part.strip() for part in line.split("|")]
        if len(parts) < 5 or not _HEX_ID.match(parts[0]):
            continue
        entries.append({"id": int(parts[0], 16), "when": " ".join(parts[1:3]).strip(), "sensor": parts[3],
                        "event": parts[4], "direction": parts[5] if len(parts) > 5 else None})
    return entries


def new_sel_entries(entries, last_id):
    """The entries logged since the run that saw ``last_id`` (None: first run, nothing new). A log cleared since
    (its highest id below the last one seen) counts whole."""
    if last_id is None or not entries:
        return []
    top = max(entry["id"] for entry in entries)
    if top < last_id:  # the SEL was cleared: everything in it is new
        return list(entries)
    return [entry for entry in entries if entry["id"] > last_id]


def parse_sensors(text):
    """``ipmitool sensor`` -> ``[{name, value, unit, status}]`` for the sensors with a reading."""
    sensors = []
    for line in (text or "").splitlines():
        parts = [part.strip() for part in line.split("|")]
        if len(parts) < 4 or not parts[0] or parts[1] in ("na", ""):
            continue
        sensors.append({"name": parts[0], "value": parts[1], "unit": parts[2], "status": parts[3].lower()})
    return sensors


def parse_smart_log(text):
    """``nvme smart-log -o json`` -> our health fields (ints), or None when it is not that JSON."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or "critical_warning" not in data:
        return None
    out = {}
    for theirs, ours in NVME_KEYS:
        value = data.get(theirs)
        out[ours] = int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    return out


# ---- I/O below: /proc, sysfs, nvme-cli ------------------------------------------------------------------------


def _read(path, limit=4096):
    with open(path) as handle:
        return handle.read(limit)


def _scan_states(proc):
    states = []
    for name in os.listdir(proc):
        if not name.isdigit():
            continue
        try:
            parsed = parse_stat(_read(os.path.join(proc, name, "stat")))
        except (IOError, OSError, UnicodeDecodeError):
            continue
        if parsed:
            states.append(parsed)
    return states


def read_d_state(root="/", interval=0.5, sleep=time.sleep):
    """Processes in uninterruptible sleep (D) in two scans ``interval`` seconds apart, with their kernel wait
    channel: a process that stays in D is stuck on I/O (NFS, a failing disk, a wedged driver)."""
    proc = os.path.join(root, "proc")
    try:
        first = _scan_states(proc)
        sleep(interval)
        second = _scan_states(proc)
    except OSError as exc:
        return {"state": "error", "message": "%s: %s" % (proc, exc.strerror or exc), "count": None, "processes": []}
    found = stuck(first, second)
    processes = []
    for pid, comm in found[:D_STATE_PIDS_KEPT]:
        try:
            wchan = _read(os.path.join(proc, str(pid), "wchan"), 256).strip() or None
        except (IOError, OSError, UnicodeDecodeError):
            wchan = None
        processes.append({"pid": pid, "name": comm, "wchan": wchan})
    return {"state": "ok", "message": "%d processes in D state over %ss" % (len(found), interval),
            "count": len(found), "processes": processes}


def read_cpu_governor(root="/"):
    top = os.path.join(root, "sys", "devices", "system", "cpu")
    governors = {}
    try:
        names = [name for name in os.listdir(top) if _CPU_DIR.match(name)]
    except OSError as exc:
        return {"state": "error", "message": "%s: %s" % (top, exc.strerror or exc), "governors": {}}
    for name in names:
        try:
            governors[name] = _read(os.path.join(top, name, "cpufreq", "scaling_governor"), 64).strip()
        except (IOError, OSError, UnicodeDecodeError):
            continue
    if not governors:
        return {"state": "absent", "message": "no cpufreq driver (%s/cpu*/cpufreq: a VM, or the BIOS owns the clocks)"
                % top, "governors": {}}
    return {"state": "ok", "message": "", "governors": governor_counts(governors)}


def read_nvme(run, root="/", timeout=5.0, deadline=None, program=None):
    """Each NVMe controller's SMART health (``nvme smart-log /dev/nvmeN -o json``); absent without nvme-cli or NVMe."""
    top = os.path.join(root, "sys", "class", "nvme")
    try:
        controllers = sorted(name for name in os.listdir(top) if _NVME_CTRL.match(name))
    except OSError:
        controllers = []
    if not controllers:
        return {"state": "absent", "message": "no NVMe controller (%s)" % top, "devices": []}
    program = program or find_executable("nvme")
    if not program:
        return {"state": "absent", "message": "nvme-cli is not installed (`nvme` not on PATH): NVMe health not read",
                "devices": [{"name": name} for name in controllers]}
    devices = []
    for name in controllers:
        entry = {"name": name}
        try:
            entry["model"] = _read(os.path.join(top, name, "model"), 128).strip() or None
        except (IOError, OSError, UnicodeDecodeError):
            entry["model"] = None
        left = timeout if deadline is None else min(timeout, deadline - time.time())
        if left <= 0:
            entry["error"] = "not read: the hardware deadline passed"
        else:
            rc, out, err = run([program, "smart-log", "/dev/" + name, "-o", "json"], left)
            health = parse_smart_log(out) if rc == 0 else None
            if health is None:
                entry["error"] = "nvme smart-log: %s" % ("timed out" if rc is None else " ".join((err or out or "exit %s" % rc).split())[:200])
            else:
                entry.update(health)
        devices.append(entry)
    return {"state": "ok", "message": "", "devices": devices}


def _ipmitool(run, argv, deadline, program, timeout=8.0):
    """``(out, "ok", "")`` or ``(None, "absent" or "error", why)``; ``program`` None: ipmitool from PATH."""
    program = program or find_executable("ipmitool")
    if not program:
        return None, "absent", "ipmitool is not installed: the BMC was not read"
    left = min(timeout, deadline - time.time())
    if left <= 0:
        return None, "error", "not read: the hardware deadline passed"
    rc, out, err = run([program] + argv, left)
    if rc != 0:
        why = "timed out" if rc is None else " ".join((err or out or "exit %s" % rc).split())[:200]
        # no /dev/ipmi0 (a VM, the ipmi_si module not loaded): the node has no BMC to ask
        state = "absent" if "could not open device" in why.lower() else "error"
        return None, state, "ipmitool %s: %s" % (" ".join(argv), why)
    return out, "ok", ""


def read_ipmi_sel(run, state_dir, deadline, program=None):
    """SEL entries since the previous run (the last id seen kept in ``<state_dir>/ipmi-sel.json``; None: no state)."""
    out, state, message = _ipmitool(run, ["sel", "elist"], deadline, program)
    if out is None:
        return {"state": state, "message": message, "count": None, "new": []}
    entries = parse_sel(out)
    path = os.path.join(state_dir, SEL_STATE % node_tag()) if state_dir else None
    last = None
    if path:
        try:
            with open(path) as handle:
                last = json.load(handle).get("last_id")
        except (IOError, OSError, ValueError, AttributeError):
            last = None
    new = new_sel_entries(entries, last if isinstance(last, int) else None)
    facts = {"state": "ok", "message": "", "count": len(entries), "first_run": path is None or last is None,
             "new_count": len(new), "new": new[-SEL_KEPT:]}
    if path and entries:
        try:
            write_file(path, json.dumps({"last_id": max(entry["id"] for entry in entries)}))
        except (IOError, OSError) as exc:
            facts["message"] = "%s: %s" % (path, getattr(exc, "strerror", None) or exc)
    return facts


def node_tag():
    """This node's name, file-safe: the part of a state file's name that keeps nodes sharing a directory apart."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", os.uname()[1])[:64] or "node"


def read_sensors(run, deadline, program=None):
    out, state, message = _ipmitool(run, ["sensor"], deadline, program)
    if out is None:
        return {"state": state, "message": message, "sensors": []}
    sensors = parse_sensors(out)
    return {"state": "ok", "message": "", "count": len(sensors),
            "sensors": [sensor for sensor in sensors if sensor["status"] not in ("ok", "na")]}


def collect_hardware(parts, run, root="/", budget=10.0, nvme_program=None, d_state_interval=0.5, state_dir=None,
                     ipmitool=None):
    """``{part: facts}`` for each of ``parts`` (of PARTS), all within ``budget`` seconds."""
    deadline = time.time() + budget
    out = {}
    if "d_state" in parts:
        out["d_state"] = read_d_state(root, d_state_interval)
    if "cpu_governor" in parts:
        out["cpu_governor"] = read_cpu_governor(root)
    if "nvme" in parts:
        out["nvme"] = read_nvme(run, root, deadline=deadline, program=nvme_program)
    if "ipmi_sel" in parts:
        out["ipmi_sel"] = read_ipmi_sel(run, state_dir, deadline, ipmitool)
    if "sensors" in parts:
        out["sensors"] = read_sensors(run, deadline, ipmitool)
    return out
