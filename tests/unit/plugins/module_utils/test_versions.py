# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _toolchain
from ansible_collections.gpufleet.preflight.plugins.module_utils._versions import split_arch, supports, version_at_least, version_tuple


@pytest.mark.parametrize("version, minimum, expected", [
    ("3.10", "3.9", True), ("3.9", "3.10", False), ("12.8", "12.8.0", True), ("cmake version 4.0.1", "4.0", True),
    (None, "1.0", None), ("abc", "1.0", None),
])
def test_versions_compare_as_numbers(version, minimum, expected):
    assert version_at_least(version, minimum) is expected


def test_version_tuple_and_arch():
    assert version_tuple("release 13.0, V13.0.48") == (13, 0)
    assert split_arch("sm_120a") == ("sm", 120, "a") and split_arch("12.0") == (None, 120, "")
    with pytest.raises(ValueError, match="not a GPU architecture"):
        split_arch("sm120")
    nvcc = {"present": True, "cuda_version": "12.8", "gpu_codes": ["sm_90", "sm_120"], "gpu_archs": ["compute_120"]}
    assert supports(nvcc, "sm_120a")[0] and not supports(nvcc, "sm_100f")[0]


def test_the_collector_uses_the_same_functions():
    # one rule: the comparisons live in _versions only; the collector keeps no copies (nor re-exports)
    assert not any(hasattr(_toolchain, name) for name in ("version_at_least", "supports", "split_arch"))
