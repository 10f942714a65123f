# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fleet reports: each host's readiness result -> one report dict -> table, Markdown, JUnit XML (HTML: _html_report).

Pure functions; the fleet_reports action and the filter plugins hand them plain data. What the renderings share
lives here once: the columns of the host table (``COLUMNS``: console, Markdown and HTML all read it), the failures
grouped by check, the check x node grid, the gate's decision and the text cleaning (``safe``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re
from xml.etree import ElementTree

from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness._checks import describe_age, printable
from ansible_collections.gpufleet.preflight.plugins.plugin_utils._gate import gate_line

STATUSES = ("ready", "not_ready", "unreachable")
PROCESSES_KEPT = 50  # per node, in the report; the count is always the whole number
# Characters of one message a report keeps: every rendering repeats a failure's text (table, groups, grid titles), so
# one node's 50 MB message made a 200 MB page for the whole fleet. The node's registered result keeps all of it.
MESSAGE_KEPT = 2000

# How each report file starts, so an earlier report can be replaced and anyone else's file never is.
SIGNATURES = {
    "preflight.json": b'{\n  "finished":',
    "preflight.xml": b'<testsuites name="gpufleet.preflight"',
    "preflight.md": b"# Fleet preflight\n",
    "preflight.html": b"<!DOCTYPE html>\n<!-- gpufleet.preflight preflight report -->",  # _html_report
}


def safe(text):
    """Any text -> text with no control and no format character: both become visible escapes (``\\x1b``,
    ``\\u202e``). Every string of a report passes through here once (``clean``)."""
    if text.isascii() and text.isprintable():  # most text: nothing to escape, no regex to run
        return text
    return printable(text)  # the one rule for control and format characters (_checks)


def clean(value):
    """``value`` with every string (and dict key) passed through ``safe``."""
    if isinstance(value, str):
        return safe(value)
    if isinstance(value, dict):
        return dict((clean(key), clean(item)) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return [clean(item) for item in value]
    return value


_MARKDOWN = re.compile(r"([\\`*_\[\]<>|#~!])")


def markdown_text(text):
    """Text for a Markdown paragraph or table cell: one line, no HTML or emphasis, links or code a reader did not
    write (a process may call itself ``ld.<img src=x onerror=...>``): Markdown's punctuation backslash-escaped,
    ``&`` as an entity."""
    return _MARKDOWN.sub(r"\\\1", " ".join(safe(str(text)).split()).replace("&", "&amp;"))


def is_own_report(name, head):
    """Whether a file named ``name`` beginning with the bytes ``head`` is an earlier report (or empty)."""
    return not head or head.startswith(SIGNATURES.get(name, b"\0"))


def _entry_without_facts(status, reason, failed_checks=()):
    return dict(status=status, reason=reason, checks=[], failed_checks=list(failed_checks), memory={},
                build_processes=None, processes=[], waited_seconds=None, checked_at=None, policy={})


def required_memory(checks):
    """The bytes the host's ``available_memory`` check required (it computed them from the policy), or None."""
    for check in checks:
        if check.get("name") == "available_memory":
            required = check.get("required_bytes")
            return required if isinstance(required, int) and not isinstance(required, bool) else None
    return None


def bounded(text, kept=MESSAGE_KEPT):
    """``text`` cut to ``kept`` characters, saying so and how long it was."""
    if not isinstance(text, str) or len(text) <= kept:
        return text
    return "%s... [cut: %d characters in all; the host's registered readiness result has the whole text]" % (
        text[:kept], len(text))


def _bounded_check(check):
    """Its message, ``observed`` and ``expected`` (node-made: GPU names, kernel lines) cut to ``MESSAGE_KEPT``."""
    changes = dict((key, bounded(value if isinstance(value, str) else repr(value))) for key, value in (
        check.items() if isinstance(check, dict) else ()) if key in ("message", "observed", "expected")
        and isinstance(value, (str, list, tuple, dict)) and len(value) and len(repr(value)) > MESSAGE_KEPT)
    return dict(check, **changes) if changes else check


def _process(proc):
    return dict(pid=proc.get("pid"), name=proc.get("name"), orphaned=bool(proc.get("orphaned")),
                zombie=bool(proc.get("zombie")), age_seconds=proc.get("age_seconds"), rss_bytes=proc.get("rss_bytes"),
                user=proc.get("user"))


def host_entry(result):
    """One host's registered ``readiness`` result (or ``None`` when nothing came back) -> its report entry."""
    if not result:
        return _entry_without_facts("unreachable", "no result from this host: it was unreachable or skipped")
    if result.get("unreachable"):
        return _entry_without_facts("unreachable", bounded("unreachable: %s" % (result.get("msg") or "no answer").strip()))
    if "ready" not in result:
        return _entry_without_facts("not_ready", bounded("the check itself failed: %s" % (result.get("msg") or "no message")),
                                    ["readiness"])
    facts = result.get("ansible_facts") or {}
    memory = facts.get("gpufleet_memory") or {}
    effective = memory.get("effective") or {}
    host = memory.get("host") or {}
    procs = facts.get("gpufleet_build_processes") or {}
    processes = procs.get("processes") or []
    checks = [_bounded_check(c) for c in result.get("checks") or []]
    failed = [c for c in checks if c.get("status") in ("failed", "unknown")]
    policy = result.get("policy") or {}
    return dict(
        status="ready" if result["ready"] else "not_ready",
        reason=("%s: %s" % (failed[0]["name"], failed[0].get("message") or "")) if failed else None,
        checks=checks,
        failed_checks=[c["name"] for c in failed],
        memory=dict(
            effective_available_bytes=effective.get("available_bytes"),
            effective_available_human=effective.get("available_human"),
            effective_total_bytes=effective.get("total_bytes"),
            effective_total_human=effective.get("total_human"),
            host_total_bytes=host.get("total_bytes"),
            host_total_human=host.get("total_human"),
            limited_by=effective.get("limited_by"),
            required_bytes=required_memory(checks),
        ),
        build_processes=procs.get("count"),
        processes=[_process(p) for p in processes[:PROCESSES_KEPT]],
        waited_seconds=result.get("waited_seconds"),
        checked_at=result.get("checked_at"),
        policy=policy,
    )


def build_report(results, policy=None, started=None, finished=None, run=None):
    """``{hostname: registered result or None}`` -> the fleet report (what JSON, JUnit, Markdown and HTML render).

    Without an explicit ``policy`` the report keeps the one every checked host used, or ``per_host``
    when group variables gave hosts different ones (each host entry keeps its own). ``run``: what the
    action knows of the run (collection version, limit, inventory), shown in the summaries.
    """
    # Cleaned once here, so every rendering (JSON, JUnit, Markdown, HTML, console) shows the same escaped text.
    hosts = clean(dict((name, host_entry(results[name])) for name in sorted(results)))
    if not policy:
        used = [entry["policy"] for entry in hosts.values() if entry.get("policy")]
        policy = used[0] if used and all(p == used[0] for p in used) else ({"per_host": True} if used else {})
    counts = dict((status, sum(1 for h in hosts.values() if h["status"] == status)) for status in STATUSES)
    counts["total"] = len(hosts)
    return dict(summary=counts, hosts=hosts, policy=clean(policy or {}), started=started, finished=finished,
                gate=None, run=clean(run or {}))


# ---------------------------------------------------------------- one column list for every table

class Column(object):
    """One column of the host table: ``header``, ``cell(name, entry) -> text``, ``numeric`` (right-aligned).

    Keyword-only, so a column missing its header says ``header``, not the argument after it."""

    def __init__(self, *, key, header, cell, numeric=False):
        self.key, self.header, self.cell, self.numeric = key, header, cell, numeric


def _memory_cell(name, entry):
    memory = entry.get("memory") or {}
    if not memory.get("effective_total_human"):
        return "-"
    cell = "%s / %s" % (memory["effective_available_human"], memory["effective_total_human"])
    if memory.get("limited_by") == "cgroup":
        cell += " (cgroup; host %s)" % memory.get("host_total_human")
    return cell


COLUMNS = (
    Column(key="host", header="HOST", cell=lambda name, entry: name),
    # A node whose check could not run at all (its one failed check is readiness itself): not known to be safe (issue 39)
    Column(key="status", header="STATUS", cell=lambda name, entry: entry["status"].replace("_", " ")
           + (" (unknown)" if entry["status"] == "not_ready" and entry.get("failed_checks") == ["readiness"] else "")),
    Column(key="memory", header="EFFECTIVE AVAILABLE / TOTAL", cell=_memory_cell),
    Column(key="build_processes", header="BUILD PROCS", cell=lambda name, entry: "-" if entry.get("build_processes") is None
           else str(entry["build_processes"]), numeric=True),
    # one line per host, whatever the message holds
    Column(key="reason", header="FIRST FAILED CHECK", cell=lambda name, entry: " ".join(str(entry.get("reason") or "-").split())),
)


def table_rows(report, columns=COLUMNS):
    """The header, then a row per host (sorted), one cell per column of ``columns``."""
    rows = [tuple(column.header for column in columns)]
    for name, entry in sorted(report["hosts"].items()):
        rows.append(tuple(column.cell(name, entry) for column in columns))
    return rows


def summary_line(report):
    counts = report["summary"]
    return "%d ready, %d not ready, %d unreachable (of %d)" % (
        counts["ready"], counts["not_ready"], counts["unreachable"], counts["total"])


def render_table(report, columns=COLUMNS):
    """Fixed-width text table for the console (every column padded but the last; numbers right-aligned), ending
    with the count line and the gate's decision."""
    rows = table_rows(report, columns)
    widths = [max(len(row[i]) for row in rows) for i in range(len(columns))]

    def pad(index, cell):
        if index == len(columns) - 1:
            return cell
        return cell.rjust(widths[index]) if columns[index].numeric else cell.ljust(widths[index])

    lines = ["  ".join(pad(i, cell) for i, cell in enumerate(row)).rstrip() for row in rows]
    lines.append(summary_line(report))
    if gate_line(report):
        lines.append(gate_line(report))
    return lines


# ---------------------------------------------------------------- failures grouped, the grid

_UNKNOWN = re.compile(r"^unknown: (?:[^:]{1,80} state is [^:]{1,40}: )?")


def _same_cause(message, other):
    """Whether ``message`` (an unknown check's) says nothing ``other`` does not: its reason, without the
    ``unknown: nvidia-smi state is not_found:`` lead, is part of ``other``."""
    core = _UNKNOWN.sub("", message)
    return core != message and len(core) >= 20 and core in other


def node_failures(entry):
    """A host's failures as ``[(check names, message)]``: checks failing with the same message (a missing
    ``nvidia-smi`` fails every GPU check) are said once, and so is an unknown check whose reason another
    failure of the host already says."""
    if entry["status"] == "unreachable":
        return [(("reachable",), entry.get("reason") or "no result")]
    by_message = []
    for check in entry.get("checks") or []:
        if check.get("status") not in ("failed", "unknown"):
            continue
        message = " ".join(str(check.get("message") or check.get("status")).split())
        for names, known in by_message:
            if known == message:
                names.append(check["name"])
                break
        else:
            by_message.append(([check["name"]], message))
    for index in range(len(by_message) - 1, -1, -1):
        names, message = by_message[index]
        for other in by_message:
            if other[1] != message and _same_cause(message, other[1]):
                other[0].extend(names)
                del by_message[index]
                break
    if not by_message and entry["status"] == "not_ready":
        by_message.append((list(entry.get("failed_checks") or ["readiness"]), " ".join(str(entry.get("reason") or "").split())))
    return [(tuple(names), message) for names, message in by_message]


def failure_groups(report):
    """Failures grouped by check, most hosts first::

        [{checks: [names], hosts: [host, ...], messages: [{message, hosts: [...]}, ...]}]
    """
    groups = {}
    for name, entry in sorted(report["hosts"].items()):
        for checks, message in node_failures(entry):
            group = groups.setdefault(checks, dict(checks=list(checks), hosts=[], messages=[], _by={}))
            group["hosts"].append(name)
            if message not in group["_by"]:
                group["_by"][message] = dict(message=message, hosts=[])
                group["messages"].append(group["_by"][message])
            group["_by"][message]["hosts"].append(name)
    ordered = sorted(groups.values(), key=lambda g: (-len(g["hosts"]), g["checks"]))
    for group in ordered:
        del group["_by"]
    return ordered


GRID_MARKS = {"ok": "ok", "failed": "FAIL", "unknown": "?", "skipped": "-", None: ""}


def grid(report):
    """The check x host grid: ``{checks: [names in order of first appearance], rows: [{host, status, cells:
    [{status: ok|failed|unknown|skipped|None (not run), mark, message}]}]}``."""
    checks = []
    seen = set()
    for _name, entry in sorted(report["hosts"].items()):
        for check in entry.get("checks") or []:
            if check["name"] not in seen:
                seen.add(check["name"])
                checks.append(check["name"])
    rows = []
    for name, entry in sorted(report["hosts"].items()):
        by_name = dict((c["name"], c) for c in entry.get("checks") or [])
        cells = []
        for check in checks:
            found = by_name.get(check)
            status = found.get("status") if found else None
            cells.append(dict(status=status, mark=GRID_MARKS.get(status, str(status)),
                              message=" ".join(str((found or {}).get("message") or "").split())))
        rows.append(dict(host=name, status=entry["status"], reason=entry.get("reason"), cells=cells))
    return dict(checks=checks, rows=rows)


def process_rows(report):
    """Every build process still running, one row each: ``(host, pid, name, state, age)``; state says
    orphaned and/or zombie."""
    rows = []
    for name, entry in sorted(report["hosts"].items()):
        for proc in entry.get("processes") or []:
            state = ", ".join(word for word, flag in (("orphaned", proc.get("orphaned")), ("zombie", proc.get("zombie")))
                              if flag) or "running"
            rows.append((name, str(proc.get("pid")), str(proc.get("name")), state,
                         describe_age(proc["age_seconds"]) if isinstance(proc.get("age_seconds"), (int, float)) else "-"))
    return rows


def run_line(report):
    """``checked 2026-...; gpufleet.preflight 0.1.0; limit node*; inventory inventory/fleet.ini``."""
    run = report.get("run") or {}
    parts = ["checked %s" % (report.get("finished") or "-")]
    if run.get("collection_version"):
        parts.append("gpufleet.preflight %s" % run["collection_version"])
    parts.append("limit %s" % (run.get("limit") or "none (all hosts of the play)"))
    if run.get("inventory"):
        parts.append("inventory %s" % ", ".join(str(i) for i in run["inventory"]) if isinstance(run["inventory"], list)
                     else "inventory %s" % run["inventory"])
    return "; ".join(parts)


# ---------------------------------------------------------------- JSON, Markdown, JUnit

def render_json(report):
    return json.dumps(report, indent=2, sort_keys=True, default=str) + "\n"


def render_markdown(report, columns=COLUMNS):
    md = markdown_text
    rows = table_rows(report, columns)
    out = ["# Fleet preflight", "", md(summary_line(report)), ""]
    if gate_line(report):
        out += ["**%s**" % md(gate_line(report)), ""]
    out += [md(run_line(report)), ""]
    groups = failure_groups(report)
    if groups:
        out += ["## Failures by check", ""]
        for group in groups:
            out.append("- `%s` — %d host%s: %s" % (", ".join(group["checks"]).replace("`", "'"), len(group["hosts"]),
                                                   "" if len(group["hosts"]) == 1 else "s", md(", ".join(group["hosts"]))))
            out.extend("  - %s: %s" % (md(", ".join(item["hosts"])), md(item["message"])) for item in group["messages"])
        out.append("")
    out += ["## Hosts", "", "| " + " | ".join(md(h) for h in rows[0]) + " |",
            "|" + "".join(" ---: |" if column.numeric else " --- |" for column in columns)]
    out.extend("| " + " | ".join(md(c) for c in row) + " |" for row in rows[1:])
    processes = process_rows(report)
    if processes:
        out += ["", "## Build processes still running", "", "| host | pid | name | state | age |", "| --- | ---: | --- | --- | ---: |"]
        out.extend("| " + " | ".join(md(c) for c in row) + " |" for row in processes)
    return "\n".join(out) + "\n"


def render_junit(report):
    """JUnit XML: a test suite per host, a test case per check; unreachable hosts are errors; a gate with a limit
    is a suite of its own (``gate``) whose one case fails when the gate stopped the run."""
    suites = ElementTree.Element("testsuites", name="gpufleet.preflight")
    decision = report.get("gate")
    if isinstance(decision, dict) and decision.get("decision") and decision.get("max_not_ready") is not None:
        suite = ElementTree.SubElement(suites, "testsuite", name="gate", tests="1", errors="0", skipped="0",
                                       failures="1" if decision.get("abort") else "0")
        case = ElementTree.SubElement(suite, "testcase", classname="gate", name="max_not_ready")
        if decision.get("abort"):
            ElementTree.SubElement(case, "failure", message="stopped the run: %s" % decision.get("reason")).text = str(
                decision.get("reason"))
        else:
            ElementTree.SubElement(case, "system-out").text = str(decision.get("reason"))
    for name, entry in sorted(report["hosts"].items()):
        suite = ElementTree.SubElement(suites, "testsuite", name=name)
        failures = errors = skipped = 0
        checks = entry.get("checks") or []
        if entry["status"] == "unreachable" or not checks:
            reason = str(entry.get("reason") or "no result")
            case = ElementTree.SubElement(suite, "testcase", classname=name, name="reachable")
            ElementTree.SubElement(case, "error", message=reason).text = reason
            errors += 1
        for check in checks:
            case = ElementTree.SubElement(suite, "testcase", classname=name, name=check["name"])
            if check["status"] == "failed":
                ElementTree.SubElement(case, "failure", message=str(check.get("message") or "")).text = "observed %r, expected %r" % (
                    check.get("observed"), check.get("expected"))
                failures += 1
            elif check["status"] == "unknown":
                ElementTree.SubElement(case, "error", message=str(check.get("message") or "")).text = str(check.get("message") or "")
                errors += 1
            elif check["status"] == "skipped":
                ElementTree.SubElement(case, "skipped", message=str(check.get("message") or ""))
                skipped += 1
        suite.set("tests", str(len(suite)))
        suite.set("failures", str(failures))
        suite.set("errors", str(errors))
        suite.set("skipped", str(skipped))
    return ElementTree.tostring(suites, encoding="unicode")
