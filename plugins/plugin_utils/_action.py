# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's action plugins' one base: ``ActionBase.run``'s bookkeeping once, then the plugin's ``act``.

fleet_reports, health_check_bundle and readiness subclass it (build_watch drives other hosts' connections and keeps
ActionBase). A plugin says whether it needs the host's connection (``_requires_connection``) and writes ``act``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.plugins.action import ActionBase


class ControllerAction(ActionBase):
    """An action that transfers no files; ``run`` hands ``act`` the base result and the task's variables."""

    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ControllerAction, self).run(tmp, task_vars)
        del tmp
        return self.act(result, task_vars)

    def act(self, result, task_vars):
        """The plugin's work: update and return ``result`` (ActionBase.run's dict)."""
        raise NotImplementedError("%s must define act(result, task_vars)" % type(self).__name__)
