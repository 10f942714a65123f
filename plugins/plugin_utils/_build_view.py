# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet's build, seen from the controller (pure): each node's guarded_build status -> a phase, an ETA, one
row of the live table (gpufleet.preflight.build_watch), and the build report (JSON, Markdown; the HTML page is
``_html_report``).

A node is what the watcher last learned of it::

    {"status": <the guarded_build status file of the run being followed, or None before it exists>,
     "result": <the async job's final result, or None while it runs>,
     "unreachable": <why the node could not be reached, or None>,
     "status_error": <why the last status file read was not a status (wrong shape, too large), or None>,
     "foreign": <True while the status file on the node belongs to another run (an earlier build of the dir)>}

A node is over only once its job's result is in (or it is unreachable): a status file saying "succeeded" is
not the end of the build being followed - it may be the previous run's, or the module may not have returned yet.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.gpufleet.preflight.plugins.module_utils._human import human
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness._checks import printable
from ansible_collections.gpufleet.preflight.plugins.plugin_utils import _report
from ansible_collections.gpufleet.preflight.plugins.plugin_utils._build_view_input import MAX_STEP_TEXT, bounded, is_number

PHASES = ("queued", "starting", "configuring", "compiling", "linking", "installing", "done", "failed", "stopped",
          "unreachable")
FINAL = ("done", "failed", "stopped", "unreachable")
COLUMNS = ("NODE", "PHASE", "PROGRESS", "ETA", "JOBS", "MEMORY / BUDGET", "PEAK", "OOM", "FIRST FAILED STEP")
REPORT_SIGNATURES = {"build.json": b'{\n  "finished":', "build.md": b"# Fleet build\n",
                     "build.html": b"<!DOCTYPE html>\n<!-- gpufleet.preflight build report -->"}


def compiles_shown(compiles):
    """Whether a status's ``compiles`` (the admission ledger's counts of the build's compiles) can be shown."""
    return isinstance(compiles, dict) and all(isinstance(compiles.get(k), int) and not isinstance(compiles.get(k), bool)
                                              and 0 <= compiles[k] < 100000 for k in ("running", "frozen"))


def duration(seconds):
    """``42s``, ``3m05s``, ``2h07m``; ``-`` for None."""
    if seconds is None:
        return "-"
    seconds = int(round(max(0, seconds)))
    if seconds < 60:
        return "%ds" % seconds
    if seconds < 3600:
        return "%dm%02ds" % (seconds // 60, seconds % 60)
    return "%dh%02dm" % (seconds // 3600, (seconds % 3600) // 60)


def belongs(status, run_id):
    """Whether a status file is the one of the run being followed: always when no run id is known; otherwise its
    ``run_id`` must be that one (an earlier run's file, or one written before run ids existed, is not)."""
    return not run_id or (isinstance(status, dict) and status.get("run_id") == run_id)


def _status(node):
    return (node or {}).get("status") or {}


def _attempts(node):
    """The attempts so far: the final result's when the job has finished, else the status file's."""
    result = (node or {}).get("result") or {}
    attempts = result.get("attempts") or _status(node).get("attempts") or []
    return [attempt for attempt in attempts if isinstance(attempt, dict)]


def stopped(node):
    """Whether the build was stopped on request (``guarded_build state=stopped``), not failed by itself."""
    result = (node or {}).get("result") or {}
    return _status(node).get("state") == "stopped" or result.get("stopped") is True or result.get("state") == "stopped"


def over(node):
    """Whether nothing more is to be learned of a node: its job's result is in, or it is unreachable."""
    node = node or {}
    return bool(node.get("unreachable")) or node.get("result") is not None


def phase(node):
    """One of PHASES for a node."""
    node = node or {}
    if node.get("unreachable"):
        return "unreachable"
    result = node.get("result")
    if result is not None:
        if stopped(node):
            return "stopped"
        return "failed" if result.get("failed") else "done"
    status = _status(node)
    state = status.get("state")
    if not state:
        return "starting" if node.get("foreign") else "queued"
    if state == "stopped":
        return "stopped"
    if state == "failed":
        return "failed"
    if state == "succeeded":
        return "done"
    if state == "starting":
        return "starting"
    progress = status.get("progress") or {}
    if not progress.get("total"):
        return "configuring"
    if (status.get("step") or "").lower().startswith("linking"):
        return "linking"
    if progress.get("done", 0) >= progress["total"]:
        return "installing"  # ninja is through; the build tool packs and installs what it made
    return "compiling"


def backoffs(node):
    """OOM-killed attempts that were followed (or are about to be) by one with fewer jobs."""
    ooms = [bool(a.get("oom")) for a in _attempts(node)]
    count = sum(ooms)
    if ooms and ooms[-1] and phase(node) in ("failed", "unreachable"):
        count -= 1
    return count


def oom_kills(node):
    return sum(a.get("oom_kills") or 0 for a in _attempts(node))


def peak_bytes(node):
    status = _status(node)
    result = (node or {}).get("result") or {}
    values = [a.get("peak_memory_bytes") for a in _attempts(node)]
    values += [status.get("peak_memory_bytes"), status.get("memory_bytes"), result.get("peak_memory_bytes")]
    values += [sample[1] for sample in status.get("timeline") or []]
    values = [v for v in values if isinstance(v, (int, float))]
    return max(values) if values else None


def first_failed_step(node):
    result = (node or {}).get("result") or {}
    # an OOM-killed attempt's FAILED lines are the kill, not a broken step: only attempts that failed otherwise count
    steps = [step for a in _attempts(node) if a.get("kind") not in ("ok", "oom") for step in a.get("failed_steps") or []]
    if result.get("failed") and not (_attempts(node) and _attempts(node)[-1].get("oom")):
        steps += list(result.get("failed_steps") or [])
    if not steps:
        return None
    step = steps[0]
    return step[len("FAILED: "):] if step.startswith("FAILED: ") else step


def attempt_elapsed(status):
    """Seconds the current attempt has run: the build's elapsed time less the attempts before it."""
    elapsed = status.get("elapsed_seconds")
    if elapsed is None:
        return None
    earlier = sum(a.get("duration") or 0 for a in status.get("attempts") or [] if a.get("attempt") != status.get("attempt"))
    return max(0.0, elapsed - earlier)


def eta_seconds(progress, elapsed):
    """Seconds left at the rate so far (steps done in this attempt over its time), or None when there is no rate."""
    progress = progress or {}
    done, total = progress.get("done"), progress.get("total")
    if not total or done is None:
        return None
    if done >= total:
        return 0.0
    if not done or not elapsed or elapsed < 1.0:  # under a second of this attempt: no rate worth showing
        return None
    return (total - done) * float(elapsed) / done


def row(name, node):
    """The table's cells for one node."""
    status = _status(node)
    current = phase(node)
    progress = status.get("progress") or {}
    if current == "done" and status.get("state") != "succeeded":   # the succeeded status counts the whole build
        progress = ((node.get("result") or {}).get("attempts") or [{}])[-1].get("progress") or progress
    if progress.get("total"):
        cell = "[%d/%d] %s%%" % (progress.get("done", 0), progress["total"], progress.get("percent"))
    else:
        cell = "-"
    backing_off = status.get("state") == "oom-backoff"
    eta, basis = None, None
    if current not in FINAL and current not in ("queued", "starting") and not backing_off:
        # the node's ETA, smoothed over the whole build (learned per-step times, else its rate over every attempt),
        # with its basis; a node that writes none: the rate of this attempt so far
        eta, basis = status.get("eta_seconds"), status.get("eta_basis") or "learned"
        if eta is None:
            eta, basis = eta_seconds(progress, attempt_elapsed(status)), "rate"
    jobs = status.get("jobs")
    result = node.get("result") or {}
    if result.get("final_jobs") is not None:
        jobs = result["final_jobs"]
    count = backoffs(node)
    jobs_cell = "-" if jobs is None else ("%s (%d backoff%s)" % (jobs, count, "" if count == 1 else "s") if count else str(jobs))
    compiles = status.get("compiles") if current not in FINAL else None
    if jobs is not None and compiles_shown(compiles):   # under admission -j is ninja's width: say what really runs
        jobs_cell = "%d of %s%s" % (compiles["running"], jobs_cell, ", %d frozen" % compiles["frozen"] if compiles.get("frozen") else "")
    limit = status.get("memory_limit_bytes") or result.get("memory_limit_bytes")
    memory = None if current in FINAL else status.get("memory_bytes")
    memory_cell = "%s / %s" % (human(memory) if memory is not None else "-", human(limit) if limit else "-")
    peak = peak_bytes(node)
    kills = oom_kills(node)
    failed = first_failed_step(node)
    if current == "unreachable":
        failed = "unreachable: %s" % node["unreachable"]
    elif current in ("failed", "stopped") and not failed:
        failed = result.get("msg") or status.get("message")
    elif node.get("status_error") and not failed:
        failed = "status: %s" % node["status_error"]
    return (name, current, cell, "%s %s" % (duration(eta), basis) if eta is not None else "-", jobs_cell, memory_cell,
            human(peak) if peak else "-", str(kills), " ".join(printable(failed or "-").split())[:80])


def counts_line(nodes, elapsed):
    phases = [phase(node) for node in nodes.values()]
    parts = ["%d %s" % (phases.count(p), p) for p in PHASES if phases.count(p)]
    return "BUILD %s: %s (of %d)" % (duration(elapsed), ", ".join(parts) or "no nodes", len(nodes))


def render_table(nodes, elapsed):
    """The live view: a counts line, then a fixed-width table, one row per node (sorted by name)."""
    rows = [COLUMNS] + [row(name, nodes[name]) for name in sorted(nodes)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS) - 1)]
    lines = ["  ".join(cell.ljust(widths[i]) if i < len(widths) else cell for i, cell in enumerate(r)).rstrip()
             for r in rows]
    return [counts_line(nodes, elapsed)] + lines


def all_final(nodes):
    """Whether every node is over (its job's result is in, or it is unreachable): a status file alone never ends
    the watch."""
    return all(over(node) for node in nodes.values())


# ---------------------------------------------------------------- the report

def events(attempts, timeline):
    """Where each attempt after the first began (the backoff), in seconds since the build started: its first
    timeline sample, else the sum of the earlier attempts' durations."""
    starts = {}
    for sample in timeline or []:
        starts.setdefault(sample[3], sample[0])
    found = []
    elapsed = 0.0
    for index, attempt in enumerate(attempts):
        elapsed += attempt.get("duration") or 0
        if index + 1 < len(attempts):
            following = attempts[index + 1]
            moment = starts.get(following.get("attempt"), elapsed)
            found.append({"t": moment, "kind": "oom" if attempt.get("oom") else (attempt.get("kind") or "retry"),
                          "label": "%s at jobs=%s, resumed with jobs=%s" % (
                              "OOM" if attempt.get("oom") else attempt.get("kind"), attempt.get("jobs"),
                              following.get("jobs"))})
    return found


def compiler_cache(node):
    """The build's compiler cache (issue 22, guarded_build's ``compiler_cache``): kind, whole compiles from the
    cache and the hit rate, the cache's size; None when the build had none or has not said yet."""
    cache = (node.get("result") or {}).get("compiler_cache") or _status(node).get("compiler_cache")
    if not isinstance(cache, dict) or cache.get("kind") not in ("ccache", "sccache"):
        return None
    numbers = dict((key, cache.get(key) if is_number(cache.get(key)) else None)
                   for key in ("hits", "misses", "compiles", "hit_rate", "size_bytes", "max_size_bytes"))
    summary = cache.get("summary") if isinstance(cache.get("summary"), str) else cache["kind"]
    return dict(numbers, kind=cache["kind"], summary=printable(bounded(summary, MAX_STEP_TEXT)),
                size_human=human(numbers["size_bytes"]))


def node_report(node):
    status = _status(node)
    result = node.get("result") or {}
    attempts = [dict(attempt=a.get("attempt"), jobs=a.get("jobs"), duration=a.get("duration"),
                     peak_memory_bytes=a.get("peak_memory_bytes"), peak_memory_human=human(a.get("peak_memory_bytes")),
                     oom_kills=a.get("oom_kills"), oom=bool(a.get("oom")), kind=a.get("kind"), why=a.get("why"),
                     failed_steps=a.get("failed_steps") or []) for a in _attempts(node)]
    timeline = status.get("timeline") or []
    peak = peak_bytes(node)
    limit = status.get("memory_limit_bytes") or result.get("memory_limit_bytes")
    return dict(
        phase=phase(node),
        message=printable(result.get("msg") or status.get("message") or node.get("unreachable") or ""),
        unreachable=node.get("unreachable"),
        status_error=node.get("status_error"),
        run_id=status.get("run_id"),
        attempts=attempts,
        backoffs=backoffs(node),
        oom_kills=oom_kills(node),
        final_jobs=result.get("final_jobs", status.get("jobs")),
        duration=result.get("duration", status.get("duration", status.get("elapsed_seconds"))),
        peak_memory_bytes=peak,
        peak_memory_human=human(peak),
        memory_limit_bytes=limit,
        memory_limit_human=human(limit),
        first_failed_step=first_failed_step(node),
        confinement=status.get("confinement"),
        log=result.get("log") or status.get("log"),
        timeline=timeline,
        events=events(attempts, timeline),
        compiler_cache=compiler_cache(node),
    )


def build_report(nodes, finished=None):
    """``{name: node}`` -> the build report (what build.json holds and the Markdown and HTML render)."""
    entries = dict((name, node_report(nodes[name])) for name in sorted(nodes))
    phases = [entry["phase"] for entry in entries.values()]
    peaks = [e["peak_memory_bytes"] for e in entries.values() if e["peak_memory_bytes"]]
    durations = [e["duration"] for e in entries.values() if e["duration"] is not None]
    summary = dict(nodes=len(entries), done=phases.count("done"), failed=phases.count("failed"),
                   stopped=phases.count("stopped"),
                   unreachable=phases.count("unreachable"), running=len([p for p in phases if p not in FINAL]),
                   backoffs=sum(e["backoffs"] for e in entries.values()),
                   oom_kills=sum(e["oom_kills"] for e in entries.values()),
                   peak_memory_bytes=max(peaks) if peaks else None, peak_memory_human=human(max(peaks)) if peaks else None,
                   longest_seconds=max(durations) if durations else None)
    return dict(finished=finished, summary=summary, nodes=entries)


def summary_line(report):
    s = report["summary"]
    return "%d done, %d failed, %s%d unreachable (of %d); %d backoff%s, %d OOM kill%s, peak %s, longest %s" % (
        s["done"], s["failed"], "%d stopped, " % s["stopped"] if s.get("stopped") else "", s["unreachable"], s["nodes"],
        s["backoffs"], "" if s["backoffs"] == 1 else "s",
        s["oom_kills"], "" if s["oom_kills"] == 1 else "s", s["peak_memory_human"] or "-", duration(s["longest_seconds"]))


def render_json(report):
    return json.dumps(report, indent=2, sort_keys=True, default=str) + "\n"


def render_markdown(report):
    cell = _report.markdown_text  # a step or node name may be `ld.<img src=x onerror=...>` + U+202E

    out = ["# Fleet build", "", summary_line(report), "",
           "| node | phase | attempts (jobs) | backoffs | OOM kills | peak / budget | duration | first failed step |",
           "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, entry in sorted(report["nodes"].items()):
        out.append("| %s | %s | %s | %d | %d | %s / %s | %s | %s |" % (
            cell(name), entry["phase"], " → ".join(str(a["jobs"]) for a in entry["attempts"]) or "-",
            entry["backoffs"], entry["oom_kills"], entry["peak_memory_human"] or "-", entry["memory_limit_human"] or "-",
            duration(entry["duration"]), cell(entry["first_failed_step"] or "-")))
    for name, entry in sorted(report["nodes"].items()):
        out += ["", "## %s" % cell(name), ""]
        if entry["message"]:
            out += [cell(entry["message"]), ""]
        if entry.get("compiler_cache"):
            out += ["Compiler cache: " + cell(entry["compiler_cache"]["summary"]), ""]
        if not entry["attempts"]:
            out.append("No attempt finished.")
            continue
        out += ["| attempt | jobs | duration | peak | OOM kills | ended | why |", "| --- | --- | --- | --- | --- | --- | --- |"]
        out.extend("| %s | %s | %s | %s | %s | %s | %s |" % (
            a["attempt"], a["jobs"], duration(a["duration"]), a["peak_memory_human"] or "-",
            "-" if a["oom_kills"] is None else a["oom_kills"], a["kind"], cell(a["why"] or "-")) for a in entry["attempts"])
    return "\n".join(out) + "\n"
