# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Records every task result of a sweep run as one JSON line in $SWEEP_RECORD (test-only callback)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: sweep_record
type: aggregate
short_description: Write each task result of the bad-input sweep as a JSON line
description:
  - Test-only. Appends one JSON object per task result (task name, status, the result) to the file named by the
    environment variable C(SWEEP_RECORD).
requirements:
  - enabled through C(ANSIBLE_CALLBACKS_ENABLED=sweep_record)
"""

import json
import math
import os
import time

from ansible.plugins.callback import CallbackBase


def _plain(value, depth=0):
    """JSON-safe copy: tagged Ansible types become plain ones, anything else its str()."""
    if depth > 30:
        return "<too deep>"
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return repr(float(value)) if math.isnan(value) or math.isinf(value) else float(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, dict):
        return dict((str(k), _plain(v, depth + 1)) for k, v in value.items())
    if isinstance(value, (list, tuple, set)):
        return [_plain(v, depth + 1) for v in value]
    return str(value)


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "sweep_record"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self._path = os.environ.get("SWEEP_RECORD")
        self._started = {}
        self._play = None

    def _write(self, status, result):
        if not self._path:
            return
        task = result._task
        data = result._result
        if not isinstance(data, dict):
            data = {"raw": data}
        record = {
            "task": task.get_name(),
            "play": self._play,
            "status": status,
            "ended": time.time(),
            "started": self._started.get(task._uuid),
            "result": _plain(data),
        }
        exc = getattr(result, "exception", None)
        if exc is not None:
            record["exception_obj"] = str(exc)
        with open(self._path, "a") as handle:
            handle.write(json.dumps(record) + "\n")

    def v2_playbook_on_play_start(self, play):
        self._play = play.get_name()

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._started[task._uuid] = time.time()

    def v2_runner_on_ok(self, result, **kwargs):
        self._write("ok", result)

    def v2_runner_on_failed(self, result, ignore_errors=False, **kwargs):
        self._write("failed", result)

    def v2_runner_on_skipped(self, result, **kwargs):
        self._write("skipped", result)

    def v2_runner_on_unreachable(self, result, **kwargs):
        self._write("unreachable", result)
