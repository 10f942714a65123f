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


# ---- valid_form: the roles' other written forms, the modules' rules (_versions.FORMS)

@pytest.mark.parametrize("form, value, expected", [
    ("version", "3.31", True), ("version", "570.86.15", True), ("version", "3..18", False), ("version", 3.31, False),
    ("version", "1.2.3.4.5", False), ("gpu_arch", "sm_120a", True), ("gpu_arch", "sm_12x", False),
    ("compute_capability", "12.0", True), ("compute_capability", "sm_120", False),
    ("cuda_arch_list", "12.0a", True), ("cuda_arch_list", "9.0 12.0+PTX", True), ("cuda_arch_list", "9.0;12.0a", True),
    ("cuda_arch_list", "sm_120", False), ("cuda_arch_list", "   ", False),
])
def test_valid_form_is_the_modules_rule(form, value, expected):
    from ansible_collections.gpufleet.preflight.plugins.test.valid_form import valid_form
    assert valid_form(value, form) is expected


def test_valid_form_names_an_unknown_form():
    from ansible_collections.gpufleet.preflight.plugins.test.valid_form import valid_form
    with pytest.raises(AnsibleFilterError, match="valid_form: form 'semver'"):
        valid_form("1.0", "semver")


def test_guarded_build_and_the_policy_use_the_same_forms():
    from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _build_options
    from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _policy
    from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _policy_validation
    from ansible_collections.gpufleet.preflight.plugins.module_utils import _versions
    assert _build_options._VERSION is _versions.FORMS["version"] is _policy_validation._FORMS["version"]
    assert _build_options._ARCHS is _versions.FORMS["cuda_arch_list"]


def test_build_paths_are_the_modules_own_names():
    from ansible_collections.gpufleet.preflight.plugins.filter.build_paths import build_paths
    from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _build_state
    paths = build_paths("/opt/src/sgl-kernel/build")
    assert paths == {"status": "/opt/src/sgl-kernel/build/" + _build_state.STATUS_NAME,
                     "stamp": "/opt/src/sgl-kernel/build/" + _build_state.STAMP_NAME,
                     "log": "/opt/src/sgl-kernel/build/" + _build_state.LOG_NAME}
    with pytest.raises(AnsibleFilterError, match="build_paths: the build directory must be an absolute path"):
        build_paths("build")


def test_no_role_spells_the_build_files():
    import os
    repo = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
    names = ("gpufleet-build.status.json", ".gpufleet-build.stamp", "gpufleet-build.log")
    found = []
    for top in ("roles", "playbooks"):
        for dirpath, _dirs, files in os.walk(os.path.join(repo, top)):
            for name in files:
                with open(os.path.join(dirpath, name)) as handle:
                    text = handle.read()
                found += ["%s: %s" % (os.path.join(dirpath, name), n) for n in names if n in text]
    assert not found, "use the gpufleet.preflight.build_paths filter: %s" % found
