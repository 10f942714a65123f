# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the report code accepts (``plugin_utils/_report_input``): a wrong shape is refused naming where it is."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.preflight.plugins.plugin_utils import _report_input


@pytest.mark.parametrize("result, named", [
    ({"ready": True, "ansible_facts": "x"}, "results[h1]: ansible_facts must be a dict of facts, got str"),
    ({"unreachable": True, "msg": 5}, "results[h1]: msg must be text, got int"),
    ({"ready": True, "ansible_facts": {"gpufleet_memory": "x"}}, "results[h1]: ansible_facts.gpufleet_memory must be a dict"),
    ({"ready": True, "ansible_facts": {"gpufleet_memory": {"effective": [1]}}}, "ansible_facts.gpufleet_memory.effective must be"),
    ({"ready": True, "ansible_facts": {"gpufleet_build_processes": {"processes": [1]}}}, "processes[0] must be a process"),
    ({"ready": True, "policy": "x"}, "results[h1]: policy must be a dict"),
])
def test_results_of_the_wrong_shape_are_refused_naming_the_host(result, named):
    with pytest.raises(ValueError) as err:
        _report_input.check_results({"h1": result})
    assert named in str(err.value)


@pytest.mark.parametrize("report, named", [
    ("x", "report: the dict fleet_report returns, got str"),
    ({"summary": {"total": 1, "not_ready": True, "unreachable": 0}}, "whole-number total, not_ready and unreachable"),
    ({"summary": {"total": 1, "not_ready": 0, "unreachable": 0}, "hosts": []}, "report: needs hosts"),
    ({"summary": {"total": 1, "not_ready": 0, "unreachable": 0}, "hosts": {"h1": {"status": "fine"}}},
     "report: hosts[h1]: a host entry with a status (ready, not_ready, unreachable)"),
    ({"summary": {"total": 1, "not_ready": 0, "unreachable": 0}, "hosts": {"h1": {"status": "ready", "checks": [{"name": "x"}]}}},
     "report: hosts[h1]: checks[0] must be a check with a name and a status"),
    ({"summary": {"total": 0, "not_ready": 0, "unreachable": 0}, "hosts": {}, "gate": "stop"}, "report: gate must be the dict"),
])
def test_a_report_of_the_wrong_shape_is_refused_naming_where(report, named):
    with pytest.raises(ValueError) as err:
        _report_input.check_report(report)
    assert named in str(err.value)


def test_a_summary_alone_is_enough_where_no_hosts_are_read():
    _report_input.check_report({"summary": {"total": 2, "not_ready": 1, "unreachable": 0}}, needs_hosts=False)
