# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""CUDA libraries a torch extension build links against -> ``gpufleet_toolchain.cuda_libraries``.

The CUDA toolkit may lack them, torch's pip packages (``nvidia/cu13``, or ``nvidia/<component>`` before CUDA 13)
may bring them, and the driver (libcuda) may be absent on a build node without GPUs - then the toolkit's stub
``lib64/stubs/libcuda.so`` serves for linking. Files are only looked for, never opened.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os

from ansible_collections.gpufleet.preflight.plugins.module_utils._paths import SYSTEM_LIB_DIRS

CUDA_LIBRARY_COMPONENTS = (
    # name, headers, library base name, old torch layout folder (nvidia/<folder>)
    ("nvrtc", ("nvrtc.h",), "libnvrtc.so", "cuda_nvrtc"),
    ("cublas", ("cublas_v2.h",), "libcublas.so", "cublas"),
    ("cublasLt", ("cublasLt.h",), "libcublasLt.so", "cublas"),
)


def cuda_toolkit_roots(nvcc_path=None, root="/"):
    """Candidate toolkit roots: the folder above nvcc's bin/ (symlinks resolved), then /usr/local/cuda."""
    roots = []
    if nvcc_path:
        roots.append(os.path.dirname(os.path.dirname(os.path.realpath(nvcc_path))))
    roots.append(os.path.realpath(os.path.join(root, "usr/local/cuda")))
    return [path for index, path in enumerate(roots) if path not in roots[:index] and os.path.isdir(path)]


def torch_nvidia_dirs(python_executable=None):
    """The nvidia/ package folders of the build venv's site-packages (torch's CUDA libraries)."""
    if not python_executable:
        return []
    prefix = os.path.dirname(os.path.dirname(python_executable))
    found = []
    for site in sorted(glob.glob(os.path.join(prefix, "lib", "python3*", "site-packages", "nvidia"))):
        found.append(site)
    return found


def _layout_dirs(toolkit_roots, nvidia_dirs, folder):
    """(source, include dirs, lib dirs) in the order they are searched."""
    layouts = []
    for tk in toolkit_roots:
        includes = [os.path.join(tk, "include")] + sorted(glob.glob(os.path.join(tk, "targets", "*", "include")))
        libs = [os.path.join(tk, "lib64"), os.path.join(tk, "lib")] + sorted(glob.glob(os.path.join(tk, "targets", "*", "lib")))
        layouts.append(("toolkit", includes, libs))
    for nvidia in nvidia_dirs:
        for sub in sorted(glob.glob(os.path.join(nvidia, "cu[0-9]*"))) + [os.path.join(nvidia, folder)]:
            layouts.append(("torch", [os.path.join(sub, "include")], [os.path.join(sub, "lib")]))
    return layouts


def _find_library(dirs, base):
    """The unversioned library (what CMake's find_library links) or a versioned one (needs an explicit path)."""
    versioned = None
    for directory in dirs:
        candidate = os.path.join(directory, base)
        if os.path.exists(candidate):
            return candidate, True
        if versioned is None:
            matches = sorted(glob.glob(candidate + ".*"))
            versioned = matches[0] if matches else None
    return versioned, False


def collect_cuda_libraries(nvcc_path=None, python_executable=None, root="/"):
    """``cuda_libraries``: for nvrtc, cublas, cublasLt ``{present, source, header, library, linkable}`` where source is
    toolkit or torch; ``driver``: libcuda from the driver or the toolkit's stub; ``missing``: names absent."""
    toolkits = cuda_toolkit_roots(nvcc_path, root)
    nvidia = torch_nvidia_dirs(python_executable)
    result = {"toolkit_roots": toolkits, "torch_nvidia_dirs": nvidia, "missing": []}
    for name, headers, base, folder in CUDA_LIBRARY_COMPONENTS:
        entry = {"present": False, "source": None, "header": None, "library": None, "linkable": False}
        for source, includes, libs in _layout_dirs(toolkits, nvidia, folder):
            header = next((os.path.join(d, h) for d in includes for h in headers if os.path.isfile(os.path.join(d, h))), None)
            library, linkable = _find_library(libs, base)
            if header and library:
                entry.update(present=True, source=source, header=header, library=library, linkable=linkable)
                break
        result[name] = entry
        if not entry["present"]:
            result["missing"].append(name)
    stubs = []
    for tk in toolkits:
        stubs += [os.path.join(tk, "lib64", "stubs", "libcuda.so")] + sorted(glob.glob(os.path.join(tk, "targets", "*", "lib", "stubs", "libcuda.so")))
    system = [os.path.join(root, d, n) for d in SYSTEM_LIB_DIRS for n in ("libcuda.so", "libcuda.so.1")]
    driver = next((path for path in system if os.path.exists(path)), None)
    stub = next((path for path in stubs if os.path.exists(path)), None)
    link_stub = link_stub_path(python_executable)
    link_stub = link_stub if link_stub and os.path.exists(link_stub) else None
    result["driver"] = {"present": bool(driver or stub or link_stub), "library": driver or stub or link_stub,
                        "source": "driver" if driver else ("stub" if stub else ("link-stub" if link_stub else None))}
    if not result["driver"]["present"]:
        result["missing"].append("driver")
    result["cmake_args"] = cmake_args(result)
    result["link_names"] = link_names(result)
    return result


# CMake cache variables that name each library (sgl-kernel's CMakeLists and CMake's FindCUDAToolkit read them)
CMAKE_LIBRARY_VARIABLES = (
    ("nvrtc", ("CUDA_nvrtc_LIBRARY", "CUDA_NVRTC_LIB")),
    ("cublas", ("CUDA_cublas_LIBRARY",)),
    ("cublasLt", ("CUDA_cublasLt_LIBRARY",)),
)
LINK_STUB_DIR = "gpufleet-cuda-stub"


def link_stub_path(python_executable):
    """Where build_deps makes a link-only libcuda.so on a node without driver and toolkit stub: inside the build
    venv (never on the system's library path, so nothing loads it at run time)."""
    if not python_executable:
        return None
    return os.path.join(os.path.dirname(os.path.dirname(python_executable)), "lib", LINK_STUB_DIR, "libcuda.so")


def cmake_args(found):
    """The CMake arguments a configure needs for what CMake's own search does not find: the libraries torch's pip
    packages bring (or a toolkit's versioned-only ones), their include folder in the CUDA and C++ flags, and a libcuda
    that is not the driver's unversioned one (the toolkit's stub, a link stub, the driver's libcuda.so.1 alone)."""
    args = []
    includes = []
    for name, variables in CMAKE_LIBRARY_VARIABLES:
        entry = found.get(name) or {}
        if not _found_elsewhere(entry):
            continue
        args += ["-D%s=%s" % (variable, entry["library"]) for variable in variables]
        include = os.path.dirname(entry["header"])
        if entry.get("source") == "torch" and include not in includes:
            includes.append(include)
    if includes:
        flags = " ".join("-I" + include for include in includes)
        args += ["-DCMAKE_CUDA_FLAGS=" + flags, "-DCMAKE_CXX_FLAGS=" + flags]
    driver = found.get("driver") or {}
    if _driver_elsewhere(driver):
        args.append("-DCUDA_cuda_driver_LIBRARY=" + driver["library"])
    return args


def _found_elsewhere(entry):
    """A library found where neither CMake's search nor the linker's looks (torch's pip packages), or versioned only."""
    return bool(entry.get("present")) and not (entry.get("source") == "toolkit" and entry.get("linkable"))


def _driver_elsewhere(driver):
    """A libcuda that is not the driver's unversioned one: the toolkit's stub, a link stub, libcuda.so.1 alone."""
    return bool(driver.get("present")) and not (driver.get("source") == "driver"
                                                and os.path.basename(driver["library"]) == "libcuda.so")


def link_names(found):
    """``{unversioned file name: library}`` for the libraries a link by name would not find - sgl-kernel links
    ``cuda cublas cublasLt nvrtc`` by name (``-lcublas``), and torch's pip packages bring only ``libcublas.so.13``.
    The sgl_kernel role links these names in a folder of the build directory and puts it on the build's
    ``LIBRARY_PATH`` (never on the system's library path: nothing loads them at run time)."""
    names = {}
    for name, dummy in CMAKE_LIBRARY_VARIABLES:
        entry = found.get(name) or {}
        if _found_elsewhere(entry):
            names["lib%s.so" % name] = entry["library"]
    driver = found.get("driver") or {}
    if _driver_elsewhere(driver):
        names["libcuda.so"] = driver["library"]
    return names


def cuda_versions_match(torch_cuda, nvcc_cuda):
    """torch's CUDA against nvcc's: None when either is unknown, else whether the majors match."""
    if not torch_cuda or not nvcc_cuda:
        return None
    return str(torch_cuda).split(".", 1)[0] == str(nvcc_cuda).split(".", 1)[0]
