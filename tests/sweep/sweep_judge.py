# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Judging one case from its recorded results: an unhandled exception (a module's traceback, or a non-Ansible
exception that left the collection's code), a hang, a message without the option's name, or ok."""

from __future__ import annotations

import re

from sweep_cases import REPO

_EXC_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_.]*)(?::\s|:$|$)")
_FILE_LINE = re.compile(r'^\s*File "([^"]+)", line \d+')
_CHAIN = re.compile(r"^(The above exception was the direct cause of the following exception:|"
                    r"During handling of the above exception, another exception occurred:)\s*$", re.MULTILINE)
_MODULE_BOUNDARY = re.compile(r"^The above target exception was the direct cause of the following controller exception:\s*$",
                              re.MULTILINE)
_COLLECTION_PATH = ("/ansible_collections/gpufleet/preflight/", REPO + "/plugins/")


def _segments(text):
    """A chained traceback -> [(exception type, raise site path)], oldest first."""
    out = []
    for part in _CHAIN.split(text):
        if part.startswith("The above") or part.startswith("During handling"):
            continue
        lines = part.strip("\n").splitlines()
        files = [m.group(1) for m in (_FILE_LINE.match(line) for line in lines) if m]
        exc_type = None
        for line in reversed(lines):
            if line.startswith(" ") or not line.strip():
                continue
            match = _EXC_LINE.match(line)
            if match and match.group(1) != "Traceback":
                exc_type = match.group(1)
                break
        if exc_type or files:
            out.append((exc_type, files[-1] if files else None))
    return out


def _is_ansible(exc_type):
    return bool(exc_type) and (exc_type.startswith("ansible.") or exc_type.startswith("Ansible"))


def _in_collection(path):
    return bool(path) and any(marker in path for marker in _COLLECTION_PATH)


def unhandled(result):
    """Why a result shows an unhandled exception, or None."""
    stderr = "%s\n%s" % (result.get("module_stderr") or "", result.get("module_stdout") or "")
    msg = str(result.get("msg") or "")
    if "Traceback (most recent call last)" in stderr or msg.startswith("MODULE FAILURE"):
        last = [line for line in stderr.strip().splitlines() if line.strip()]
        return "module crashed: %s" % (last[-1] if last else msg)
    text = result.get("exception")
    if isinstance(text, list):
        text = "\n".join(str(t) for t in text)
    text = str(text or "")
    if not text:
        return None
    boundary = _MODULE_BOUNDARY.search(text)
    if boundary:
        # the module's own side: fail_json called in an except block carries the handled error's traceback (fine);
        # an exception that reached AnsiballZ's runner left main() unhandled
        module_side = text[:boundary.start()]
        last = [line for line in module_side.strip().splitlines() if line.strip() and not line.startswith(" ")]
        last = last[-1] if last else ""
        # fail_json's own call stack ends with "Message: ..."; an escaped exception with its type
        if "in run_module" in module_side and not last.startswith("Message:"):
            return "module raised %s" % last
        text = text[boundary.end():]
    if "task_executor.py" not in text:
        return None
    segments = _segments(text)
    for position, (exc_type, where) in enumerate(segments):
        if _is_ansible(exc_type) or exc_type is None:
            continue
        following = segments[position + 1] if position + 1 < len(segments) else (None, None)
        if following[0] is None or not _in_collection(following[1]):
            return "%s escaped the plugin (raised at %s)" % (exc_type, where)
    return None


_WRAPPERS = (
    re.compile(r"^Task failed: "),
    re.compile(r"^Finalization of task args for '[^']*' failed: "),
    re.compile(r"^Error while resolving value for '[^']*': "),
    re.compile(r"^The filter plugin '[^']*' failed: "),
)


def message_of(result):
    """The failure message a person reads, without ansible-core's wrapping (which names the plugin, not the option)."""
    msg = result.get("msg")
    if msg is None and isinstance(result.get("results"), list):
        msg = "; ".join(str(r.get("msg")) for r in result["results"] if isinstance(r, dict))
    text = str(msg or "")
    changed = True
    while changed:
        changed = False
        for pattern in _WRAPPERS:
            new = pattern.sub("", text)
            if new != text:
                text, changed = new, True
    return text


def _names_option(message, names):
    low = message.lower()
    return any(str(name).lower() in low for name in names or [])


def _log_error(path):
    """The first ``[ERROR]`` of an ansible-playbook log, with the lines that continue it."""
    try:
        with open(path) as handle:
            text = handle.read()
    except (IOError, OSError, TypeError):
        return ""
    match = re.search(r"^\[ERROR\]: (.*?)(?:\n\n|\Z)", text, re.MULTILINE | re.DOTALL)
    return match.group(1).strip() if match else text.strip()[-500:]


def judge(case, records, batch):
    """``(verdict, detail, message)`` with verdict one of ok, exception, hang, nameless, harness."""
    if case["kind"] in ("role", "playbook"):
        if case["kind"] == "playbook":
            mine = list(records)
            if batch.get("rc") not in (0, None) and not any(r["status"] == "failed" for r in mine):
                # refused before any task ran (a play keyword, an undefined variable): the log says why
                message = _log_error(batch.get("log"))
                if _names_option(message, case["names"]):
                    return "ok", "refused before any task", message
                return "nameless", "refused before any task without naming %s" % "/".join(case["names"] or []), message
        else:
            mine = [r for r in records if r.get("play") == "sweep-case %s" % case["id"]]
        real = [r for r in mine if not r["task"].startswith("sweep-rescued")]
        for record in mine:
            why = unhandled(record["result"])
            if why:
                return "exception", why, message_of(record["result"])
        failed = [r for r in real if r["status"] in ("failed", "unreachable")]
        if not mine and case["kind"] == "playbook" and batch.get("rc") == 0:
            if case["expect"] == "accept":
                return "ok", "accepted: %s" % case["meaning"], ""
            return "nameless", "accepted silently: nothing ran and the run exited 0", _log_error(batch.get("log"))[-200:]
        if not mine:
            return ("hang", "no result (batch timed out)", "") if batch["timed_out"] else ("harness", "no result", "")
        if any("timed out" in message_of(r["result"]).lower() for r in failed):
            return "hang", "timed out", message_of(failed[0]["result"])
        if failed:
            result = failed[0]["result"]
            message = message_of(result)
            if _names_option(message, case["names"]):
                return "ok", "refused in %r" % failed[0]["task"], message
            return "nameless", "refused in %r without naming %s" % (failed[0]["task"], "/".join(case["names"] or [])), message
        if case["expect"] == "accept":
            return "ok", "accepted: %s" % case["meaning"], ""
        return "nameless", "accepted silently", ""
    mine = [r for r in records if r["task"] == case["id"]]
    if not mine:
        return ("hang", "no result (batch timed out)", "") if batch["timed_out"] else ("harness", "no result", "")
    record = mine[0]
    result = record["result"]
    message = message_of(result)
    seconds = (record["ended"] - record["started"]) if record.get("started") is not None else None
    if (result.get("timedout") or "timed out after" in message.lower()
            or (seconds is not None and seconds > case["timeout"])):
        return "hang", "ran past %d s" % case["timeout"], message
    why = unhandled(result)
    if why:
        return "exception", why, message
    if record["status"] == "skipped":
        return "harness", "skipped", message
    if record["status"] in ("failed", "unreachable"):
        if "python3." in message and "command not found" in str(result.get("module_stderr")):
            return "harness", "interpreter", message
        if _names_option(message, case["names"]):
            return "ok", "refused", message
        if case["expect"] == "accept" and case.get("failure_ok"):
            return "ok", "accepted, failed for another reason as the table expects: %s" % case["meaning"], message
        return "nameless", "refused without naming %s" % "/".join(str(n) for n in case["names"] or []), message
    if case["expect"] == "accept":
        return "ok", "accepted: %s" % case["meaning"], message
    return "nameless", "accepted silently", message
