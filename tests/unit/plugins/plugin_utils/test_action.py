# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""plugin_utils/_action.py: the action plugins' one base (ActionBase.run once, then act)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.preflight.plugins.action import fleet_reports, health_check_bundle, readiness
from ansible_collections.gpufleet.preflight.plugins.plugin_utils._action import ControllerAction


class Echo(ControllerAction):
    def act(self, result, task_vars):
        result.update(seen=task_vars)
        return result


def test_run_hands_act_the_base_result_and_the_variables(monkeypatch):
    monkeypatch.setattr(ActionBase, "run", lambda self, tmp=None, task_vars=None: {"base": True})
    action = object.__new__(Echo)
    assert action.run(task_vars={"x": 1}) == {"base": True, "seen": {"x": 1}}
    assert action.run() == {"base": True, "seen": None}


def test_an_action_without_act_says_so(monkeypatch):
    monkeypatch.setattr(ActionBase, "run", lambda self, tmp=None, task_vars=None: {})
    with pytest.raises(NotImplementedError) as err:
        object.__new__(ControllerAction).run()
    assert "must define act" in str(err.value)


@pytest.mark.parametrize("module, connection", [(fleet_reports, False), (health_check_bundle, False), (readiness, True)])
def test_the_collections_actions_use_it(module, connection):
    assert issubclass(module.ActionModule, ControllerAction)
    assert module.ActionModule.TRANSFERS_FILES is False and module.ActionModule._requires_connection is connection
