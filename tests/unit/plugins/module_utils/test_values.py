# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_values: seconds that are finite and bounded, paths that are absolute (issue 12 items 12, 13, 17)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils import _values
from ansible_collections.gpufleet.preflight.plugins.module_utils._values import absolute_paths, program, relaxed_spec, seconds


@pytest.mark.parametrize("value, kwargs, expected", [
    (10, {}, 10.0),
    ("2.5", {}, 2.5),
    (0, {}, 0.0),
    (3600, {"maximum": 3600}, 3600.0),
])
def test_seconds_accepts(value, kwargs, expected):
    assert seconds(value, "grace", **kwargs) == expected


@pytest.mark.parametrize("value, kwargs, message", [
    (float("nan"), {}, "grace: nan is not a finite number of seconds"),
    ("nan", {}, "grace: nan is not a finite number of seconds"),
    (float("inf"), {}, "grace: inf is not a finite number of seconds"),
    ("-inf", {}, "grace: -inf is not a finite number of seconds"),
    (1e99, {"maximum": 3600}, "grace: 1e+99 seconds is more than the 3600 allowed"),
    (-1, {}, "grace: must be 0 or more seconds, got -1"),
    (0, {"zero": False}, "grace: must be greater than 0 seconds, got 0"),
    ("soon", {}, "grace: 'soon' is not a number of seconds"),
    (None, {}, "grace: None is not a number of seconds"),
])
def test_seconds_rejects_naming_the_option(value, kwargs, message):
    with pytest.raises(ValueError) as info:
        seconds(value, "grace", **kwargs)
    assert str(info.value) == message


def test_absolute_paths():
    assert absolute_paths(["/var/tmp", "~/cache"], "disk_paths") == ["/var/tmp", "~/cache"]
    assert absolute_paths([], "disk_paths") == []
    assert os.path.isabs(os.path.expanduser("~/cache"))


@pytest.mark.parametrize("paths, bad", [(["build"], "'build'"), (["/ok", "./rel"], "'./rel'"), ([""], "''"),
                                        (["/tmp\x00x"], "'/tmp\\x00x' holds a NUL byte")])
def test_absolute_paths_rejects_relative(paths, bad):
    with pytest.raises(ValueError) as info:
        absolute_paths(paths, "disk_paths")
    assert str(info.value).startswith("disk_paths: %s" % bad)


@pytest.mark.parametrize("value", [None, "/opt/venv/bin/python", "python3", "python3.11", "~/venv/bin/python"])
def test_program_accepts(value):
    assert program(value, "toolchain_python") == value


@pytest.mark.parametrize("value", ["", "   ", "['python']", "venv/bin/python", "py thon", "/x\x00y", 3])
def test_program_rejects(value):
    with pytest.raises(ValueError) as info:
        program(value, "toolchain_python")
    assert str(info.value).startswith("toolchain_python: %r is neither an absolute path nor a program name" % (value,))


def test_relaxed_spec_makes_numbers_raw_and_keeps_the_rest():
    spec = {"a": {"type": "int", "default": 1}, "b": {"type": "float"}, "c": {"type": "list", "elements": "str"}}
    assert relaxed_spec(spec) == {"a": {"type": "raw", "default": 1}, "b": {"type": "raw"},
                                  "c": {"type": "list", "elements": "str"}}
    assert spec["a"]["type"] == "int"


@pytest.mark.parametrize("value, expected", [
    (float("nan"), True), (float("inf"), True), (float("-inf"), True), (1e308, False), (0.5, False), (3, False),
    ("nan", False), (None, False), (True, False),
])
def test_non_finite_is_recognised_in_one_place(value, expected):
    assert _values.non_finite(value) is expected


def test_first_non_finite_names_the_first_option_by_name():
    name, value = _values.first_non_finite({"wait": float("inf"), "interval": float("nan"), "jobs": 2})
    assert name == "interval" and _values.non_finite(value)
    assert _values.first_non_finite({"wait": 1.0}) is None
