# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""plugins/action/readiness.py: what a failed gathering says (issue 12 item 12)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.preflight.plugins.action.readiness import ARGUMENT_SPEC, node_failure_message


@pytest.mark.parametrize("gathered, words", [
    ({"failed": True, "msg": "kernel_events_window: must be greater than 0 seconds, got 0"},
     "node_facts on the node failed: kernel_events_window: must be greater than 0 seconds, got 0"),
    ({"failed": True, "msg": "MODULE FAILURE: See stdout/stderr for the exact error", "rc": 1,
      "module_stderr": "Traceback (most recent call last):\n  File x\nPermissionError: [Errno 13] Permission denied: '/proc/1/exe'\n"},
     "MODULE FAILURE: See stdout/stderr for the exact error; module_stderr: PermissionError: [Errno 13] Permission denied"),
    ({"failed": True, "rc": 137, "module_stdout": "Killed\n"}, "module_stdout: Killed; rc=137"),
    ({"failed": True}, "node_facts on the node failed: it returned no message"),
])
def test_the_nodes_own_message_surfaces(gathered, words):
    message = node_failure_message(gathered)
    assert words in message
    assert message != "node_facts failed"


def test_the_spec_comes_from_the_one_table():
    assert ARGUMENT_SPEC["nvcc_arch"] == {"type": "str", "default": "sm_120a"}
    assert ARGUMENT_SPEC["fatal_xids"]["elements"] == "int" and "require_numa" in ARGUMENT_SPEC


@pytest.mark.parametrize("args, found", [
    ({"oom_window_minutes": float("inf"), "wait": 1}, ("oom_window_minutes", float("inf"))),
    ({"expected_gpus": 8, "gpu_timeout": 10.0}, None),
])
def test_non_finite_numbers_are_found_before_int_conversion_overflows(args, found):
    from ansible_collections.gpufleet.preflight.plugins.action.readiness import non_finite_option
    assert non_finite_option(args) == found


def test_the_action_takes_the_tables_spec():
    from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _readiness_options
    assert ARGUMENT_SPEC == _readiness_options.argument_spec()
