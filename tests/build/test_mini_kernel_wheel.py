# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""guarded_build builds the sgl-kernel look-alike's wheel with the real nvcc for sm_120a, and it imports."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import json
import os
import shutil
import subprocess

import pytest

from conftest import PROJECTS, run_module


@pytest.mark.skipif(not shutil.which("nvcc"), reason="nvcc is needed")
def test_mini_kernel_wheel_builds_confined_and_imports(build_venv, tmp_path):
    source = str(tmp_path / "mini_sgl_kernel")
    shutil.copytree(os.path.join(PROJECTS, "mini_sgl_kernel"), source)
    args = {"argv": [build_venv, "-m", "pip", "wheel", ".", "--no-build-isolation", "--no-deps", "-v", "-w", "dist"],
            "chdir": source, "name": "mini", "jobs": 2, "nvcc_threads": 2, "memory_limit": "6GiB",
            "memory_per_thread": "1GiB", "artifacts": ["dist/*.whl"], "cuda_arch_list": "12.0a",
            "cmake_policy_version_minimum": "3.5"}
    result = run_module(args)
    assert not result.get("failed"), result["_output"][-3000:]
    print("mini kernel wheel: %.1fs, peak %s" % (result["duration"], result["peak_memory_human"]))
    (wheel,) = result["artifacts"]
    assert os.path.basename(wheel).startswith("mini_sgl_kernel-0.1.0-")
    assert result["attempts"][0]["progress"]["done"] == result["attempts"][0]["progress"]["total"] >= 4
    (ninja_file,) = glob.glob(os.path.join(source, "build", "*", "build.ninja"))
    with open(ninja_file) as handle:
        rules = handle.read()
    assert "-gencode=arch=compute_120a,code=sm_120a" in rules and "--threads=2" in rules

    target = str(tmp_path / "venv")
    subprocess.check_call(["python3", "-m", "venv", target])
    python = os.path.join(target, "bin", "python")
    subprocess.check_call([python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheel])
    info = json.loads(subprocess.check_output(
        [python, "-c", "import json, mini_sgl_kernel; print(json.dumps(mini_sgl_kernel.build_info()))"],
        cwd=str(tmp_path), universal_newlines=True))
    assert info["gencodes"] == "-gencode=arch=compute_120a,code=sm_120a"
    assert info["compile_threads"] == 2, "SGL_KERNEL_COMPILE_THREADS reached nvcc through CMAKE_ARGS"
    assert info["cuda_version"].split(".")[0] >= "12"

    again = run_module(args)
    assert again["changed"] is False and again["artifacts"] == [wheel]
