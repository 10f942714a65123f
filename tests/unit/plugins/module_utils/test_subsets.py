# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_subsets: setup-style gather_subset resolution."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._facts._subsets import resolve_subsets

KNOWN = ("memory", "build_processes", "gpus")


@pytest.mark.parametrize("requested, expected", [
    (["all"], ["memory", "build_processes", "gpus"]),
    (None, ["memory", "build_processes", "gpus"]),
    (["memory"], ["memory"]),
    (["!gpus"], ["memory", "build_processes"]),
    (["all", "!memory"], ["build_processes", "gpus"]),
    (["gpus", "memory"], ["memory", "build_processes"][:1] + ["gpus"]),
    (["memory", "!memory"], []),
])
def test_resolve_subsets(requested, expected):
    assert resolve_subsets(requested, KNOWN) == expected


@pytest.mark.parametrize("requested, named", [
    (["memroy"], "memroy"),
    (["!bogus"], "bogus"),
    (["all", "disks"], "disks"),
])
def test_unknown_subset_is_named(requested, named):
    with pytest.raises(ValueError) as err:
        resolve_subsets(requested, KNOWN)
    assert named in str(err.value) and "choose from" in str(err.value)
