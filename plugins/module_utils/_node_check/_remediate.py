# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The remediation ladder's hands (issue 38 item 2): the steps ``_remediation.decide`` chose, done and recorded.

- **GPU reset**: the compute processes are read again right before ``nvidia-smi -r -i N``; a process on that GPU,
  or a query that does not answer, means no reset.
- **Reboot**: ``scontrol reboot ASAP nextstate=RESUME reason="gpufleet: reboot: ..." <node>`` -- Slurm drains the
  node, waits for its jobs, runs its RebootProgram and puts the node back in service when slurmd registers again;
  the health check slurmd runs before that registration drains it again if it is still not ready.
- **Escalation**: the ticket command (the user's) with the fault as JSON on its input, else the system log only.

Check mode does nothing and writes nothing: it says what each step would do. Every step done, and every step not
taken for a new reason (a busy GPU), is kept in ``<state_dir>/remediation-<node>.json`` for a person to read.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import time

from ansible_collections.gpufleet.preflight.plugins.module_utils._facts._gpus import COMPUTE_APPS_FIELDS, parse_compute_apps
from ansible_collections.gpufleet.preflight.plugins.module_utils._node_check import _remediation
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _slurm

RESET_SECONDS = 30
QUERY_SECONDS = 10
TICKET_SECONDS = 15


def busy_gpus(run, smi, facts):
    """{GPU index: "pid 1234 (python3)"} as nvidia-smi says now; every GPU busy when it does not answer."""
    devices = ((facts or {}).get("gpus") or {}).get("devices") or []
    rc, out, err = run([smi, "--query-compute-apps=" + ",".join(COMPUTE_APPS_FIELDS), "--format=csv,noheader,nounits"],
                       QUERY_SECONDS)
    if rc != 0:
        why = "unknown processes (nvidia-smi --query-compute-apps: %s)" % _slurm.clean_text(err or out or "rc %s" % rc)[:120]
        return dict((dev.get("index"), why) for dev in devices)
    apps = parse_compute_apps(out)
    busy = {}
    for dev in devices:
        found = apps.get(dev.get("uuid")) or []
        if found:
            busy[dev.get("index")] = ", ".join("pid %s (%s)" % (app["pid"], app["name"]) for app in found)
    return busy


def _reset(step, ctx):
    gpu = step["fault"]["gpu"]
    if ctx["check_mode"]:
        return "check", "would reset GPU %s (nvidia-smi -r -i %s)" % (gpu, gpu)
    busy = busy_gpus(ctx["run"], ctx["smi"], ctx["facts"])  # again, right before: a job may have started since
    if gpu in busy:
        return "refused", "not reset: GPU %s is in use by %s" % (gpu, busy[gpu])
    rc, out, err = ctx["run"]([ctx["smi"], "-r", "-i", str(gpu)], RESET_SECONDS)
    text = _slurm.clean_text(" ".join((out or "").split() + (err or "").split()))[:200]
    if rc != 0:
        return "failed", "reset of GPU %s failed (rc %s): %s" % (gpu, rc, text or "no output")
    return "done", "GPU %s reset: %s" % (gpu, text or "nvidia-smi -r exited 0")


def _reboot(step, ctx):
    if not ctx["slurm_on"]:
        return "refused", "not rebooted: Slurm is not used in this mode (the ladder reboots only through Slurm)"
    scontrol = ctx["find"]("scontrol")
    if scontrol is None:
        return "refused", "not rebooted: scontrol not found"
    reason = _slurm.clean_text("%s %s" % (ctx["settings"]["reboot_reason"], step["fault"]["what"]))[:_slurm.MAX_REASON]
    argv = [scontrol, "reboot", "ASAP", "nextstate=RESUME", "reason=%s" % reason, ctx["node"]]
    if ctx["check_mode"]:
        return "check", "would run: %s" % " ".join(argv[1:])
    rc, out, err = ctx["slurm_run"](argv)
    if rc != 0:
        return "failed", "reboot not requested: %s" % _slurm.explain_failure("scontrol reboot", rc, out, err, ctx["node"])
    return "done", "reboot requested through Slurm (ASAP, then back in service): %s" % reason


def _escalate(step, ctx):
    command = ctx["settings"]["ticket_command"]
    fault = dict(step["fault"], node=ctx["node"], why=step["why"], at=ctx["now"])
    if not command:
        if ctx["check_mode"]:
            return "check", "would write the escalation to the system log (no ticket_command set)"
        ctx["log"]("escalation for %s: %s (%s)" % (ctx["node"], fault["what"], step["why"]))
        return "done", "escalated to the system log (no ticket_command set): %s, %s" % (fault["what"], step["why"])
    if ctx["check_mode"]:
        return "check", "would run the ticket command %s" % command[0]
    rc, out, err = ctx["run"](list(command), TICKET_SECONDS, data=json.dumps(fault, sort_keys=True))
    if rc != 0:
        return "failed", "ticket command %s failed (rc %s): %s" % (command[0], rc, _slurm.clean_text(err or out)[:160])
    return "done", "ticket raised by %s: %s" % (command[0], _slurm.clean_text(out)[:160] or "exit 0")


ACTIONS = dict(reset_gpu=_reset, reboot=_reboot, escalate=_escalate)
STARTED = "begun; still here means the run ended before the step finished (it counts as tried)"


def _act(step, ctx, path, history):
    """The step, recorded as started first: without that record a run killed mid-reset would reset again next run,
    so a step whose record cannot be written is not taken."""
    if not ctx["check_mode"]:
        settings = ctx["settings"]
        try:
            _remediation.write_history(path, history + [_remediation.entry(step, ctx["now"], "started", STARTED)],
                                       settings["keep"], ctx["now"], settings["window_seconds"])
        except (IOError, OSError) as exc:
            return "refused", "not %s: the history that keeps it from repeating cannot be written: %s: %s" % (
                step["step"].replace("_", " "), path, exc)
    return ACTIONS[step["step"]](step, ctx)


def run_ladder(settings, verdict, node, ctx, state_dir):
    """Decide, act and record for one not-ready verdict: the lines to print. ``ctx``: run, slurm_run, find, smi,
    slurm_on, check_mode, log."""
    now = time.time()
    faults = _remediation.faults_of(verdict["checks"], verdict.get("facts"), now)
    if not faults:
        return []
    path = _remediation.history_path(state_dir, node)
    try:
        history = _remediation.read_history(path)
    except ValueError as exc:
        return ["remediation: not run: %s" % exc]
    ctx = dict(ctx, settings=settings, node=node, now=now, facts=verdict.get("facts"))
    wants_reset = any(f["cls"] in settings["reset_classes"] for f in faults)
    busy = busy_gpus(ctx["run"], ctx["smi"], ctx["facts"]) if wants_reset and ctx["smi"] else {}
    if wants_reset and not ctx["smi"]:
        busy = dict((f["gpu"], "nvidia-smi not found") for f in faults)
    lines, records, begun = [], [], False
    for step in _remediation.decide(faults, settings, history, now, busy):
        begun = begun or step["step"] != "none"   # a started record to replace by how it went
        state, outcome = ("none", "no step") if step["step"] == "none" else _act(step, ctx, path, history + records)
        # a step not tried (none, refused) is kept once per reason: a run every few minutes repeats it
        seen = state not in _remediation.ATTEMPTED and any(
            _remediation.same_occurrence(step["fault"], h) and (h.get("why"), h.get("outcome")) == (step["why"], outcome)
            for h in history)
        if not seen:
            records.append(_remediation.entry(step, now, state, outcome))
        said = "" if step["step"] == "none" else "; " + outcome
        lines.append("remediation: %s: %s: %s%s" % (step["fault"]["what"], step["step"], step["why"], said))
    if (records or begun) and not ctx["check_mode"]:
        try:
            _remediation.write_history(path, history + records, settings["keep"], now, settings["window_seconds"])
        except (IOError, OSError) as exc:
            lines.append("remediation: history not written: %s: %s" % (path, exc))
    return lines
