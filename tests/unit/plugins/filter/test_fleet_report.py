# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""plugins/filter/fleet_report.py: the filters hand plain data to plugin_utils/_report.py and name bad input."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from xml.etree import ElementTree

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.preflight.plugins.filter.fleet_report import FilterModule

FILTERS = FilterModule().filters()
RESULTS = {
    "node1": {"ready": True, "checks": [], "ansible_facts": {}},
    "node2": {"ready": False, "checks": [{"name": "build_processes", "status": "failed", "observed": 1, "expected": "<= 0",
                                          "message": "1 build process still running: \x1b[1mmake\x07 (pid 9)"}]},
    "node3": None,
}


def test_filters_are_registered():
    assert sorted(FILTERS) == ["fleet_gate", "fleet_junit", "fleet_markdown", "fleet_report", "fleet_table"]
    assert FILTERS["fleet_gate"](FILTERS["fleet_report"](RESULTS), "1")["abort"] is True


def test_a_hand_made_report_is_rendered_clean():
    report = {"summary": {"total": 1, "ready": 0, "not_ready": 1, "unreachable": 0},
              "hosts": {"h\x1b1": {"status": "not_ready", "checks": [{"name": "x", "status": "failed", "message": "\x07"}]}}}
    ElementTree.fromstring(FILTERS["fleet_junit"](report))
    assert "\x1b" not in "\n".join(FILTERS["fleet_table"](report)) and "\x07" not in FILTERS["fleet_markdown"](report)


def test_the_junit_filter_is_well_formed_whatever_the_names():
    root = ElementTree.fromstring(FILTERS["fleet_junit"](FILTERS["fleet_report"](RESULTS)))
    assert [suite.get("name") for suite in root] == ["node1", "node2", "node3"]


@pytest.mark.parametrize("name, args, words", [
    ("fleet_report", (["node1"],), "fleet_report: results: a dict of hostname -> registered readiness result, got list"),
    ("fleet_report", ({"h1": "x"},), r"fleet_report: results\[h1\]: a registered readiness result \(dict\) or null, got str"),
    ("fleet_report", ({"h1": {"ready": True, "checks": [1]}},), r"results\[h1\]: checks\[0\] must be a check with a name"),
    ("fleet_report", ({}, "x"), "fleet_report: policy must be a dict"),
    ("fleet_report", ({}, None, [1]), "fleet_report: started must be a time as text"),
    ("fleet_gate", ({"summary": {"total": 1, "not_ready": 0, "unreachable": 0}}, "a few"), "preflight_max_not_ready: 'a few'"),
    ("fleet_gate", ({"summary": {"total": "x", "not_ready": 1, "unreachable": 0}}, 1), "fleet_gate: report: needs summary"),
    ("fleet_gate", ({"summary": {"total": 1, "not_ready": 0, "unreachable": 0}},), "fleet_gate: max_not_ready is required"),
    ("fleet_table", ("x",), "fleet_table: report: the dict fleet_report returns, got str"),
    ("fleet_markdown", ({},), "fleet_markdown: report: needs summary"),
    ("fleet_junit", ({"summary": {"total": 1, "not_ready": 0, "unreachable": 0}, "hosts": {"h1": "x"}},),
     r"fleet_junit: report: hosts\[h1\]: a host entry with a status"),
])
def test_bad_input_names_the_filter_or_option(name, args, words):
    with pytest.raises(AnsibleFilterError, match=words):
        FILTERS[name](*args)
