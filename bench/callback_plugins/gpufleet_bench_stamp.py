# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark helper: time stamps of plays and tasks, one JSON line each, into $GPUFLEET_BENCH_STAMP_FILE.

ansible.posix's profile_tasks is not available offline; this is the few lines of it the benchmarks need.
Enabled only by the benchmarks (ANSIBLE_CALLBACK_PLUGINS=bench/callback_plugins, ANSIBLE_CALLBACKS_ENABLED).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: gpufleet_bench_stamp
type: aggregate
short_description: Time stamps of plays and tasks for the benchmarks
description: Writes one JSON line per play start, task start and the end of the run to C($GPUFLEET_BENCH_STAMP_FILE).
"""

import json
import os
import time

from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "gpufleet_bench_stamp"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self._path = os.environ.get("GPUFLEET_BENCH_STAMP_FILE")

    def _stamp(self, kind, name):
        if self._path:
            with open(self._path, "a") as handle:
                handle.write(json.dumps({"t": time.time(), "kind": kind, "name": name}) + "\n")

    def v2_playbook_on_start(self, playbook):
        self._stamp("start", getattr(playbook, "_file_name", ""))

    def v2_playbook_on_play_start(self, play):
        self._stamp("play", play.get_name())

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._stamp("task", task.get_name())

    def v2_playbook_on_stats(self, stats):
        self._stamp("end", "")
