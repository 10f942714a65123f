# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""CUDA libraries found in a toolkit tree, in torch's nvidia pip packages, or missing (fixture trees)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._facts._cuda_libraries import (
    collect_cuda_libraries,
    cuda_versions_match,
)

FULL_TOOLKIT = ["cuda/bin/nvcc", "cuda/include/nvrtc.h", "cuda/include/cublas_v2.h", "cuda/include/cublasLt.h",
                "cuda/lib64/libnvrtc.so", "cuda/lib64/libcublas.so", "cuda/lib64/libcublasLt.so",
                "cuda/lib64/stubs/libcuda.so"]
BARE_TOOLKIT = ["cuda/bin/nvcc", "cuda/include/cuda_runtime.h", "cuda/lib64/libcudart.so"]
TORCH_CU13 = ["venv/bin/python", "venv/lib/python3.11/site-packages/nvidia/cu13/include/nvrtc.h",
              "venv/lib/python3.11/site-packages/nvidia/cu13/include/cublas_v2.h",
              "venv/lib/python3.11/site-packages/nvidia/cu13/include/cublasLt.h",
              "venv/lib/python3.11/site-packages/nvidia/cu13/lib/libnvrtc.so.13",
              "venv/lib/python3.11/site-packages/nvidia/cu13/lib/libcublas.so.13",
              "venv/lib/python3.11/site-packages/nvidia/cu13/lib/libcublasLt.so.13"]
TORCH_CU12_OLD_LAYOUT = ["venv/bin/python", "venv/lib/python3.10/site-packages/nvidia/cuda_nvrtc/include/nvrtc.h",
                         "venv/lib/python3.10/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12"]
DRIVER = ["usr/lib/x86_64-linux-gnu/libcuda.so.1"]


@pytest.mark.parametrize("files, missing, sources", [
    (FULL_TOOLKIT, [], {"nvrtc": "toolkit", "cublas": "toolkit", "cublasLt": "toolkit", "driver": "stub"}),
    (BARE_TOOLKIT, ["nvrtc", "cublas", "cublasLt", "driver"], {}),
    (BARE_TOOLKIT + TORCH_CU13, ["driver"], {"nvrtc": "torch", "cublas": "torch", "cublasLt": "torch"}),
    (BARE_TOOLKIT + TORCH_CU13 + DRIVER, [], {"nvrtc": "torch", "driver": "driver"}),
    (BARE_TOOLKIT + TORCH_CU12_OLD_LAYOUT, ["cublas", "cublasLt", "driver"], {"nvrtc": "torch"}),
], ids=["full-toolkit", "bare-toolkit", "torch-cu13", "torch-and-driver", "torch-cu12-layout"])
def test_collect_cuda_libraries(tmp_path, files, missing, sources):
    for rel in files:
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    python = str(tmp_path / "venv" / "bin" / "python") if any(f.startswith("venv/") for f in files) else None
    found = collect_cuda_libraries(str(tmp_path / "cuda" / "bin" / "nvcc"), python, root=str(tmp_path))
    assert found["missing"] == missing
    for name, source in sources.items():
        assert found[name]["source"] == source, found[name]
    if "nvrtc" in sources and sources["nvrtc"] == "torch":
        # only a versioned libnvrtc.so.13: CMake's find_library does not take it, the path must be given
        assert not found["nvrtc"]["linkable"] and found["nvrtc"]["library"].endswith((".so.13", ".so.12"))


@pytest.mark.parametrize("torch_cuda, nvcc_cuda, expected", [
    ("13.0", "13.0", True), ("12.8", "13.0", False), ("13.0", "13.1", True), (None, "13.0", None), ("12.8", None, None),
])
def test_cuda_versions_match(torch_cuda, nvcc_cuda, expected):
    assert cuda_versions_match(torch_cuda, nvcc_cuda) == expected


LINK_STUB = ["venv/lib/gpufleet-cuda-stub/libcuda.so"]


def _tree(tmp_path, files):
    for rel in files:
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    python = str(tmp_path / "venv" / "bin" / "python") if any(f.startswith("venv/") for f in files) else None
    return collect_cuda_libraries(str(tmp_path / "cuda" / "bin" / "nvcc"), python, root=str(tmp_path))


def test_cmake_args_for_torch_libraries_and_link_stub(tmp_path):
    """What the toolchain check accepts (torch's nvidia/cu13, build_deps' link stub) is what CMake gets (issue 17)."""
    found = _tree(tmp_path, BARE_TOOLKIT + TORCH_CU13 + LINK_STUB)
    assert found["missing"] == [] and found["driver"]["source"] == "link-stub"
    lib = str(tmp_path / "venv/lib/python3.11/site-packages/nvidia/cu13/lib")
    include = str(tmp_path / "venv/lib/python3.11/site-packages/nvidia/cu13/include")
    assert found["cmake_args"] == [
        "-DCUDA_nvrtc_LIBRARY=%s/libnvrtc.so.13" % lib, "-DCUDA_NVRTC_LIB=%s/libnvrtc.so.13" % lib,
        "-DCUDA_cublas_LIBRARY=%s/libcublas.so.13" % lib, "-DCUDA_cublasLt_LIBRARY=%s/libcublasLt.so.13" % lib,
        "-DCMAKE_CUDA_FLAGS=-I" + include, "-DCMAKE_CXX_FLAGS=-I" + include,
        "-DCUDA_cuda_driver_LIBRARY=" + str(tmp_path / "venv/lib/gpufleet-cuda-stub/libcuda.so")]


@pytest.mark.parametrize("files, expected", [
    # everything where CMake looks by itself: nothing to pass
    (FULL_TOOLKIT[:-1] + ["usr/lib/x86_64-linux-gnu/libcuda.so"], []),
    # the toolkit's stub is outside CMake's search: named
    (FULL_TOOLKIT, ["-DCUDA_cuda_driver_LIBRARY={root}/cuda/lib64/stubs/libcuda.so"]),
    # the driver's libcuda.so.1 alone: find_library does not take it
    (FULL_TOOLKIT[:-1] + DRIVER, ["-DCUDA_cuda_driver_LIBRARY={root}/usr/lib/x86_64-linux-gnu/libcuda.so.1"]),
    (BARE_TOOLKIT, []),
], ids=["all-found-by-cmake", "toolkit-stub", "driver-so1-only", "nothing-found"])
def test_cmake_args_only_what_cmake_does_not_find(tmp_path, files, expected):
    assert _tree(tmp_path, files)["cmake_args"] == [arg.format(root=str(tmp_path)) for arg in expected]


@pytest.mark.parametrize("files, expected", [
    # torch's pip packages and build_deps' link stub: every name sgl-kernel links by (-lcublas ...) needs a link
    (BARE_TOOLKIT + TORCH_CU13 + LINK_STUB, {
        "libnvrtc.so": "venv/lib/python3.11/site-packages/nvidia/cu13/lib/libnvrtc.so.13",
        "libcublas.so": "venv/lib/python3.11/site-packages/nvidia/cu13/lib/libcublas.so.13",
        "libcublasLt.so": "venv/lib/python3.11/site-packages/nvidia/cu13/lib/libcublasLt.so.13",
        "libcuda.so": "venv/lib/gpufleet-cuda-stub/libcuda.so"}),
    # where the linker finds them itself: none
    (FULL_TOOLKIT[:-1] + ["usr/lib/x86_64-linux-gnu/libcuda.so"], {}),
    (FULL_TOOLKIT, {"libcuda.so": "cuda/lib64/stubs/libcuda.so"}),
    (FULL_TOOLKIT[:-1] + DRIVER, {"libcuda.so": "usr/lib/x86_64-linux-gnu/libcuda.so.1"}),
    (BARE_TOOLKIT, {}),
], ids=["torch-pip-and-link-stub", "all-found", "toolkit-stub", "driver-so1-only", "nothing-found"])
def test_link_names_the_linker_would_not_find(tmp_path, files, expected):
    found = _tree(tmp_path, files)
    assert found["link_names"] == dict((name, str(tmp_path / path)) for name, path in expected.items())
