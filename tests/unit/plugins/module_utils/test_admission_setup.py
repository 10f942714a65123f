# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""guarded_build's admission option (plugins/module_utils/_build/_admission_setup.py, issue 29 item 4); a real CMake
project built under it: tests/build/test_admission.py."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shlex
import subprocess
import sys

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._build._admission_setup import with_admission
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._build_engine import BuildError


def test_the_launcher_goes_before_every_compile_and_runs_from_the_build_dir(tmp_path):
    env = {"CMAKE_ARGS": "-DFOO=1"}
    chain = with_admission(env, {"default_bytes": "1GiB", "seed_peaks": ["/x/peaks.json"]}, str(tmp_path), "/src")
    folder = tmp_path / "gpufleet-admission"
    config = json.loads((folder / "config.json").read_text())
    assert config["default_bytes"] == 1024 ** 3 and config["root"] == "/src" and config["state_dir"] == str(folder)
    assert env["CMAKE_C_COMPILER_LAUNCHER"] == ";".join(chain) == env["CMAKE_CUDA_COMPILER_LAUNCHER"]
    words = shlex.split(env["CMAKE_ARGS"])
    assert words[0] == "-DFOO=1" and "-DCMAKE_CXX_COMPILER_LAUNCHER=" + ";".join(chain) in words
    # the written launcher (and the policy it imports from beside it) runs: a version query passes straight through
    out = subprocess.check_output([sys.executable, chain[1], chain[2], "--", sys.executable, "--version"],
                                  universal_newlines=True, stderr=subprocess.STDOUT)
    assert out.startswith("Python")


@pytest.mark.parametrize("settings, named", [({"margn": 2}, "admission: unknown admission setting(s) margn"),
                                             ({"budget_bytes": "64GB"}, "admission.budget_bytes: '64GB' is ambiguous")])
def test_bad_settings_are_refused_naming_them(tmp_path, settings, named):
    with pytest.raises(BuildError) as refused:
        with_admission({}, settings, str(tmp_path), "/src")
    assert named in str(refused.value)


def test_no_option_no_admission(tmp_path):
    env = {}
    assert with_admission(env, None, str(tmp_path), "/src") is None and env == {}


def test_torch_extension_wrappers_run_the_launcher_before_the_build_compilers(tmp_path):
    """Issue 29 item 4: CXX/PYTORCH_NVCC wrappers for torch.utils.cpp_extension, never set as CXX itself (CMake would
    take it as its compiler and admit twice); a wrapper never wraps itself."""
    env = {"CXX": "/opt/gcc/bin/g++", "CUDA_HOME": "/usr/local/cuda-13.0"}
    chain = with_admission(env, {}, str(tmp_path), "/src")
    assert env["CXX"] == "/opt/gcc/bin/g++" and "PYTORCH_NVCC" not in env
    for variable, compiler in (("GPUFLEET_ADMISSION_CXX", "/opt/gcc/bin/g++"), ("GPUFLEET_ADMISSION_NVCC", "/usr/local/cuda-13.0/bin/nvcc")):
        with open(env[variable]) as handle:
            text = handle.read()
        assert text.startswith("#!/bin/sh\n") and shlex.split(text.splitlines()[1]) == ["exec"] + chain + [compiler, "$@"]
    again = {"CXX": env["GPUFLEET_ADMISSION_CXX"], "PYTORCH_NVCC": "/x/nvcc"}
    with_admission(again, {}, str(tmp_path), "/src")
    assert shlex.split(open(again["GPUFLEET_ADMISSION_CXX"]).read().splitlines()[1])[-2:] == ["c++", "$@"]
    assert shlex.split(open(again["GPUFLEET_ADMISSION_NVCC"]).read().splitlines()[1])[-2:] == ["/x/nvcc", "$@"]
    # it runs: a version query passes through the launcher to the compiler
    plain = {}
    with_admission(plain, {}, str(tmp_path / "b"), "/src")
    version = subprocess.run([plain["GPUFLEET_ADMISSION_CXX"], "--version"], stdout=subprocess.PIPE, universal_newlines=True, check=False)
    assert version.returncode == 0 and version.stdout, version


def test_a_source_that_cannot_fit_alone_is_named_before_the_build(tmp_path):
    """Issue 29 item 7: guarded_build's admission refuses, before the first compile (and again after an OOM), a
    source that needs more than the budget alone - learned over it, or OOM-killed holding a peak that times the
    margin is over it - instead of compiling it until it is killed again."""
    from ansible_collections.gpufleet.preflight.plugins.module_utils._build._admission_setup import (
        admission_settings, refused_sources)
    gib = 1024 ** 3
    peaks = tmp_path / "peaks.json"
    peaks.write_text(json.dumps({"gemm.cu": {"peak_bytes": 11 * gib, "seconds": 80, "killed": True},
                                 "small.cu": {"peak_bytes": gib, "seconds": 5}}))
    config = admission_settings({"peaks_path": str(peaks), "reserve_bytes": 0}, str(tmp_path), "/src")
    assert refused_sources(config, 12 * gib) == (
        "admission: the budget of 12.0 GiB is below what these sources need alone: gemm.cu (more than 11.0 GiB: "
        "OOM-killed holding that); the smallest memory limit that builds them: 12.7 GiB; give the build more memory "
        "(memory_limit)")
    assert refused_sources(config, 13 * gib) is None and refused_sources(None, gib) is None


def test_the_role_copies_the_launcher_files_guarded_build_writes():
    """One list of the launcher's files (_admission_settings.LAUNCHER_FILES): the sgl_kernel role's copy loop names the
    same; a file added to the launcher and not to the role fails here, not on a node (ImportError beside the build)."""
    import yaml
    from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _admission_setup as setup
    from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _admission_settings as rule
    role = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "roles", "sgl_kernel", "tasks", "admission.yml")
    with open(role) as handle:
        tasks = yaml.safe_load(handle)
    loop = next(task["loop"] for task in tasks if "ansible.builtin.copy" in task and "loop" in task)
    assert sorted((item["src"], item["dest"]) for item in loop) == sorted(rule.LAUNCHER_FILES)
    assert sorted(setup.MODULES) == sorted(source for source, _name in rule.LAUNCHER_FILES)
