# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prototype of the fix bench/fleet_preflight.py measures: write the fleet reports on the controller, in-process.

playbooks/preflight.yml writes its three reports with ansible.builtin.file + ansible.builtin.copy (a loop of
three), delegated to localhost: seven module runs (copy is stat + copy), each a fork, an AnsiballZ payload and a
Python start, on the controller that is also driving the fleet.  This action plugin runs no module at all.
Candidate for plugins/action/ (named e.g. gpufleet.preflight.fleet_report_files); the benchmark loads it from a
playbook-adjacent action_plugins/ directory.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import tempfile

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("dir", "files", "mode"))

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        directory = self._task.args.get("dir")
        files = self._task.args.get("files")
        if not directory or not isinstance(files, dict):
            raise AnsibleActionFail("dir (a path) and files (a dict name -> content) are required")
        try:
            mode = int(str(self._task.args.get("mode", "0644")), 8)
        except ValueError:
            raise AnsibleActionFail("mode: expected an octal string like 0644, got %r" % self._task.args.get("mode"))
        if self._play_context.check_mode:
            result.update(changed=False, skipped=True, msg="check mode: reports not written")
            return result
        written = []
        try:
            if not os.path.isdir(directory):
                os.makedirs(directory, 0o755)
            for name, content in sorted(files.items()):
                path = os.path.join(directory, name)
                # A reader never sees half a report: write aside, then rename over.
                fd, tmp_path = tempfile.mkstemp(dir=directory, prefix="." + name + ".")
                with os.fdopen(fd, "w") as handle:
                    handle.write(content)
                os.chmod(tmp_path, mode)
                os.rename(tmp_path, path)
                written.append(path)
        except (IOError, OSError) as exc:
            raise AnsibleActionFail("cannot write the reports in %s: %s" % (directory, exc))
        result.update(changed=False, files=written)
        return result
