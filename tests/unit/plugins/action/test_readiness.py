# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""plugins/action/readiness.py: what a failed gathering says (issue 12 item 12)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.preflight.plugins.action.readiness import (
    ARGUMENT_SPEC, PREFLIGHT_ROLE, as_role_variables, in_preflight_role, node_failure_message, role_variable_errors)


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


@pytest.mark.parametrize("message, named", [
    ("kernel_events_window: must be 1 to 31622400 seconds, got -5",
     "preflight_kernel_events_window: must be 1 to 31622400 seconds, got -5"),
    ("custom_checks[0]: needs a name and a query", "preflight_custom_checks[0]: needs a name and a query"),
    ("min_available_memory: '64GB' is not a size", "preflight_min_available_memory: '64GB' is not a size"),
    ("the JMESPath query does not parse", "the JMESPath query does not parse"),   # no option first: kept
    ("nosuch: must be a number", "nosuch: must be a number"),
])
def test_a_refusal_in_the_role_names_the_role_variable(message, named):
    assert as_role_variables(message) == named


def test_the_role_variables_are_checked_under_their_own_names():
    errors = role_variable_errors({"max_build_processes": "abc", "profiles": ["nosuch"], "wait": 5})
    assert len(errors) == 2, errors
    assert any("'preflight_max_build_processes'" in error for error in errors), errors
    assert any("preflight_profiles" in error and "nosuch" in error for error in errors), errors
    assert role_variable_errors({"max_build_processes": 2, "profiles": ["gpu"]}) == []


class _Role:
    def __init__(self, path):
        self._role_path = path


class _Task:
    def __init__(self, role):
        self._role = role


def test_only_the_preflight_roles_own_task_speaks_in_role_variables(tmp_path):
    assert in_preflight_role(_Task(_Role(PREFLIGHT_ROLE)))
    assert not in_preflight_role(_Task(None))                         # a playbook's own readiness task
    assert not in_preflight_role(_Task(_Role(str(tmp_path / "preflight"))))   # somebody else's role of that name
