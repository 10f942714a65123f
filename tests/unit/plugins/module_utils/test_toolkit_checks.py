# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness._toolkit_checks import (
    check_cuda_libraries,
    check_torch_cuda_matches_nvcc,
)

NVCC = {"present": True, "cuda_version": "13.0"}
REQUIRED = {"require_cuda_libraries": True}


def libs(**present):
    out = {"missing": []}
    for name in ("nvrtc", "cublas", "cublasLt", "driver"):
        source = present.get(name)
        out[name] = {"present": source is not None, "source": source}
        if source is None:
            out["missing"].append(name)
    return out


@pytest.mark.parametrize("libraries, ok, words", [
    (libs(nvrtc="toolkit", cublas="toolkit", cublasLt="toolkit", driver="stub"), True, []),
    (libs(nvrtc="torch", cublas="torch", cublasLt="torch"), False, ["missing: driver - libcuda.so"]),
    (libs(), False, ["nvrtc - nvrtc.h", "cublas - cublas_v2.h", "cublasLt - cublasLt.h", "driver - libcuda.so"]),
])
def test_check_cuda_libraries(libraries, ok, words):
    check = check_cuda_libraries({"toolchain": {"nvcc": NVCC, "cuda_libraries": libraries}}, REQUIRED)
    assert check["ok"] is ok and check["profile"] == "build"
    for word in words:
        assert word in check["message"]


def test_check_cuda_libraries_unknown_and_not_applicable():
    assert check_cuda_libraries({}, REQUIRED)["status"] == "unknown"
    assert check_cuda_libraries({"toolchain": {"nvcc": {"present": False}, "cuda_libraries": libs()}}, REQUIRED) is None
    # Off unless asked for (preflight_require_cuda_libraries): most build nodes in tests link nothing from CUDA.
    assert check_cuda_libraries({"toolchain": {"nvcc": NVCC, "cuda_libraries": libs()}}, {}) is None


@pytest.mark.parametrize("torch, ok", [
    ({"present": True, "version": "2.11.0", "cuda": "13.0"}, True),
    ({"present": True, "version": "2.9.1", "cuda": "12.8"}, False),
    ({"present": True, "version": "2.9.1+cpu", "cuda": None}, False),
    ({"present": False}, None),
])
def test_check_torch_cuda_matches_nvcc(torch, ok):
    check = check_torch_cuda_matches_nvcc({"toolchain": {"nvcc": NVCC, "torch": torch}}, {"toolchain_python": "/venv/bin/python"})
    assert (check if ok is None else check["ok"]) == ok
    # Without toolchain_python the inspected torch is the one of the Python running Ansible: not the build's.
    assert check_torch_cuda_matches_nvcc({"toolchain": {"nvcc": NVCC, "torch": torch}}, {}) is None
