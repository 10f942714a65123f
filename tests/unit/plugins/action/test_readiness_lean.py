# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""lean_failure: what a failed verdict keeps at the default verbosity."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.preflight.plugins.action.readiness import lean_failure


def test_lean_failure_keeps_failed_checks_and_drops_facts_and_policy():
    full = dict(ready=False, failed=True, changed=False, msg="not ready: a: fix it", message="not ready: a: fix it",
                failed_checks=["a"], policy={"x": 1}, ansible_facts={"gpufleet_memory": {}}, subsets=["memory"],
                checks=[dict(name="a", status="failed", message="fix it", observed=1, expected=2, profile="common"),
                        dict(name="b", status="ok", message="", observed=1, expected=1, profile="common")])
    lean = lean_failure(full)
    assert lean["checks"] == [dict(name="a", status="failed", message="fix it")]
    assert "policy" not in lean and "ansible_facts" not in lean and lean["failed"] and lean["msg"] == full["msg"]
