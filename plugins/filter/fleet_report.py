# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that turn the fleet's readiness results into reports; documented in the sidecar YAML files.

Input is checked here (a filter takes anything a template hands it) and refused naming what is wrong;
the rendering is the pure code in plugin_utils/_report.py that the fleet_reports action uses too.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.preflight.plugins.plugin_utils import _gate, _report, _report_input

_UNSET = object()


def _refused(name, exc):
    return AnsibleFilterError("%s: %s" % (name, exc))


def fleet_report(results, policy=None, started=None, finished=None):
    try:
        _report_input.check_results(results)
    except ValueError as exc:
        raise _refused("fleet_report", exc)
    if policy is not None and not isinstance(policy, dict):
        raise AnsibleFilterError("fleet_report: policy must be a dict (the policy the checks used), got %s" % type(policy).__name__)
    for name, value in (("started", started), ("finished", finished)):
        if value is not None and not isinstance(value, (str, int, float)):
            raise AnsibleFilterError("fleet_report: %s must be a time as text, got %s" % (name, type(value).__name__))
    return _report.build_report(dict((str(k), v) for k, v in results.items()), policy, started, finished)


def _rendered(name, render, report):
    try:
        _report_input.check_report(report)
    except ValueError as exc:
        raise _refused(name, exc)
    return render(_report.clean(report))


def fleet_table(report):
    return _rendered("fleet_table", _report.render_table, report)


def fleet_markdown(report):
    return _rendered("fleet_markdown", _report.render_markdown, report)


def fleet_junit(report):
    return _rendered("fleet_junit", _report.render_junit, report)


def fleet_gate(report, max_not_ready=_UNSET):
    if max_not_ready is _UNSET:
        raise AnsibleFilterError("fleet_gate: max_not_ready is required: a count of hosts like 2, a percentage like 25%, "
                                 "or '' for no limit")
    try:
        _report_input.check_report(report, needs_hosts=False)
        decision = _gate.gate(report, max_not_ready)
    except ValueError as exc:
        raise _refused("fleet_gate", exc)
    return decision


class FilterModule(object):
    def filters(self):
        return dict(
            fleet_report=fleet_report,
            fleet_table=fleet_table,
            fleet_markdown=fleet_markdown,
            fleet_junit=fleet_junit,
            fleet_gate=fleet_gate,
        )
