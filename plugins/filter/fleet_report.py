# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that turn the fleet's readiness results into reports; documented in the sidecar YAML files."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.preflight.plugins.plugin_utils import _report


def fleet_report(results, policy=None, started=None, finished=None):
    if not isinstance(results, dict):
        raise AnsibleFilterError("fleet_report: expects a dict of hostname -> registered readiness result, got %s" % type(results).__name__)
    return _report.build_report(dict((str(k), v) for k, v in results.items()), policy, started, finished)


def fleet_table(report):
    return _report.render_table(report)


def fleet_markdown(report):
    return _report.render_markdown(report)


def fleet_junit(report):
    return _report.render_junit(report)


def fleet_gate(report, max_not_ready):
    try:
        abort, why = _report.too_many_not_ready(report, max_not_ready)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))
    return dict(abort=abort, reason=why)


class FilterModule(object):
    def filters(self):
        return dict(
            fleet_report=fleet_report,
            fleet_table=fleet_table,
            fleet_markdown=fleet_markdown,
            fleet_junit=fleet_junit,
            fleet_gate=fleet_gate,
        )
