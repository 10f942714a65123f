# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sgl_kernel role builds through the compiler cache by default (issue 22): a real wheel build of the sgl-kernel
look-alike, then a forced build in a fresh build directory - every compile from the cache, and the build report says
so (build.json, build.md)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil

import pytest

from conftest import role_vars, run_local

pytestmark = pytest.mark.skipif(not (shutil.which("nvcc") and shutil.which("ccache")), reason="nvcc and ccache are needed")


def cache_entry(reports):
    with open(os.path.join(reports, "build.json")) as handle:
        return json.load(handle)["nodes"]["localhost"]["compiler_cache"]


def test_role_builds_through_ccache_by_default(tmp_path, build_venv):  # noqa: F811 pylint: disable=redefined-outer-name
    venv = os.path.dirname(os.path.dirname(build_venv))
    reports = str(tmp_path / "reports")
    # the default directory is /var/cache/gpufleet/ccache; the test keeps its cache in its own directory
    variables = role_vars(tmp_path, venv, sgl_kernel_compiler_cache_dir=str(tmp_path / "ccache"),
                          sgl_kernel_report_dir=reports)
    rc, out = run_local(variables)
    assert rc == 0, out[-5000:]
    first = cache_entry(reports)
    assert first["kind"] == "ccache" and first["hits"] == 0 and first["misses"] >= 3, first
    variables.update(sgl_kernel_build_dir="build-fresh", sgl_kernel_force=True)
    rc, out = run_local(variables)
    assert rc == 0, out[-5000:]
    second = cache_entry(reports)
    assert second["hits"] == second["compiles"] == first["misses"] and second["hit_rate"] == 1.0, second
    assert second["size_bytes"] > 0
    with open(os.path.join(reports, "build.md")) as handle:
        assert "Compiler cache: ccache: %d of %d compiles from the cache (100%%)" % (
            second["hits"], second["compiles"]) in handle.read()
