# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""plugins/action/readiness.py: what a failed gathering says (issue 12 item 12)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.preflight.plugins.action.readiness import (
    ARGUMENT_SPEC, named_as_given, node_failure_message, options_from_variables, validated_options)


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
    ("wait: must be 0 or more, got -1", "wait: must be 0 or more, got -1"),       # set in the task itself: kept
])
def test_a_refusal_names_the_variable_the_option_came_from(message, named):
    taken = ["kernel_events_window", "custom_checks", "min_available_memory"]
    assert named_as_given(message, "preflight_", taken) == named


def test_options_left_out_come_from_the_prefixed_variables_templated():
    task_vars = {"preflight_min_available_memory": "{{ memory }}", "preflight_wait": 5, "preflight_nvcc_arch": None,
                 "preflight_report_dir": "/r", "min_free_disk": "1GiB"}

    def template(value):   # what the action's templar does to a "{{ memory }}" variable
        return "64GiB" if value == "{{ memory }}" else value
    args, taken = options_from_variables({"wait": 0, "variable_prefix": "preflight_"}, task_vars, "preflight_", template)
    assert args == {"wait": 0, "variable_prefix": "preflight_", "min_available_memory": "64GiB"}   # the task's wait wins
    assert taken == ["min_available_memory"]   # null: unset; report_dir: not an option; min_free_disk: no prefix


def test_a_variable_set_to_omit_leaves_the_option_unset():
    from ansible.errors import AnsibleValueOmittedError

    def template(value):
        if value == "{{ omit }}":
            raise AnsibleValueOmittedError()
        return value
    args, taken = options_from_variables({}, {"preflight_min_driver_version": "{{ omit }}", "preflight_wait": 3},
                                         "preflight_", template)
    assert args == {"wait": 3} and taken == ["wait"]
    # ansible-core before 2.19 templates it to the placeholder in the task vars' omit
    args, taken = options_from_variables({}, {"preflight_min_driver_version": "__omit_place_holder__x", "preflight_wait": 3,
                                              "omit": "__omit_place_holder__x"}, "preflight_", lambda value: value)
    assert args == {"wait": 3} and taken == ["wait"]


def test_each_refusal_names_what_the_user_set_in_one_line():
    _options, errors = validated_options({"max_build_processes": "abc", "profiles": ["nosuch"], "wait": "x"},
                                         "preflight_", ["max_build_processes", "profiles"])
    assert len(errors) == 3, errors
    assert any("'preflight_max_build_processes'" in error for error in errors), errors
    assert any("preflight_profiles" in error and "nosuch" in error for error in errors), errors
    assert any("'wait'" in error for error in errors), errors   # the task's own option keeps its name


def test_valid_options_come_back_under_their_own_names_with_defaults():
    options, errors = validated_options({"max_build_processes": "2", "ready_group": "ready"}, "preflight_",
                                        ["max_build_processes"])
    assert errors == []
    assert options["max_build_processes"] == 2 and options["ready_group"] == "ready"   # converted, not renamed
    assert options["nvcc_arch"] == "sm_120a" and options["variable_prefix"] is None   # defaults filled in
    assert not [name for name in options if name.startswith("preflight_")]


def test_unknown_prefixed_variables_are_named_with_the_nearest_option():
    from ansible_collections.gpufleet.preflight.plugins.action.readiness import unknown_variables
    from ansible_collections.gpufleet.preflight.plugins.action.readiness import unknown_variables_message
    task_vars = {"preflight_min_avaliable_memory": "1GiB", "preflight_min_available_memory": "2GiB",
                 "preflight_result": {}, "preflight_hosts": "all", "preflight_report_dir": "/r", "preflight_qqq": 1,
                 "other_min_avaliable_memory": 1, "hostvars": {}}
    strays = unknown_variables(task_vars, "preflight_")
    assert strays == [("preflight_min_avaliable_memory", "preflight_min_available_memory"), ("preflight_qqq", None)]
    text = unknown_variables_message(strays, "preflight_")
    assert text.startswith("preflight_min_avaliable_memory (did you mean preflight_min_available_memory?), "
                           "preflight_qqq are no preflight_* options: ignored")
    assert "preflight_unknown_variables=fail" in text
    assert "correct or remove it" in unknown_variables_message(strays[:1], "preflight_", fail=True)
    assert unknown_variables({"preflight_wait": 1}, "preflight_") == []
