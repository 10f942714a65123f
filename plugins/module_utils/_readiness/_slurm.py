# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm drain and resume for a node's verdict: pure decisions, then the few calls to sinfo/scontrol.

Ownership (after LBNL NHC's node-mark-offline/online and mej/nhc#134, an admin's drain resumed by a health
check): a drain is OURS only when a record on the host that runs scontrol (``<state_dir>/slurm-<node>.json``)
holds the exact reason text we set AND the time slurmctld recorded for it (sinfo ``%H``) still matches.
A reason that merely starts with our prefix -- a person copying our words -- is not ours: never resumed.
Nodes not responding (``*``), down, failing, in maintenance, rebooting, powering or planned are left alone.

Like NHC at its best: the reason names the first failure's real cause and is KEPT while the same set of checks
fails (the record holds the set; sinfo's drain time stays the first failure's); it changes only when the set
changes. Before any update, sinfo is read again and nothing is done when the node changed meanwhile (a person's
drain between our read and our update is never overwritten; a resume needs the reason still ours). The intent is
recorded BEFORE the drain, so a run killed between the drain and its record still owns (and later resumes) it.
A node name Slurm would read as many nodes (``gpu[1-8]``, ``a,b``, ``ALL``) is refused.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import time

from ansible_collections.gpufleet.preflight.plugins.module_utils._atomic import write_file
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _drain_cap

DEFAULT_PREFIX = "gpufleet:"
MAX_REASON = 120
DEFAULT_STATE_DIR = "/var/lib/gpufleet-preflight"
SINFO_FORMAT = "%T|%H|%u|%E"
# The sinfo flags (compact %t) or state words that mean: someone else's business, never touched.
_HANDS_OFF_SUFFIXES = ("*", "~", "#", "!", "%", "$", "@", "^", "-")
_HANDS_OFF_WORDS = ("down", "fail", "failing", "maint", "reboot", "reboot_issued", "reboot_requested", "reserved",
                    "planned", "powered_down", "powering_down", "powering_up", "power_down", "future", "inval",
                    "unknown", "perfctrs", "blocked")
_DRAIN_WORDS = ("drained", "draining", "drain")
_NON_PRINTABLE = re.compile(r"[^\x20-\x7e]")
# One node, as Slurm's hostlist syntax cannot read it as several: no brackets, commas, spaces, no ALL.
_NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")
# A drain recorded as intended (before scontrol ran) is adopted when sinfo shows it set no earlier than this
# many seconds before the intent (slurmctld's clock against this host's).
INTENT_SLACK_SECONDS = 120
# Clauses of a check's message that say nothing of the cause ("unknown: nvidia-smi state is timeout: ...").
_EMPTY_CLAUSE = re.compile(r"(unknown|[\w .-]+ state is \w+)\Z")
# A GPU as the checks describe it for an RMA ticket: ``GPU 1 (00000000:2A:00.0, NVIDIA H100 80GB HBM3, serial ...,
# GPU-<uuid>)``. In a 120-character Slurm reason or an 80-character NPD line that leaves no room for what is wrong,
# so there it becomes ``GPU 1 (00000000:2A:00.0)``; the reports keep the whole.
_GPU_IDENTITY = re.compile(r"\bGPU (\S+) \(([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]), [^()]*\)")


def clean_text(text):
    """One printable ASCII line: control characters, newlines and non-ASCII become a space or '?', runs squeezed."""
    text = re.sub(r"[\r\n\t\x0b\x0c]+", " ", str(text if text is not None else ""))
    text = _NON_PRINTABLE.sub("?", text)
    return re.sub(r" {2,}", " ", text).strip()


def brief_gpus(text):
    """``'GPU 1 (00000000:2A:00.0, NVIDIA H100 80GB HBM3, serial 1654123038646, GPU-dd3b...) is at 91 C'`` ->
    ``'GPU 1 (00000000:2A:00.0) is at 91 C'``: the bus id alone, so a short line keeps the fault."""
    return _GPU_IDENTITY.sub(r"GPU \1 (\2)", text)


def short_message(message):
    """The first clause of a check's message: ``'x is below y: stop what ...'`` -> ``'x is below y'``."""
    text = brief_gpus(clean_text(message))
    for cut in ("; ", ": "):
        head = text.split(cut, 1)[0]
        if head and len(head) < len(text):
            text = head
    return text


def cause(message):
    """The clause of a check's message that names its cause, without live advice: ``'unknown: nvidia-smi state is
    timeout: nvidia-smi did not answer within 10s and was killed: ...'`` -> ``'nvidia-smi did not answer within 10s'``."""
    text = brief_gpus(clean_text(message)).split("; ", 1)[0]
    clauses = [part.strip() for part in text.split(": ")]
    for clause in clauses:
        if clause and not _EMPTY_CLAUSE.match(clause):
            return re.sub(r" and was killed\Z", "", clause)
    return clauses[0] or "failed"


def validate_node_name(name, option="node_name"):
    """One Slurm node name; ValueError naming ``option`` for what Slurm would read as many nodes (or none)."""
    if not isinstance(name, str) or not _NODE_NAME.match(name) or name.lower() == "all":
        raise ValueError("%s: %r is not one Slurm node name: Slurm reads brackets (gpu[1-8]), commas, spaces and ALL "
                         "as several nodes, and one node's verdict must never drain or resume others; name one node "
                         "(letters, digits, '.', '_', '-', up to 64 characters), like gpu1" % (option, name))
    return name


def validate_prefix(prefix):
    """The reason prefix, checked: one printable word without spaces; ValueError naming the option."""
    if not isinstance(prefix, str) or not prefix or clean_text(prefix) != prefix or " " in prefix or len(prefix) > 32:
        raise ValueError("reason_prefix: %r must be one printable ASCII word of 1 to 32 characters, like gpufleet:"
                         % (prefix,))
    return prefix


def drain_reason(prefix, failed, max_length=MAX_REASON):
    """``'gpufleet: available_memory: effective available memory 1Gi is below the 8Gi required (+2 more)'``.

    The first failed check's name and cause (:func:`cause`: ``gpu_count: nvidia-smi did not answer within 10s``, not
    ``gpu_count: unknown``). ``failed`` is the list of failed checks (dicts with name and message) in the verdict's order. Always one
    printable line of at most ``max_length`` characters, always starting with ``prefix + ' '``.
    """
    if not failed:
        body = "not ready"
    else:
        first = failed[0]
        body = "%s: %s" % (clean_text(first.get("name") or "check"), cause(first.get("message") or "failed"))
    more = " (+%d more)" % (len(failed) - 1) if len(failed) > 1 else ""
    room = max_length - len(prefix) - 1 - len(more)
    if len(body) > room:
        body = body[:max(room - 3, 1)].rstrip() + "..."
    return ("%s %s%s" % (prefix, body, more))[:max_length]


def parse_sinfo(text, node):
    """sinfo ``-h -N -n NODE -o '%T|%H|%u|%E'`` output -> dict(state, time, user, reason) or None (node unknown).

    A node in several partitions prints one line per partition: the first is taken. The reason is last so a
    ``|`` inside it stays in it; ``none`` / ``Unknown`` placeholders become empty.
    """
    for line in (text or "").splitlines():
        line = line.strip()
        if not line:
            continue
        parts = line.split("|", 3)
        if len(parts) != 4:
            continue
        state, when, user, reason = parts
        return dict(node=node, state=state.strip().lower(), time="" if when.strip() in ("Unknown", "N/A") else when.strip(),
                    user="" if user.strip() in ("Unknown", "N/A") else user.strip(),
                    reason="" if reason.strip() in ("none", "(null)") else reason.strip())
    return None


def state_words(state):
    """``'drained*'`` -> (``['drained']``, ``'*'``); ``'idle+drain'`` -> (``['idle', 'drain']``, ``''``)."""
    flags = ""
    while state and state[-1] in _HANDS_OFF_SUFFIXES:
        flags = state[-1] + flags
        state = state[:-1]
    return [word for word in re.split(r"[+]", state) if word], flags


def is_drained(state):
    words, _flags = state_words(state)
    return any(word in _DRAIN_WORDS for word in words)


def hands_off(state):
    """Why a node in this state is left alone, or '' when we may act on it."""
    words, flags = state_words(state)
    if flags:
        return "state %s (not responding, powering, rebooting, planned or in maintenance: left to Slurm and its admins)" % state
    bad = [word for word in words if word in _HANDS_OFF_WORDS]
    if bad:
        return "state %s (%s: left to Slurm and its admins)" % (state, bad[0])
    return ""


def slurm_epoch(when):
    """sinfo's ``%H`` (``2026-12-01T20:00:00``, slurmctld's local time) -> seconds, or None."""
    try:
        return time.mktime(time.strptime(when, "%Y-%m-%dT%H:%M:%S"))
    except (TypeError, ValueError, OverflowError):
        return None


def owned(info, record):
    """True only when the node's drain is the very one we set: same reason text and slurmctld's same time -- or the
    drain we recorded as intended just before scontrol ran (a run killed before it could record the time)."""
    if not record or not info or not is_drained(info["state"]) or not info["reason"]:
        return False
    if info["reason"] == record.get("reason") and bool(info["time"]) and info["time"] == record.get("time"):
        return True
    pending = record.get("pending") or {}
    when = slurm_epoch(info["time"])
    return (bool(pending) and info["reason"] == pending.get("reason") and when is not None
            and isinstance(pending.get("at"), (int, float)) and when >= pending["at"] - INTENT_SLACK_SECONDS)


def same_checks(record, failed_names):
    """Whether the record's drain was for this very set of failed checks (then its reason is kept)."""
    recorded = record.get("checks") if record else None
    return isinstance(recorded, list) and sorted(recorded) == sorted(failed_names or [])


def registering(info):
    """Whether the node is not responding only because its slurmd has not registered yet: slurmd runs its
    HealthCheckProgram once at start BEFORE it registers (slurm.conf(5)), when slurmctld still shows the node as it
    last saw it (``down*`` Not responding, ``idle*``, ``unknown*``), with Slurm's own reason or none. Only then is a
    node flagged ``*`` drained -- by the program slurmd itself runs -- so it registers drained and never takes a job."""
    words, flags = state_words(info["state"])
    return (flags == "*" and bool(words) and set(words) <= {"idle", "down", "unknown"}
            and info["reason"] in ("", "Not responding"))


def decide(info, ready, record, desired_reason, prefix=DEFAULT_PREFIX, failed_names=None, resume=True, at_start=False):
    """What to do for one node: dict(action, message, forget) -- pure, table-tested.

    ``action``: ``drain`` (set ``desired_reason``), ``resume``, or ``none``; ``forget``: drop a stale record.
    ``failed_names``: the failed checks now; while they are the recorded set our reason is kept as it is (no live
    numbers rewritten each run, sinfo's drain time stays the first failure's). ``resume=False``: drain only.
    ``at_start``: run by slurmd itself (mode slurm), so a node only not responding is one :func:`registering`.
    """
    node = info["node"]
    ours = owned(info, record)
    stale = bool(record) and not ours
    if ready:
        if ours:
            if hands_off(info["state"]):
                return dict(action="none", forget=False, message="%s: ready, but our drain is left while the node is in %s"
                            % (node, hands_off(info["state"])))
            if not resume:
                return dict(action="none", forget=False, message="%s: ready; our drain is kept (drain-only mode: a "
                            "person resumes it: scontrol update NodeName=%s State=RESUME) (%s)" % (node, node, info["reason"]))
            return dict(action="resume", forget=True, message="%s: ready; resuming our drain (%s)" % (node, info["reason"]))
        if is_drained(info["state"]):
            return dict(action="none", forget=stale, message="%s: ready, but drained by someone else%s: left alone (%s)"
                        % (node, _who(info, prefix), info["reason"] or "no reason"))
        why = hands_off(info["state"])
        if why:
            return dict(action="none", forget=stale, message="%s: ready; %s" % (node, why))
        return dict(action="none", forget=stale, message="%s: ready and not drained (%s)" % (node, info["state"]))
    # not ready
    why = hands_off(info["state"])
    if why and at_start and registering(info):
        return dict(action="drain", forget=stale, message="%s: not ready before slurmd registers (%s); draining so it "
                    "registers drained: %s" % (node, info["state"], desired_reason))
    if why:
        return dict(action="none", forget=False, message="%s: not ready, not drained: %s" % (node, why))
    if is_drained(info["state"]):
        if not ours:
            return dict(action="none", forget=stale, message="%s: not ready; already drained by someone else%s: their "
                        "reason kept (%s)" % (node, _who(info, prefix), info["reason"] or "no reason"))
        if info["reason"] == desired_reason or (failed_names is not None and same_checks(record, failed_names)):
            return dict(action="none", forget=False, message="%s: not ready; drained by us already, reason kept while "
                        "the same checks fail (%s)" % (node, info["reason"]))
        return dict(action="drain", forget=False, message="%s: not ready; other checks fail now: our drain's reason "
                    "updated to: %s" % (node, desired_reason))
    return dict(action="drain", forget=stale, message="%s: not ready; draining: %s" % (node, desired_reason))


def _who(info, prefix):
    who = " (%s%s)" % (info["user"] or "user unknown", " at " + info["time"] if info["time"] else "")
    if info["reason"].startswith(prefix):
        who += ", with our prefix but not a drain this collection recorded"
    return who


def scontrol_argv(scontrol, node, action, reason=None):
    if action == "drain":
        return [scontrol, "update", "NodeName=%s" % node, "State=DRAIN", "Reason=%s" % reason]
    return [scontrol, "update", "NodeName=%s" % node, "State=RESUME"]


def sinfo_argv(sinfo, node):
    return [sinfo, "-h", "-N", "-n", node, "-o", SINFO_FORMAT]


def explain_failure(tool, rc, stdout, stderr, node):
    """A Slurm command that failed, in words: slurmctld unreachable, node unknown, or its own last line."""
    text = " ".join((stderr or "").split() + (stdout or "").split())
    lowered = text.lower()
    if "unable to contact slurm controller" in lowered or "connection refused" in lowered or "socket timed out" in lowered:
        return "%s: slurmctld is unreachable (%s): nothing drained or resumed" % (node, clean_text(text)[:200])
    if "invalid node name" in lowered or "node name specified" in lowered:
        return "%s: Slurm does not know this node (%s); set preflight_slurm_node_name" % (node, clean_text(text)[:200])
    return "%s: %s exited %s: %s" % (node, tool, rc, clean_text(text)[:200] or "no output")


# ---------------------------------------------------------------- the record on the host that runs scontrol


def record_path(state_dir, node):
    return os.path.join(state_dir, "slurm-%s.json" % re.sub(r"[^A-Za-z0-9._-]", "_", node))


def read_record(state_dir, node):
    """The drain we recorded (or intended) for node, or None (absent, unreadable, not a plain file, not ours: never
    trusted when broken)."""
    try:
        fd = os.open(record_path(state_dir, node), os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        with os.fdopen(fd) as handle:
            data = json.loads(handle.read(1 << 16))
    except (IOError, OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    if data.get("reason") and data.get("time"):
        return data
    return data if isinstance(data.get("pending"), dict) and data["pending"].get("reason") else None


def write_record(state_dir, node, reason, when, user, checks=None, pending=None):
    """Atomically (``_atomic.write_file``: a temp file renamed in the same directory, 0600) record the drain slurmctld holds for us and/or
    the one we are about to set (``pending``: reason, checks, at)."""
    if not os.path.isdir(state_dir):
        os.makedirs(state_dir, 0o755)
    record = dict(node=node, reason=reason, time=when, user=user, checks=checks, pending=pending)
    write_file(record_path(state_dir, node), json.dumps(record), mode=0o600, prefix=".slurm-")


def forget_record(state_dir, node):
    try:
        os.unlink(record_path(state_dir, node))
    except OSError:
        pass


def still_as_read(before, now, record, action, at_start=False):
    """Right before scontrol: whether the node is as we decided on it (a person may have drained or resumed it
    since our first sinfo). A resume also needs the drain still ours; a node :func:`registering` stays drainable."""
    if now is None:
        return False
    if action == "resume":
        return owned(now, record)
    return (is_drained(now["state"]) == is_drained(before["state"]) and now["reason"] == before["reason"]
            and now["time"] == before["time"] and (not hands_off(now["state"]) or at_start and registering(now)))


def _read(run, sinfo, node):
    """(info or None, error or None) from one sinfo call."""
    rc, out, err = run(sinfo_argv(sinfo, node))
    if rc != 0:
        return None, explain_failure("sinfo", rc, out, err, node)
    info = parse_sinfo(out, node)
    if info is None:
        return None, ("%s: Slurm does not know this node (sinfo lists no such node); set preflight_slurm_node_name to its "
                      "Slurm name" % node)
    return info, None


def breaker(run, sinfo, node, prefix, limits, after):
    """The drain circuit breaker's judgement (``_drain_cap.judge``) on one fresh sinfo listing of every node; a
    listing that cannot be read holds the drain back (the safe side)."""
    rc, out, err = run(_drain_cap.listing_argv(sinfo))
    if rc != 0:
        return dict(allowed=False, message="%s: not ready, NOT drained: the drain circuit breaker could not count the "
                    "drains held (%s)" % (node, explain_failure("sinfo", rc, out, err, node)))
    return _drain_cap.judge(_drain_cap.parse_listing(out), node, prefix, limits, (is_drained, slurm_epoch), after=after)


def apply(node, ready, failed, run, find, prefix=DEFAULT_PREFIX, state_dir=DEFAULT_STATE_DIR, check_mode=False,
          max_length=MAX_REASON, resume=True, limits=None, at_start=False):
    """Decide and act for one node. ``run(argv) -> (rc, stdout, stderr)``; ``find(name) -> path or None``.

    Returns dict(node, action, changed, message, state, reason, error, notice, held_back): ``error`` set (and nothing
    changed) when scontrol/sinfo are missing, slurmctld is unreachable or the node is unknown; ``notice`` when a person
    should read the message (something done, a drain or state left alone, an error). ``resume=False``: drain only.
    ``limits`` (dict(max_nodes, percent, window), see ``_drain_cap``): a NEW drain beyond the cap is not made
    (``held_back``); checked before the drain and again after it, when our own drain over the cap is resumed.
    ``at_start``: slurmd runs us (see :func:`registering`): a node not yet registered is drained too.
    Order, so that a kill at any moment leaves nothing we would never resume: intent recorded, sinfo read again,
    scontrol, sinfo read back, record completed; a resume runs scontrol first, then forgets the record.
    """
    outcome = dict(node=node, action="none", changed=False, state=None, reason=None, error=None, message="", notice=True,
                   held_back=False)
    try:
        validate_node_name(node)
    except ValueError as exc:
        outcome["error"] = outcome["message"] = str(exc)
        return outcome
    desired = drain_reason(prefix, failed, max_length)
    names = sorted(set(clean_text(check.get("name") or "check") for check in failed))
    tools = {}
    for name in ("sinfo", "scontrol"):
        tools[name] = find(name)
        if not tools[name]:
            outcome.update(error="%s: %s not found on this host (install Slurm's client commands, or run them on a host "
                                 "that has them: preflight_slurm_host)" % (node, name))
            outcome["message"] = outcome["error"]
            return outcome
    info, error = _read(run, tools["sinfo"], node)
    if error:
        outcome["error"] = outcome["message"] = error
        return outcome
    record = read_record(state_dir, node)
    decision = decide(info, ready, record, desired, prefix, failed_names=names, resume=resume, at_start=at_start)
    outcome.update(state=info["state"], reason=info["reason"], action=decision["action"], message=decision["message"],
                   notice=decision["action"] != "none" or is_drained(info["state"]) or bool(hands_off(info["state"])))
    if decision["action"] == "none":
        if decision["forget"] and not check_mode:
            forget_record(state_dir, node)
        return outcome
    new_drain = decision["action"] == "drain" and not is_drained(info["state"]) and bool(limits)
    if new_drain:
        judged = breaker(run, tools["sinfo"], node, prefix, limits, after=False)
        if not judged["allowed"]:
            outcome.update(action="none", held_back=True, message=judged["message"])
            return outcome
    outcome["changed"] = True
    if check_mode:
        outcome["message"] = "(check mode, nothing done) " + outcome["message"]
        return outcome
    if decision["action"] == "drain":
        kept = record if owned(info, record) else {}
        write_record(state_dir, node, kept.get("reason"), kept.get("time"), kept.get("user"), kept.get("checks"),
                     pending=dict(reason=desired, checks=names, at=time.time()))
        record = read_record(state_dir, node)
    now, error = _read(run, tools["sinfo"], node)
    if error or not still_as_read(info, now, record, decision["action"], at_start):
        outcome.update(changed=False, action="none", notice=True)
        outcome["message"] = ("%s: the node changed between our read and our update (now: %s): left alone"
                              % (node, error or "%s, %s" % (now["state"], now["reason"] or "no reason")))
        return outcome
    rc, out, err = run(scontrol_argv(tools["scontrol"], node, decision["action"], desired))
    if rc != 0:
        outcome.update(changed=False, action="none")
        outcome["error"] = outcome["message"] = explain_failure("scontrol", rc, out, err, node)
        return outcome
    if decision["action"] == "resume":
        forget_record(state_dir, node)
        outcome["reason"] = ""
        return outcome
    after, error = _read(run, tools["sinfo"], node)
    if not after or after["reason"] != desired:
        outcome["error"] = ("%s: drained, but sinfo did not show our reason back (%s): our intent stays recorded, the "
                            "next run adopts the drain when sinfo shows it" % (node, error or after["reason"]))
        outcome["message"] += "; " + outcome["error"]
        return outcome
    write_record(state_dir, node, desired, after["time"], after["user"], names)
    outcome.update(state=after["state"], reason=desired)
    if new_drain:
        _hold_after(run, tools, node, prefix, limits, state_dir, outcome)
    return outcome


def _hold_after(run, tools, node, prefix, limits, state_dir, outcome):
    """After our new drain: over the cap (others drained at the same moment), our own drain is resumed at once."""
    judged = breaker(run, tools["sinfo"], node, prefix, limits, after=True)
    if judged["allowed"]:
        return
    rc, out, err = run(scontrol_argv(tools["scontrol"], node, "resume"))
    if rc != 0:
        outcome["error"] = "%s; and resuming our own drain failed: %s" % (judged["message"], explain_failure(
            "scontrol", rc, out, err, node))
        outcome["message"] = outcome["error"]
        return
    forget_record(state_dir, node)
    outcome.update(action="none", changed=False, held_back=True, reason="", message=judged["message"])
