# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the report code accepts, checked before it reads anything: registered readiness results (``check_results``)
and a report (``check_report``, for the filters that render one they are handed). A wrong shape is a ValueError that
names the option, the host and the key, never a traceback from deep in a rendering."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.preflight.plugins.plugin_utils._report import STATUSES, safe

CHECK_STATUSES = ("ok", "failed", "unknown", "skipped")
# (path in a readiness result, the type it must have when present, what it is called in a message)
_RESULT_SHAPE = (
    (("msg",), str, "text"),
    (("message",), str, "text"),
    (("policy",), dict, "a dict"),
    (("ansible_facts",), dict, "a dict of facts"),
    (("ansible_facts", "gpufleet_memory"), dict, "a dict (the memory facts)"),
    (("ansible_facts", "gpufleet_memory", "effective"), dict, "a dict"),
    (("ansible_facts", "gpufleet_memory", "host"), dict, "a dict"),
    (("ansible_facts", "gpufleet_build_processes"), dict, "a dict (the build process facts)"),
    (("ansible_facts", "gpufleet_build_processes", "processes"), list, "a list of processes"),
)


def _at(value, path):
    for key in path:
        if not isinstance(value, dict) or value.get(key) is None:
            return None
        value = value[key]
    return value


def check_results(results, option="results"):
    """ValueError naming ``option`` and the host unless ``results`` is ``{hostname: registered readiness result or
    None}``. Only the keys the report reads are checked; a result is whatever readiness (or an unreachable host) left.
    """
    if not isinstance(results, dict):
        raise ValueError("%s: a dict of hostname -> registered readiness result, got %s" % (option, type(results).__name__))
    for host, result in results.items():
        where = "%s[%s]" % (option, safe(str(host)))
        if result is None:
            continue
        if not isinstance(result, dict):
            raise ValueError("%s: a registered readiness result (dict) or null, got %s" % (where, type(result).__name__))
        if "ready" in result and not isinstance(result["ready"], bool):
            raise ValueError("%s: ready must be true or false, got %r" % (where, result["ready"]))
        for path, kind, called in _RESULT_SHAPE:
            value = _at(result, path)
            if value is not None and not isinstance(value, kind):
                raise ValueError("%s: %s must be %s, got %s %s" % (where, ".".join(path), called, type(value).__name__,
                                                                   safe(repr(value))[:80]))
        for index, proc in enumerate(_at(result, ("ansible_facts", "gpufleet_build_processes", "processes")) or []):
            if not isinstance(proc, dict):
                raise ValueError("%s: ansible_facts.gpufleet_build_processes.processes[%d] must be a process (dict), got %s"
                                 % (where, index, type(proc).__name__))
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
        where = "report: hosts[%s]" % safe(str(name))
        if not isinstance(entry, dict) or entry.get("status") not in STATUSES:
            raise ValueError("%s: a host entry with a status (%s), got %r" % (where, ", ".join(STATUSES), entry))
        _check_checks(where, entry.get("checks"))
    if report.get("gate") is not None and not isinstance(report["gate"], dict):
        raise ValueError("report: gate must be the dict fleet_gate returns, got %s" % type(report["gate"]).__name__)
