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

from ansible_collections.gpufleet.preflight.plugins.module_utils._checks import printable

STATUSES = ("ready", "not_ready", "unreachable")

# How each report file starts, so an earlier report can be replaced and anyone else's file never is.
SIGNATURES = {
    "preflight.json": b'{\n  "finished":',
    "preflight.xml": b'<testsuites name="gpufleet.preflight"',
    "preflight.md": b"# Fleet preflight\n",
    "preflight.html": b"<!DOCTYPE html>\n<!-- gpufleet.preflight preflight report -->",  # _html_report
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


CHECK_STATUSES = ("ok", "failed", "unknown", "skipped")


def check_results(results, option="results"):
    """ValueError naming ``option`` unless ``results`` is ``{hostname: registered readiness result or None}``.

    Only the keys the report reads are checked; a result is whatever readiness (or an unreachable host) left.
    """
    if not isinstance(results, dict):
        raise ValueError("%s: a dict of hostname -> registered readiness result, got %s" % (option, type(results).__name__))
    for host, result in results.items():
        where = "%s[%s]" % (option, printable(str(host)))
        if result is None:
            continue
        if not isinstance(result, dict):
            raise ValueError("%s: a registered readiness result (dict) or null, got %s" % (where, type(result).__name__))
        if "ready" in result and not isinstance(result["ready"], bool):
            raise ValueError("%s: ready must be true or false, got %r" % (where, result["ready"]))
        _check_checks(where, result.get("checks"))


def _check_checks(where, checks):
    if checks is None:
        return
    if not isinstance(checks, list):
        raise ValueError("%s: checks must be a list of checks, got %s" % (where, type(checks).__name__))
    for index, check in enumerate(checks):
        if not isinstance(check, dict) or not isinstance(check.get("name"), str) or check.get("status") not in CHECK_STATUSES:
            raise ValueError("%s: checks[%d] must be a check with a name and a status (%s), got %r"
                             % (where, index, ", ".join(CHECK_STATUSES), check))


def check_report(report, needs_hosts=True):
    """ValueError naming ``report`` unless it has the shape build_report makes (what the renderings read)."""
    if not isinstance(report, dict):
        raise ValueError("report: the dict fleet_report returns, got %s" % type(report).__name__)
    summary = report.get("summary")
    if not isinstance(summary, dict) or not all(isinstance(summary.get(key), int) and not isinstance(summary.get(key), bool)
                                                for key in ("total", "not_ready", "unreachable")):
        raise ValueError("report: needs summary with whole-number total, not_ready and unreachable counts, got %r" % (summary,))
    if not needs_hosts:
        return
    hosts = report.get("hosts")
    if not isinstance(hosts, dict):
        raise ValueError("report: needs hosts, a dict of hostname -> host entry, got %r" % (hosts,))
    for name, entry in hosts.items():
        where = "report: hosts[%s]" % printable(str(name))
        if not isinstance(entry, dict) or entry.get("status") not in STATUSES:
            raise ValueError("%s: a host entry with a status (%s), got %r" % (where, ", ".join(STATUSES), entry))
        _check_checks(where, entry.get("checks"))


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
        reason=("%s: %s" % (failed[0]["name"], failed[0].get("message") or "")) if failed else None,
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
    memory = entry.get("memory") or {}
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
        procs = "-" if entry.get("build_processes") is None else str(entry["build_processes"])
        reason = " ".join(str(entry.get("reason") or "-").split())  # one line per host, whatever the message holds
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
    failures = [(name, c) for name, entry in sorted(report["hosts"].items()) for c in entry.get("checks") or []
                if c.get("status") in ("failed", "unknown")]
    if failures:
        out += ["", "## Failed checks", ""]
        out.extend("- **%s** `%s`: %s" % (name, c["name"], cell(c.get("message") or "")) for name, c in failures)
    return "\n".join(out) + "\n"


def render_junit(report):
    """JUnit XML: a test suite per host, a test case per check; unreachable hosts are errors."""
    suites = ElementTree.Element("testsuites", name="gpufleet.preflight")
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
