# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build toolchain of a CUDA node -> ``gpufleet_toolchain``.

Pure parsers of each tool's ``--version`` text first; ``collect_toolchain`` at the bottom runs the tools
(with a timeout each), imports torch and scikit-build-core in a subprocess of the build's Python, and
looks for numa.h / libnuma on disk.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import json
import os
import re
import sys

from ansible_collections.gpufleet.preflight.plugins.module_utils._facts._cuda_libraries import collect_cuda_libraries, cuda_versions_match
from ansible_collections.gpufleet.preflight.plugins.module_utils._paths import SYSTEM_LIB_DIRS
from ansible_collections.gpufleet.preflight.plugins.module_utils._run import find_executable, run_with_timeout, search_path, side_by_side
# The comparisons live in _versions (pure): the readiness checks use them without importing this collector.
from ansible_collections.gpufleet.preflight.plugins.module_utils._versions import VERSION_RE, version_tuple

_VERSION_RE = VERSION_RE
_NVCC_RE = re.compile(r"release ([0-9]+\.[0-9]+), V([0-9][0-9.]*)")
_ARCH_RE = re.compile(r"^(sm|compute|lto)_([0-9]+)([af]?)$")

# Where CUDA and compilers live when a non-login shell's PATH misses them.
EXTRA_TOOL_DIRS = ("/usr/local/cuda/bin", "/usr/local/bin", "/usr/bin", "/bin", "/opt/cuda/bin")
NUMA_HEADER_DIRS = ("usr/include", "usr/local/include")

# Runs inside the build's Python: import, never install; one JSON line after a marker, so warnings
# that torch prints on import do not break parsing.
PYTHON_PROBE = r"""
import json, os, re, sys
# Read versions from package metadata and torch/version.py instead of importing: `import torch` costs
# 1.5 s of CPU on every preflight of every node; the metadata answers in milliseconds. The dist-info beside
# the package is read directly: importing importlib.metadata alone costs 25-30 ms per node.
try:
    from importlib import util
except ImportError:
    util = None
def normalized(name):
    return re.sub(r"[-_.]+", "_", name).lower()
def installed_version(spec, distribution):
    # "Version:" of the one <name>-<version>.dist-info (or .egg-info) beside the package, else None.
    found = []
    locations = list(spec.submodule_search_locations or []) or [os.path.dirname(spec.origin or "")]
    for parent in set(os.path.dirname(location) for location in locations):
        try:
            names = os.listdir(parent)
        except (IOError, OSError):
            continue
        for name in names:
            stem, ext = os.path.splitext(name)
            if ext in (".dist-info", ".egg-info") and normalized(stem.split("-")[0]) == normalized(distribution):
                path = os.path.join(parent, name)
                found.append(os.path.join(path, "METADATA" if ext == ".dist-info" else "PKG-INFO") if os.path.isdir(path) else path)
    if len(found) != 1:
        return None
    try:
        with open(found[0]) as handle:
            for line in handle:
                if not line.strip():
                    break
                if line.startswith("Version:"):
                    return line.split(":", 1)[1].strip()
    except (IOError, OSError, UnicodeDecodeError):
        pass
    return None
def probe(module, distribution):
    spec = None
    try:
        spec = util.find_spec(module) if util else None
    except Exception as exc:
        return None, {"present": False, "version": None, "error": "%s: %s" % (type(exc).__name__, exc)}
    if spec is None:
        return None, {"present": False, "version": None, "error": None}
    version = installed_version(spec, distribution)
    if version is None:
        # Stale duplicates, an editable install, a zip: let importlib.metadata search sys.path its own way.
        try:
            from importlib import metadata
            version = metadata.version(distribution)
        except Exception:
            version = None
    return spec, {"present": True, "version": version, "error": None}
def torch_cuda(spec):
    for location in spec.submodule_search_locations or []:
        try:
            with open(os.path.join(location, "version.py")) as handle:
                match = re.search(r"^cuda\s*(?::[^=]*)?=\s*[\x22\x27]?([^\x22\x27\s]+)", handle.read(), re.M)
        except (IOError, OSError):
            continue
        if match:
            return None if match.group(1) == "None" else match.group(1)
    return None
spec, facts = probe("torch", "torch")
facts["cuda"] = torch_cuda(spec) if spec is not None else None
_spec, skbuild = probe("scikit_build_core", "scikit-build-core")
print("GPUFLEET_PROBE " + json.dumps({"version": "%d.%d.%d" % tuple(sys.version_info[:3]), "executable": sys.executable,
                                      "torch": facts, "scikit_build_core": skbuild}))
"""


def first_version(text, prefix=None):
    """The first ``N.N[.N]`` of the first line (starting with ``prefix`` when given) in a ``--version`` text."""
    for line in (text or "").splitlines():
        stripped = line.strip()
        if not stripped or (prefix and not stripped.lower().startswith(prefix.lower())):
            continue
        match = _VERSION_RE.search(stripped)
        if match:
            return match.group(1)
    return None


def parse_cmake_version(text):
    """``cmake version 4.2.1`` -> ``{version, major_minor, policy_version_minimum_needed}``.

    CMake >= 4.0 refuses projects declaring ``cmake_minimum_required`` < 3.5 unless
    ``CMAKE_POLICY_VERSION_MINIMUM`` is set (old sgl-kernel dependencies do).
    """
    version = first_version(text, "cmake version")
    parts = version_tuple(version)
    return {
        "version": version,
        "major_minor": "%d.%d" % parts[:2] if parts and len(parts) >= 2 else None,
        "policy_version_minimum_needed": bool(parts and parts[0] >= 4),
    }


def parse_gcc_version(text):
    """``gcc (Debian 12.2.0-14+deb12u1) 12.2.0`` -> ``'12.2.0'`` (the last version on the first line)."""
    for line in (text or "").splitlines():
        if line.strip():
            found = _VERSION_RE.findall(line)
            return found[-1] if found else None
    return None


def parse_nvcc_version(text):
    """``Cuda compilation tools, release 13.0, V13.0.88`` -> ``{version: '13.0.88', cuda_version: '13.0'}``."""
    match = _NVCC_RE.search(text or "")
    if not match:
        return {"version": None, "cuda_version": None}
    return {"version": match.group(2), "cuda_version": match.group(1)}


def parse_gpu_list(text):
    """``nvcc --list-gpu-arch`` / ``--list-gpu-code`` output (one ``compute_XX`` / ``sm_XX`` a line) -> list."""
    found = []
    for token in (text or "").split():
        if _ARCH_RE.match(token) and token not in found:
            found.append(token)
    return found


def parse_python_probe(text):
    """The JSON line the probe printed after its marker, or None."""
    for line in reversed((text or "").splitlines()):
        if line.startswith("GPUFLEET_PROBE "):
            try:
                return json.loads(line[len("GPUFLEET_PROBE "):])
            except ValueError:
                return None
    return None


def tool(present=False, path=None, version=None, error=None, **extra):
    """The shape every tool shares: ``{present, path, version, error}`` plus tool-specific keys."""
    entry = {"present": present, "path": path, "version": version, "error": error}
    entry.update(extra)
    return entry


def _short(text, limit=300):
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[:limit] + "..."


# ---- I/O below: runs the tools ---------------------------------------------------------------------------


def run_version(run, path, argv_tail, timeout):
    """Run ``path argv_tail``: ``(stdout, error)``; error says why there is no output to parse."""
    rc, out, err = run([path] + list(argv_tail), timeout)
    if rc is None:
        return None, "%s %s timed out after %ss" % (path, " ".join(argv_tail), timeout)
    if rc != 0:
        return None, "%s %s exited %s: %s" % (path, " ".join(argv_tail), rc, _short(err or out))
    return out + ("\n" + err if err and not out else ""), None


def probe_tool(run, name, argv_tail, parse, timeout, dirs, **defaults):
    """Find ``name``, run it with ``argv_tail`` and parse the text: a tool entry."""
    path = find_executable(name, dirs)
    if path is None:
        return tool(error="%s not found on PATH or in %s" % (name, ", ".join(EXTRA_TOOL_DIRS)), **defaults)
    text, error = run_version(run, path, argv_tail, timeout)
    if error:
        return tool(present=True, path=path, error=error, **defaults)
    parsed = parse(text)
    if not isinstance(parsed, dict):
        parsed = {"version": parsed}
    entry = tool(present=True, path=path, **defaults)
    entry.update(parsed)
    if entry.get("version") is None:
        entry["error"] = "could not read a version from: %s" % _short(text, 120)
    return entry


def collect_nvcc(run, timeout, dirs):
    """nvcc version plus ``--list-gpu-arch`` and ``--list-gpu-code``."""
    entry = probe_tool(run, "nvcc", ["--version"], parse_nvcc_version, timeout, dirs,
                       cuda_version=None, gpu_archs=[], gpu_codes=[])
    if entry["present"] and entry["error"] is None:
        for option, key in (("--list-gpu-arch", "gpu_archs"), ("--list-gpu-code", "gpu_codes")):
            text, error = run_version(run, entry["path"], [option], timeout)
            entry[key] = parse_gpu_list(text) if text else []
            if error and not entry["error"]:
                # nvcc before 11.0 had no --list-gpu-*: the lists stay empty, and say why.
                entry["error"] = error
    return entry


def probe_in_process():
    """Run the probe in this interpreter: no subprocess, the same code and output as for another one."""
    lines = []
    namespace = {"print": lines.append, "__name__": "gpufleet_probe"}
    exec(compile(PYTHON_PROBE, "<gpufleet python probe>", "exec"), namespace)  # pylint: disable=exec-used
    return 0, "\n".join(lines), ""


def collect_python(run, python, timeout, dirs):
    """The interpreter's version, and torch / scikit-build-core versions read from its package metadata.

    ``python`` None means the interpreter running the module (Ansible's ``ansible_python_interpreter``),
    probed in-process; any other interpreter (a build venv's) is probed in a subprocess of it.
    """
    missing = {"present": False, "version": None, "error": None}
    torch = dict(missing, cuda=None)
    skbuild = dict(missing)
    if python is None:
        path = sys.executable
        rc, out, err = probe_in_process()
    else:
        path = find_executable(python, dirs)
        if path is None:
            error = "%s not found%s" % (python, "" if os.path.isabs(python) else " on PATH")
            return tool(error=error, executable=None), dict(torch, error=error), dict(skbuild, error=error)
        rc, out, err = run([path, "-c", PYTHON_PROBE], timeout)
    probe = parse_python_probe(out) if rc == 0 else None
    if probe is None:
        why = "timed out after %ss" % timeout if rc is None else "exited %s: %s" % (rc, _short(err or out))
        error = "%s %s" % (path, why)
        return tool(present=True, path=path, error=error, executable=None), dict(torch, error=error), dict(skbuild, error=error)
    python_entry = tool(present=True, path=path, version=probe.get("version"), executable=probe.get("executable"))
    torch.update(probe.get("torch") or {})
    skbuild.update(probe.get("scikit_build_core") or {})
    return python_entry, torch, skbuild


def collect_numa(root="/"):
    """numa.h and libnuma as CMake's ``find_package(NUMA)`` needs them (header + the unversioned ``libnuma.so``)."""
    header = None
    for directory in NUMA_HEADER_DIRS:
        candidate = os.path.join(root, directory, "numa.h")
        if os.path.isfile(candidate):
            header = candidate
            break
    libraries = []
    for directory in SYSTEM_LIB_DIRS:
        libraries.extend(sorted(glob.glob(os.path.join(root, directory, "libnuma.so*"))))
    linkable = [lib for lib in libraries if os.path.basename(lib) == "libnuma.so"]
    library = (linkable or libraries or [None])[0]
    return {
        "header_present": header is not None,
        "header_path": header,
        "library_present": bool(libraries),
        "library_path": library,
        # The runtime libnuma.so.1 alone cannot be linked against: the -dev package adds libnuma.so.
        "linkable": bool(linkable),
        "package_hint": "install libnuma-dev (Debian/Ubuntu) or numactl-devel (RHEL)",
    }


def collect_toolchain(run=run_with_timeout, python=None, timeout=30, search_paths=None, root="/"):
    """``gpufleet_toolchain``: each tool ``{present, path, version, error}`` plus its own keys.

    ``python`` is the interpreter whose torch and scikit-build-core matter (default: the one running this code);
    ``timeout`` applies to each command (importing torch can take seconds).
    """
    dirs = list(search_paths) if search_paths is not None else search_path(EXTRA_TOOL_DIRS)
    probes = {
        "cmake": lambda: probe_tool(run, "cmake", ["--version"], parse_cmake_version, timeout, dirs,
                                    major_minor=None, policy_version_minimum_needed=False),
        "ninja": lambda: probe_tool(run, "ninja", ["--version"], first_version, timeout, dirs),
        "nvcc": lambda: collect_nvcc(run, timeout, dirs),
        "gcc": lambda: probe_tool(run, "gcc", ["--version"], parse_gcc_version, timeout, dirs),
        "gxx": lambda: probe_tool(run, "g++", ["--version"], parse_gcc_version, timeout, dirs),
        "python": lambda: collect_python(run, python, timeout, dirs),
        "ccache": lambda: probe_tool(run, "ccache", ["--version"], first_version, timeout, dirs),
        "git": lambda: probe_tool(run, "git", ["--version"], first_version, timeout, dirs),
    }
    # The ten version commands are independent subprocesses: run them side by side, so the subset
    # costs about its slowest command (nvcc) rather than the sum.
    found = side_by_side(probes)
    python_entry, torch, skbuild = found.pop("python")
    found.update(python=python_entry, torch=torch, scikit_build_core=skbuild, numa=collect_numa(root))
    found["cuda_libraries"] = collect_cuda_libraries(found["nvcc"].get("path"), python_entry.get("executable") or python_entry.get("path"), root)
    found["cuda_libraries"]["torch_matches_nvcc"] = cuda_versions_match(torch.get("cuda"), found["nvcc"].get("cuda_version"))
    return found
