# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the build watcher takes from a node, checked before the view reads it (pure): a guarded_build status file
(``check_status``) and the async job's result (``check_result``). Every field of the type guarded_build writes and
bounded, whatever the file held; a wrong one is named, never a crash in the live table."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _timeline

# what the controller keeps of one status, whatever the file held (issue 18 finding 11)
MAX_SAMPLES = _timeline.DEFAULT_CAPACITY
MAX_ATTEMPTS = 32
MAX_FAILED_STEPS = 5
MAX_TEXT = 2000
MAX_STEP_TEXT = 300
_NUMBERS = ("attempt", "jobs", "memory_bytes", "memory_limit_bytes", "peak_memory_bytes", "elapsed_seconds",
            "duration", "updated_at", "module_pid", "build_pgid", "module_start_time", "eta_seconds", "steps_total")
_TEXTS = ("state", "step", "message", "log", "confinement", "run_id", "name", "memory_human", "eta_basis")


def is_number(value):
    """A JSON number (a boolean is not one)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def kind_of(value):
    """What a JSON value is, in words, for a message."""
    for types, name in ((bool, "a boolean"), (dict, "an object"), (list, "a list"), (str, "a string"),
                        ((int, float), "a number")):
        if isinstance(value, types):
            return name
    return "null" if value is None else type(value).__name__


def bounded(value, limit=MAX_TEXT):
    """At most ``limit`` characters, cut with an ellipsis."""
    return value if len(value) <= limit else value[:limit - 3] + "..."


def _check_attempts(attempts, where):
    """``(attempts kept, error)``: a list of objects, each field of the type guarded_build writes; bounded."""
    if not isinstance(attempts, list):
        return None, "%s attempts is %s, not a list" % (where, kind_of(attempts))
    kept = []
    for index, attempt in enumerate(attempts[-MAX_ATTEMPTS:]):
        if not isinstance(attempt, dict):
            return None, "%s attempts[%d] is %s, not an object" % (where, index, kind_of(attempt))
        attempt = dict(attempt)
        for key in ("attempt", "jobs", "duration", "peak_memory_bytes", "oom_kills", "rc"):
            if attempt.get(key) is not None and not is_number(attempt[key]):
                return None, "%s attempts[%d].%s is %s, not a number" % (where, index, key, kind_of(attempt[key]))
        for key in ("kind", "why"):
            if attempt.get(key) is not None:
                if not isinstance(attempt[key], str):
                    return None, "%s attempts[%d].%s is %s, not a string" % (where, index, key, kind_of(attempt[key]))
                attempt[key] = bounded(attempt[key], MAX_STEP_TEXT)
        steps = attempt.get("failed_steps")
        if steps is not None:
            if not isinstance(steps, list) or not all(isinstance(step, str) for step in steps):
                return None, "%s attempts[%d].failed_steps is not a list of strings" % (where, index)
            attempt["failed_steps"] = [bounded(step, MAX_STEP_TEXT) for step in steps[-MAX_FAILED_STEPS:]]
        progress, error = _check_progress(attempt.get("progress"), "%s attempts[%d]." % (where, index))
        if error:
            return None, error
        attempt["progress"] = progress
        kept.append(attempt)
    return kept, None


def _check_progress(progress, where):
    if progress is None:
        return None, None
    if not isinstance(progress, dict):
        return None, "%sprogress is %s, not an object" % (where, kind_of(progress))
    for key in ("done", "total", "percent"):
        if progress.get(key) is not None and not is_number(progress[key]):
            return None, "%sprogress.%s is %s, not a number" % (where, key, kind_of(progress[key]))
    return dict((key, progress.get(key)) for key in ("done", "total", "percent")), None


def _check_timeline(timeline):
    if not isinstance(timeline, list):
        return None, "timeline is %s, not a list" % kind_of(timeline)
    samples = []
    for index, sample in enumerate(timeline):
        if not isinstance(sample, list) or len(sample) < 4 or not all(is_number(value) for value in sample[:4]):
            return None, "timeline[%d] is not a [seconds, memory, jobs, attempt] sample" % index
        samples.append(list(sample[:4]))
    while len(samples) > MAX_SAMPLES:  # re-bounded as guarded_build bounds it: neighbours merged, peaks kept
        shorter = _timeline.downsample(samples)
        samples = shorter if len(shorter) < len(samples) else shorter[-MAX_SAMPLES:]
    return samples, None


def check_status(status):
    """A status file's parsed JSON -> ``(status, None)`` with every field the view reads of the right type and
    bounded (timeline re-bounded, attempts, failed steps and texts cut), or ``(None, why)`` naming the first field
    that is not what guarded_build writes. Unknown fields are dropped."""
    if not isinstance(status, dict):
        return None, "the status file holds %s, not a JSON object" % kind_of(status)
    clean = {}
    for key in _NUMBERS:
        if status.get(key) is not None:
            if not is_number(status[key]):
                return None, "the status file's %s is %s, not a number" % (key, kind_of(status[key]))
            clean[key] = status[key]
    for key in _TEXTS:
        if status.get(key) is not None:
            if not isinstance(status[key], str):
                return None, "the status file's %s is %s, not a string" % (key, kind_of(status[key]))
            clean[key] = bounded(status[key])
    progress, error = _check_progress(status.get("progress"), "")
    if error:
        return None, "the status file's %s" % error
    clean["progress"] = progress
    if status.get("timeline") is not None:
        clean["timeline"], error = _check_timeline(status["timeline"])
        if error:
            return None, "the status file's %s" % error
    if status.get("attempts") is not None:
        clean["attempts"], error = _check_attempts(status["attempts"], "the status file's")
        if error:
            return None, error
    return clean, None


def check_result(result):
    """The async job's result: its attempts checked like a status's (a result that is not an object becomes a
    failed one saying so)."""
    if not isinstance(result, dict):
        return {"failed": True, "msg": "the job's result is %s, not an object" % kind_of(result)}
    if result.get("attempts") is not None:
        attempts, error = _check_attempts(result["attempts"], "the job's result:")
        result = dict(result, attempts=attempts or [])
        if error:
            result.setdefault("warnings", [])
            result["result_error"] = error
    return result
