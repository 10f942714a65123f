# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the build watcher takes from a node (``plugin_utils/_build_view_input``): a status or a job result of the
wrong shape is named, never a crash; a huge one is bounded."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest

from ansible_collections.gpufleet.preflight.plugins.plugin_utils import _build_view_input as view_input


@pytest.mark.parametrize("raw, words", [
    ([1], "the status file holds a list, not a JSON object"),
    ("x", "holds a string"),
    (42, "holds a number"),
    (None, "holds null"),
    ({"state": "running", "progress": "x"}, "the status file's progress is a string, not an object"),
    ({"state": "running", "progress": {"done": "3", "total": 9}}, "progress.done is a string, not a number"),
    ({"state": "running", "timeline": {"a": 1}}, "the status file's timeline is an object, not a list"),
    ({"state": "running", "timeline": [[0, 1, 2]]}, "timeline[0] is not a [seconds, memory, jobs, attempt] sample"),
    ({"state": "running", "timeline": [[0, "1", 2, 1]]}, "timeline[0] is not"),
    ({"state": "running", "attempts": "x"}, "attempts is a string, not a list"),
    ({"state": "running", "attempts": [1]}, "attempts[0] is a number, not an object"),
    ({"state": "running", "attempts": [{"jobs": "2"}]}, "attempts[0].jobs is a string, not a number"),
    ({"state": "running", "attempts": [{"failed_steps": "FAILED: x"}]}, "attempts[0].failed_steps is not a list of strings"),
    ({"state": ["running"]}, "the status file's state is a list, not a string"),
    ({"state": "running", "memory_bytes": True}, "memory_bytes is a boolean, not a number"),
])
def test_a_status_of_the_wrong_shape_is_named_not_a_crash(raw, words):
    status, error = view_input.check_status(raw)
    assert status is None and words in error


def test_a_huge_timeline_is_bounded_and_keeps_its_peak():
    samples = [[float(i), (i * 7919) % 1000003, 4, 1 + i // 500000] for i in range(1000000)]
    samples[777777][1] = 5 * 1024 ** 3
    status, error = view_input.check_status({"state": "running", "timeline": samples, "message": "m" * 100000,
                                             "attempts": [{"jobs": 4, "failed_steps": ["s" * 10000] * 1000}] * 1000})
    assert error is None
    assert len(status["timeline"]) <= view_input.MAX_SAMPLES
    assert max(sample[1] for sample in status["timeline"]) == 5 * 1024 ** 3
    assert len(status["message"]) <= view_input.MAX_TEXT and len(status["attempts"]) <= view_input.MAX_ATTEMPTS
    assert len(status["attempts"][0]["failed_steps"]) <= view_input.MAX_FAILED_STEPS
    assert len(json.dumps(status)) < 200000
