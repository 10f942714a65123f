# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The remediation ladder's decisions (issue 38 item 2), pure: which faults a not-ready verdict holds, and for each
one step -- reset the GPU, reboot through Slurm, escalate, or none -- from the settings and the node's history.

Each step is opt-in per fault class (the Xid catalogue's classes, ``_xid_catalogue``; ``row_remap`` for pending
row remaps; ``sxid`` for a fatal NVSwitch error). The rules, in order, after the anchors (AWS's and HyperPod's
health agents, NVSentinel):

1. A fault is one occurrence: an Xid is its code, GPU and the minute it was logged, so the same kernel line read
   again on the next run is the same fault, already acted on -- never a second reset for one event.
2. A fault whose kind (the same Xid on the same GPU) was acted on ``escalate_after - 1`` times within ``window``
   escalates instead: the same Xid three times in a week is a hardware ticket, not another reset. One ticket per
   kind per window.
3. A GPU reset only for a class in ``reset_classes``, only for a known GPU, and never while a process uses it (the
   executor reads the compute processes again right before ``nvidia-smi -r``).
4. A reboot for a class in ``reboot_classes`` (one per run, whatever the number of faults), through Slurm only.
5. Anything else: none -- the drain stands, and the step says which setting would act on it.

A persisting state (a pending row remap) is its own occurrence until it clears: acted on once, then escalated.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import time

from ansible_collections.gpufleet.preflight.plugins.module_utils._atomic import write_file
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness._xid_catalogue import classify_event

STEPS = ("reset_gpu", "reboot", "escalate", "none")
# The fault classes a step may name: the Xid catalogue's classes that a node-side action can address, and ours.
CLASSES = ("reset_gpu", "reboot", "nvlink", "contact_support", "check_mechanicals", "row_remap", "sxid")
DEFAULTS = dict(enabled=False, reset_classes=[], reboot_classes=[], escalate_after=3, window_seconds=7 * 86400,
                ticket_command=None, reboot_reason="gpufleet: reboot:", keep=200)
HISTORY_NAME = "remediation-%s.json"
EVENT_SLACK = 120
_SAFE = re.compile(r"[^A-Za-z0-9._-]")


def validate(settings, where="remediation"):
    """The settings the role rendered, completed from DEFAULTS; ValueError naming the key and what it takes."""
    settings = dict(DEFAULTS, **(settings or {}))
    unknown = sorted(set(settings) - set(DEFAULTS))
    if unknown:
        raise ValueError("%s: unknown keys %s (known: %s)" % (where, ", ".join(unknown), ", ".join(sorted(DEFAULTS))))
    if not isinstance(settings["enabled"], bool):
        raise ValueError("%s: enabled must be true or false, got %r" % (where, settings["enabled"]))
    for key in ("reset_classes", "reboot_classes"):
        value = settings[key]
        if not isinstance(value, list) or any(item not in CLASSES for item in value):
            raise ValueError("%s: %s must be a list of %s, got %r" % (where, key, ", ".join(CLASSES), value))
    for key, low, high in (("escalate_after", 1, 100), ("window_seconds", 60, 366 * 86400), ("keep", 1, 10000)):
        value = settings[key]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ValueError("%s: %s must be a whole number from %d to %d, got %r" % (where, key, low, high, value))
    command = settings["ticket_command"]
    if command is not None and (not isinstance(command, list) or not command
                                or not all(isinstance(part, str) and part for part in command)
                                or not os.path.isabs(command[0])):
        raise ValueError("%s: ticket_command must be null or a list of arguments starting with an absolute path "
                         "(run with the fault as JSON on its input), got %r" % (where, command))
    if not isinstance(settings["reboot_reason"], str) or not settings["reboot_reason"].strip():
        raise ValueError("%s: reboot_reason must be a non-empty string" % where)
    return settings


def gpu_index(facts, pci):
    """The index of the GPU at a kernel line's PCI address (``0000:1b:00``), or None when unknown."""
    if not pci:
        return None
    wanted = pci.lower().split(":")[-2:]
    for dev in ((facts or {}).get("gpus") or {}).get("devices") or []:
        if (dev.get("pci_bus_id") or "").lower().split(".")[0].split(":")[-2:] == wanted:
            return dev.get("index")
    return None


def faults_of(checks, facts, now):
    """The faults a verdict holds that a step could act on: [dict(kind, cls, logged_at, gpu, what)], oldest
    first. ``kind`` is what recurs (``xid 48 on 0000:1b:00``); ``logged_at`` when this occurrence was logged (None: a state)."""
    failed = set(c["name"] for c in checks or [] if c.get("status") == "failed")
    found = []
    events = (facts or {}).get("kernel_events") or {}
    if "fatal_xid" in failed:
        for xid in events.get("xids") or []:
            judged = classify_event(xid)
            if judged.get("kind") not in CLASSES:
                continue
            kind = "xid %s on %s" % (xid.get("code"), xid.get("pci"))
            age = xid.get("age_seconds")
            found.append(dict(kind=kind, cls=judged["kind"], logged_at=None if age is None else round(now - age),
                              gpu=gpu_index(facts, xid.get("pci")), what="Xid %s (%s)" % (xid.get("code"), judged["what"])))
    if "sxid" in failed:
        for sxid in events.get("sxids") or []:
            if sxid.get("fatal"):
                kind = "sxid %s on %s" % (sxid.get("code"), sxid.get("device"))
                age = sxid.get("age_seconds")
                found.append(dict(kind=kind, cls="sxid", logged_at=None if age is None else round(now - age), gpu=None,
                                  what="fatal SXid %s" % sxid.get("code")))
    remap = next((c for c in checks or [] if c.get("name") == "row_remap" and c.get("status") == "failed"), None)
    for index in ((remap or {}).get("observed") or {}).get("pending") or []:
        kind = "row remap pending on GPU %s" % index
        found.append(dict(kind=kind, cls="row_remap", logged_at=None, gpu=index, what=kind))
    unique = []
    for fault in found:
        if not any(same_occurrence(fault, other) for other in unique):
            unique.append(fault)
    return unique


def same_occurrence(fault, record):
    """One occurrence: the same kind, logged within EVENT_SLACK seconds (a kernel line's time, read again on the next
    run, moves by the clock's rounding), or a state (no time) still there."""
    if fault["kind"] != record.get("kind"):
        return False
    mine, theirs = fault.get("logged_at"), record["event_at"] if "event_at" in record else record.get("logged_at")
    if mine is None or theirs is None:
        return mine is None and theirs is None
    return abs(mine - theirs) <= EVENT_SLACK


# A step's states: started (recorded before it runs: a run killed mid-step leaves it, and it counts as tried, so a
# reset is never repeated for want of a record), done, failed (tried), refused (a busy GPU), check (check mode), none.
ATTEMPTED = ("started", "done", "failed")


def _acted(history, window_start):
    """The history's steps that count: tried (started, done or failed: a failing reset is not retried every run), in
    the window."""
    return [h for h in history or [] if h.get("state") in ATTEMPTED and h.get("at", 0) >= window_start]


def decide(faults, settings, history, now, busy_gpus):
    """One step per fault: [dict(fault, step, why)]. ``busy_gpus``: {index: "pid 1234 (python3)"} as read now."""
    window_start = now - settings["window_seconds"]
    acted = _acted(history, window_start)
    steps, reboot_taken = [], False
    for fault in faults:
        _counted(steps, acted)
        same_event = [h for h in acted if same_occurrence(fault, h)]
        same_kind = [h for h in acted if h.get("kind") == fault["kind"] and h.get("step") != "escalate"]
        escalated = any(h.get("kind") == fault["kind"] and h.get("step") == "escalate" for h in acted)
        persisting = same_event and fault.get("logged_at") is None
        if same_event and not persisting:
            steps.append(dict(fault=fault, step="none", why="already acted on (%s); the drain stands until the check "
                                                            "passes" % same_event[-1]["step"]))
        elif persisting or len(same_kind) + 1 >= settings["escalate_after"]:
            count = len(same_kind) + 1
            why = ("still there after %s" % same_event[-1]["step"]) if persisting else (
                "%d times within %s" % (count, _days(settings["window_seconds"])))
            steps.append(dict(fault=fault, step="none" if escalated else "escalate",
                              why=("escalated already: " if escalated else "") + why))
        elif fault["cls"] in settings["reset_classes"]:
            if fault["gpu"] is None:
                steps.append(dict(fault=fault, step="none", why="no reset: the GPU at the kernel line's address is "
                                                                "not among the node's GPUs"))
            elif fault["gpu"] in busy_gpus:
                steps.append(dict(fault=fault, step="none", why="no reset while GPU %s is in use by %s"
                                  % (fault["gpu"], busy_gpus[fault["gpu"]])))
            else:
                steps.append(dict(fault=fault, step="reset_gpu", why="class %s: reset GPU %s" % (fault["cls"], fault["gpu"])))
        elif fault["cls"] in settings["reboot_classes"]:
            how = "one reboot covers it" if reboot_taken else "reboot through Slurm"
            steps.append(dict(fault=fault, step="none" if reboot_taken else "reboot", why="class %s: %s" % (fault["cls"], how)))
            reboot_taken = True
        else:
            steps.append(dict(fault=fault, step="none", why="class %s is in neither reset_classes nor reboot_classes: "
                                                            "the drain stands" % fault["cls"]))
    return steps


def _counted(steps, acted):
    """A step just decided counts for the faults after it in the same run (a third Xid read together with the second
    escalates)."""
    if steps and steps[-1]["step"] != "none":
        fault = steps[-1]["fault"]
        acted.append(dict(kind=fault["kind"], event_at=fault.get("logged_at"), step=steps[-1]["step"], state="done"))


def _days(seconds):
    return "%d days" % (seconds // 86400) if seconds >= 86400 else "%d s" % seconds


def entry(step, now, state, outcome):
    """One history record: what was decided, how it went (``ATTEMPTED`` or refused, check, none), what came of it."""
    fault = step["fault"]
    return dict(at=now, time=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)), kind=fault["kind"],
                event_at=fault.get("logged_at"), cls=fault["cls"], gpu=fault["gpu"], step=step["step"], why=step["why"], state=state,
                outcome=outcome)


# ---------------------------------------------------------------- the history file, on the node

def history_path(state_dir, node):
    return os.path.join(state_dir, HISTORY_NAME % (_SAFE.sub("_", str(node)) or "node"))


def read_history(path):
    """The records kept, oldest first; a missing file is none, an unreadable one says so (ValueError)."""
    try:
        with open(path) as handle:
            data = json.load(handle)
    except (IOError, OSError) as exc:
        if getattr(exc, "errno", None) == 2:
            return []
        raise ValueError("remediation history %s: %s" % (path, exc))
    except ValueError as exc:
        raise ValueError("remediation history %s: not JSON (%s): move it aside to start a new one" % (path, exc))
    if not isinstance(data, list):
        raise ValueError("remediation history %s: not a list of records: move it aside to start a new one" % path)
    return [item for item in data if isinstance(item, dict)]


def write_history(path, history, keep, now, window_seconds):
    """Keep the newest ``keep`` records and those within the window (escalation counts on them)."""
    kept = [h for h in history if h.get("at", 0) >= now - window_seconds][-keep:]
    write_file(path, json.dumps(kept, indent=1, sort_keys=True) + "\n", mode=0o600)
    return kept
