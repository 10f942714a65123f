# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fleet reports: each host's readiness result -> one report dict -> table, Markdown, JUnit XML.

Pure functions; the filter plugin hands them plain data and the playbook writes the files.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
from xml.etree import ElementTree

from ansible_collections.gpufleet.preflight.plugins.plugin_utils._checks import printable

STATUSES = ("ready", "not_ready", "unreachable")

# How each report file starts, so an earlier report can be replaced and anyone else's file never is.
SIGNATURES = {
    "preflight.json": b'{\n  "finished":',
    "preflight.xml": b'<testsuites name="gpufleet.preflight"',
    "preflight.md": b"# Fleet preflight\n",
}


def clean(value):
    """``value`` with every string (and dict key) passed through ``printable``."""
    if isinstance(value, dict):
        return dict((clean(key), clean(item)) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return [clean(item) for item in value]
    if isinstance(value, str):
        return printable(value)
    return value


def is_own_report(name, head):
    """Whether a file named ``name`` beginning with the bytes ``head`` is an earlier report (or empty)."""
    return not head or head.startswith(SIGNATURES.get(name, b"\0"))


def _entry_without_facts(status, reason, failed_checks=()):
    return dict(status=status, reason=reason, checks=[], failed_checks=list(failed_checks), memory={},
                build_processes=None, waited_seconds=None, checked_at=None, policy={})


def host_entry(result):
    """One host's registered ``readiness`` result (or ``None`` when nothing came back) -> its report entry."""
    if not result:
        return _entry_without_facts("unreachable", "no result from this host: it was unreachable or skipped")
    if result.get("unreachable"):
        return _entry_without_facts("unreachable", "unreachable: %s" % (result.get("msg") or "no answer").strip())
    if "ready" not in result:
        return _entry_without_facts("not_ready", "the check itself failed: %s" % (result.get("msg") or "no message"),
                                    ["readiness"])
    facts = result.get("ansible_facts") or {}
    memory = facts.get("gpufleet_memory") or {}
    effective = memory.get("effective") or {}
    host = memory.get("host") or {}
    procs = facts.get("gpufleet_build_processes") or {}
    failed = [c for c in result.get("checks") or [] if c.get("status") in ("failed", "unknown")]
    return dict(
        status="ready" if result["ready"] else "not_ready",
        reason=("%s: %s" % (failed[0]["name"], failed[0]["message"])) if failed else None,
        checks=result.get("checks") or [],
        failed_checks=[c["name"] for c in failed],
        memory=dict(
            effective_available_bytes=effective.get("available_bytes"),
            effective_available_human=effective.get("available_human"),
            effective_total_bytes=effective.get("total_bytes"),
            effective_total_human=effective.get("total_human"),
            host_total_bytes=host.get("total_bytes"),
            host_total_human=host.get("total_human"),
            limited_by=effective.get("limited_by"),
        ),
        build_processes=procs.get("count"),
        waited_seconds=result.get("waited_seconds"),
        checked_at=result.get("checked_at"),
        policy=result.get("policy") or {},
    )


def build_report(results, policy=None, started=None, finished=None):
    """``{hostname: registered result or None}`` -> the fleet report (what JSON, JUnit and Markdown render).

    Without an explicit ``policy`` the report keeps the one every checked host used, or ``per_host``
    when group variables gave hosts different ones (each host entry keeps its own).
    """
    # Cleaned once here, so every rendering (JSON, JUnit, Markdown, console) shows the same escaped text.
    hosts = clean(dict((name, host_entry(results[name])) for name in sorted(results)))
    if not policy:
        used = [entry["policy"] for entry in hosts.values() if entry.get("policy")]
        policy = used[0] if used and all(p == used[0] for p in used) else ({"per_host": True} if used else {})
    counts = dict((status, sum(1 for h in hosts.values() if h["status"] == status)) for status in STATUSES)
    counts["total"] = len(hosts)
    return dict(summary=counts, hosts=hosts, policy=clean(policy or {}), started=started, finished=finished)


def too_many_not_ready(report, max_not_ready):
    """``(abort, why)`` for ``preflight_max_not_ready``: a count (``2``) or a percentage (``'25%'``).

    Unreachable hosts count as not ready. ValueError names the option when the limit is neither.
    """
    if max_not_ready is None or max_not_ready == "":
        return False, None
    text = str(max_not_ready).strip()
    total = report["summary"]["total"]
    try:
        if text.endswith("%"):
            percent = float(text[:-1])
            if not 0 <= percent <= 100:
                raise ValueError()
            limit = int(total * percent / 100.0)
            shown = "%s (%d of %d hosts)" % (text, limit, total)
        else:
            limit = int(text)
            if limit < 0 or str(limit) != text:
                raise ValueError()
            shown = text
    except ValueError:
        raise ValueError("preflight_max_not_ready: %r is neither a count of hosts (like 2) nor a percentage (like 25%%)" % (max_not_ready,))
    bad = report["summary"]["not_ready"] + report["summary"]["unreachable"]
    if bad > limit:
        return True, "%d of %d hosts are not ready or unreachable, more than preflight_max_not_ready=%s allows" % (bad, total, shown)
    return False, None


def _memory_cell(entry):
    memory = entry["memory"]
    if not memory.get("effective_total_human"):
        return "-"
    cell = "%s / %s" % (memory["effective_available_human"], memory["effective_total_human"])
    if memory.get("limited_by") == "cgroup":
        cell += " (cgroup; host %s)" % memory.get("host_total_human")
    return cell


def table_rows(report):
    """Rows of (host, status, memory, build processes, first failed check)."""
    rows = [("HOST", "STATUS", "EFFECTIVE AVAILABLE / TOTAL", "BUILD PROCS", "FIRST FAILED CHECK")]
    for name, entry in sorted(report["hosts"].items()):
        procs = "-" if entry["build_processes"] is None else str(entry["build_processes"])
        reason = " ".join((entry["reason"] or "-").split())  # one line per host, whatever the message holds
        rows.append((name, entry["status"].replace("_", " "), _memory_cell(entry), procs, reason))
    return rows


def summary_line(report):
    counts = report["summary"]
    return "%d ready, %d not ready, %d unreachable (of %d)" % (
        counts["ready"], counts["not_ready"], counts["unreachable"], counts["total"])


def render_table(report):
    """Fixed-width text table for the console, ending with the count line."""
    rows = table_rows(report)
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = ["  ".join(cell.ljust(widths[i]) if i < 4 else cell for i, cell in enumerate(row)).rstrip() for row in rows]
    return lines + [summary_line(report)]


def render_json(report):
    return json.dumps(report, indent=2, sort_keys=True, default=str) + "\n"


def render_markdown(report):
    def cell(text):
        return str(text).replace("|", "\\|").replace("\n", " ")

    rows = table_rows(report)
    out = ["# Fleet preflight", "", summary_line(report), "", "| " + " | ".join(rows[0]) + " |", "|" + " --- |" * len(rows[0])]
    out.extend("| " + " | ".join(cell(c) for c in row) + " |" for row in rows[1:])
    failures = [(name, c) for name, entry in sorted(report["hosts"].items()) for c in entry["checks"]
                if c.get("status") in ("failed", "unknown")]
    if failures:
        out += ["", "## Failed checks", ""]
        out.extend("- **%s** `%s`: %s" % (name, c["name"], cell(c["message"])) for name, c in failures)
    return "\n".join(out) + "\n"


def render_junit(report):
    """JUnit XML: a test suite per host, a test case per check; unreachable hosts are errors."""
    suites = ElementTree.Element("testsuites", name="gpufleet.preflight")
    for name, entry in sorted(report["hosts"].items()):
        suite = ElementTree.SubElement(suites, "testsuite", name=name)
        failures = errors = skipped = 0
        if entry["status"] == "unreachable" or not entry["checks"]:
            case = ElementTree.SubElement(suite, "testcase", classname=name, name="reachable")
            ElementTree.SubElement(case, "error", message=entry["reason"] or "no result").text = entry["reason"]
            errors += 1
        for check in entry["checks"]:
            case = ElementTree.SubElement(suite, "testcase", classname=name, name=check["name"])
            if check["status"] == "failed":
                ElementTree.SubElement(case, "failure", message=check["message"]).text = "observed %r, expected %r" % (
                    check.get("observed"), check.get("expected"))
                failures += 1
            elif check["status"] == "unknown":
                ElementTree.SubElement(case, "error", message=check["message"]).text = check["message"]
                errors += 1
            elif check["status"] == "skipped":
                ElementTree.SubElement(case, "skipped", message=check["message"])
                skipped += 1
        suite.set("tests", str(len(suite)))
        suite.set("failures", str(failures))
        suite.set("errors", str(errors))
        suite.set("skipped", str(skipped))
    return ElementTree.tostring(suites, encoding="unicode")
