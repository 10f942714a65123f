# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The roles' size rule is the modules' (_human.parse_size_option): what one accepts the other does (issue 21)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.preflight.plugins.filter.size_bytes import FilterModule, size_bytes
from ansible_collections.gpufleet.preflight.plugins.module_utils._human import parse_size_option
from ansible_collections.gpufleet.preflight.plugins.test import valid_size as valid_size_plugin

valid_size = valid_size_plugin.valid_size

# The forms the old role regex and Python disagreed on, and the usual ones.
VALUES = ["5GiB", "5G", "5g", "5Gi", "5 GiB", ".5GiB", "64GB", "512MiB", 1048576, 0, "0", "", "abc", -1, True, None,
          float("nan"), float("inf"), [1], "1e99GiB"]


def python_rule(value):
    try:
        return parse_size_option("x", value)
    except ValueError:
        return None


@pytest.mark.parametrize("value", VALUES)
def test_the_test_and_the_filter_follow_the_python_rule(value):
    expected = python_rule(value)
    assert valid_size(value) is (expected is not None)
    assert valid_size(value, positive=True) is bool(expected)
    if expected is None:
        with pytest.raises(AnsibleFilterError, match="^sgl_kernel_reserve: "):
            size_bytes(value, "sgl_kernel_reserve")
    else:
        assert size_bytes(value, "sgl_kernel_reserve") == expected


def test_the_forms_the_role_regex_got_wrong():
    assert not valid_size("5 GiB") and not valid_size(".5GiB") and not valid_size("5Gi")
    assert size_bytes("5g") == 5 * 1024 ** 3


def test_registered_names():
    assert FilterModule().filters() == {"size_bytes": size_bytes}
    assert valid_size_plugin.TestModule().tests() == {"valid_size": valid_size}
