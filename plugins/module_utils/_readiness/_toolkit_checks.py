# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build-profile checks over ``gpufleet_toolchain.cuda_libraries`` (issue 13): the CUDA libraries an sgl-kernel
build links - nvrtc, cuBLAS, cuBLASLt (from the CUDA toolkit or torch's nvidia/cu13 pip packages) and libcuda (a
driver or the toolkit's link stub) - and torch's CUDA major against nvcc's.

Same shape as every check (``module_utils/_readiness/_checks.py``): ``check(facts, policy)`` -> result / unknown / None.
Registered in ``_policy.CHECKS`` (profile build); cuda_libraries applies with ``require_cuda_libraries``.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness._checks import option, result, unknown

COMPONENTS = ("nvrtc", "cublas", "cublasLt", "driver")
# Where each comes from, in words that hold on every distribution: Debian has none of NVIDIA's repository
# packages (cuda-nvrtc-dev, libcublas-dev, cuda-driver-dev), so they are not named.
_WHAT = {
    "nvrtc": "nvrtc.h + libnvrtc (a CUDA build of torch in the venv brings it: nvidia/cu13; or NVIDIA's CUDA toolkit)",
    "cublas": "cublas_v2.h + libcublas (a CUDA build of torch in the venv brings it: nvidia/cu13; or NVIDIA's CUDA toolkit)",
    "cublasLt": "cublasLt.h + libcublasLt (a CUDA build of torch in the venv brings it: nvidia/cu13; or NVIDIA's CUDA toolkit)",
    "driver": "libcuda.so to link against: the NVIDIA driver, the toolkit's lib64/stubs, or on a GPU-less builder the "
              "link-only stub the build_deps role makes in the build venv",
}


def _libraries(facts, name, expected):
    toolchain = facts.get("toolchain")
    if not toolchain or "cuda_libraries" not in toolchain:
        return None, unknown(name, expected, "toolchain facts with cuda_libraries were not gathered", "build")
    return toolchain["cuda_libraries"], None


def _major(version):
    """``'13.0'`` -> ``'13'``."""
    return str(version).split(".", 1)[0]


def check_cuda_libraries(facts, policy):
    """Every library the build links is there (toolkit or torch's packages; driver or stub).

    Only with ``require_cuda_libraries``: a node that gates a real sgl-kernel build sets it.
    """
    name = "cuda_libraries"
    if not option(policy, "require_cuda_libraries"):
        return None
    expected = ", ".join(COMPONENTS)
    libraries, why = _libraries(facts, name, expected)
    if why:
        return why
    nvcc = (facts.get("toolchain") or {}).get("nvcc") or {}
    if not nvcc.get("present"):
        return None     # check_nvcc_arch already says nvcc is missing
    missing = [component for component in COMPONENTS if not (libraries.get(component) or {}).get("present")]
    found = ["%s (%s)" % (component, (libraries.get(component) or {}).get("source"))
             for component in COMPONENTS if component not in missing]
    if not missing:
        return result(name, True, ", ".join(found), expected, "", "build")
    message = "missing: " + "; ".join("%s - %s" % (component, _WHAT[component]) for component in missing)
    return result(name, False, ", ".join(found) or "none", expected, message, "build")


def check_torch_cuda_matches_nvcc(facts, policy):
    """torch's CUDA major equals nvcc's (a CUDA 12.8 torch cannot build with nvcc 13.0).

    Only for the interpreter the build uses (``toolchain_python``): the torch of whatever Python runs Ansible on
    the node says nothing about the build.
    """
    if not option(policy, "toolchain_python"):
        return None
    name = "torch_cuda_matches_nvcc"
    toolchain = facts.get("toolchain") or {}
    torch = toolchain.get("torch") or {}
    nvcc = toolchain.get("nvcc") or {}
    if not torch.get("present") or not nvcc.get("present"):
        return None
    expected = "CUDA %s (nvcc)" % nvcc.get("cuda_version")
    nvcc_major = _major(nvcc.get("cuda_version"))
    if not torch.get("cuda"):
        return result(name, False, "torch %s without CUDA" % torch.get("version"), expected,
                      "torch %s is a CPU build: install a +cu%sx build" % (torch.get("version"), nvcc_major), "build")
    ok = _major(torch["cuda"]) == nvcc_major
    return result(name, ok, "CUDA %s (torch %s)" % (torch["cuda"], torch.get("version")), expected,
                  "" if ok else "torch is built for CUDA %s but nvcc is CUDA %s: their majors must match" % (
                      torch["cuda"], nvcc.get("cuda_version")), "build")
