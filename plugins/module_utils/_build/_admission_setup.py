# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Memory admission as a guarded_build capability (issue 29 item 4): its ``admission`` option puts the admission
launcher (the files of ``_admission_settings.LAUNCHER_FILES``, written beside the build) in front of every CUDA, C++ and C compile
of any CMake project - ``CMAKE_<LANG>_COMPILER_LAUNCHER`` in the environment (plain CMake >= 3.17 reads it) and in
``CMAKE_ARGS`` (scikit-build-core, setup.py builds), where a compiler cache's launcher is appended after it - and of
a torch extension (``torch.utils.cpp_extension``, flash-attention's way), whose ninja file runs ``$CXX`` and
``$PYTORCH_NVCC``: two wrappers, ``GPUFLEET_ADMISSION_CXX`` and ``GPUFLEET_ADMISSION_NVCC``, run the launcher before the
compiler, for the build to set as those (not set for it: CMake would take ``CXX`` as its compiler, admitted twice)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import inspect
import json
import os
import shlex
import sys

from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _admission
from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _admission_settings as settings_rule
from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _admission_policy as policy
from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _admission_pressure as pressure
from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _admission_threads as threads_rule
from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _admission_node as node
from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _admission_census as census
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._build_engine import BuildError
from ansible_collections.gpufleet.preflight.plugins.module_utils import _atomic
from ansible_collections.gpufleet.preflight.plugins.module_utils._human import parse_size_option

FOLDER = "gpufleet-admission"
LAUNCHER = "gpufleet_admit.py"
MODULES = {"_admission.py": _admission, "_admission_policy.py": policy, "_admission_settings.py": settings_rule,
           "_admission_pressure.py": pressure, "_admission_threads.py": threads_rule, "_admission_node.py": node,
           "_admission_census.py": census, "../_atomic.py": _atomic}


def admission_settings(settings, build_dir, source):
    """The launcher's config from the ``admission`` option: its defaults, this build's state folder and source root,
    the node's peaks file; ValueError naming what is wrong (an unknown key, a decimal size)."""
    chosen = dict((key, value) for key, value in (settings or {}).items() if value is not None)
    for name in settings_rule.SIZES:
        if name in chosen:
            chosen[name] = parse_size_option("admission.%s" % name, chosen[name])
    chosen.setdefault("state_dir", os.path.join(build_dir, FOLDER))
    chosen.setdefault("peaks_path", os.path.expanduser("~/.cache/gpufleet/admission/peaks.json"))
    chosen.setdefault("root", source)
    try:
        return settings_rule.checked_config(chosen)
    except ValueError as exc:
        raise ValueError("admission: %s" % exc)


def admission_of_file(path):
    """The settings of a launcher the build already goes through (guarded_build's ``admission_config``: the sgl_kernel
    role puts its own in the CMake arguments), read - never written - as that launcher reads them; ValueError naming
    the file and what is wrong."""
    try:
        with os.fdopen(node.open_regular(path, os.O_RDONLY)) as handle:   # a planted FIFO never blocks the module
            text = handle.read(node.MAX_JSON_BYTES + 1)
    except (IOError, OSError, ValueError) as exc:   # ValueError: not text (UnicodeDecodeError)
        raise ValueError("admission_config: cannot read %s: %s" % (path, getattr(exc, "strerror", None) or exc))
    if not text.strip():
        raise ValueError("admission_config: %s is empty, not the launcher's settings" % path)
    try:
        loaded = json.loads(text)
    except ValueError as exc:
        raise ValueError("admission_config: %s is not the launcher's JSON settings: %s" % (path, exc))
    if not isinstance(loaded, dict):
        raise ValueError("admission_config: %s holds a %s, not the launcher's settings" % (path, type(loaded).__name__))
    try:
        return settings_rule.launcher_config(loaded, os.path.dirname(path))
    except ValueError as exc:
        raise ValueError("admission_config: %s: %s" % (path, exc))


def with_admission(env, settings, build_dir, source, python=None):
    """Write the launcher, its policy and config under ``build_dir`` and put the launcher in ``env``; the chain
    (None: no ``admission`` option). BuildError naming what is wrong."""
    if settings is None:
        return None
    failure = None
    try:
        config = admission_settings(settings, build_dir, source)
        folder = os.path.join(build_dir, FOLDER)
        if not os.path.isdir(folder):
            os.makedirs(folder)
        for source, name in settings_rule.LAUNCHER_FILES:
            with open(os.path.join(folder, name), "w") as handle:
                handle.write(inspect.getsource(MODULES[source]))
        config_path = os.path.join(folder, "config.json")
        with open(config_path, "w") as handle:
            json.dump(config, handle, indent=1, sort_keys=True)
    except (ValueError, OSError) as exc:
        failure = str(exc)
    if failure:
        raise BuildError(failure)
    chain = [python or sys.executable, os.path.join(folder, LAUNCHER), "--config=" + config_path]
    try:
        for variable, name, compiler in (("GPUFLEET_ADMISSION_CXX", "cxx", real_compiler(env, "CXX", "c++", folder)),
                                         ("GPUFLEET_ADMISSION_NVCC", "nvcc", real_compiler(env, "PYTORCH_NVCC", cuda_nvcc(env), folder))):
            env[variable] = write_wrapper(os.path.join(folder, name), chain + [compiler])
    except OSError as exc:
        raise BuildError("admission: cannot write the compiler wrappers in %s: %s" % (folder, exc))
    joined = ";".join(chain)
    for language in ("CUDA", "CXX", "C"):
        env.setdefault("CMAKE_%s_COMPILER_LAUNCHER" % language, joined)
    words = " ".join(shlex.quote("-DCMAKE_%s_COMPILER_LAUNCHER=%s" % (language, joined)) for language in ("CUDA", "CXX", "C"))
    env["CMAKE_ARGS"] = (env.get("CMAKE_ARGS", "") + " " + words).strip()
    return chain


def real_compiler(env, variable, default, folder):
    """The compiler a wrapper runs: ``env[variable]`` unless unset or one of these wrappers (never itself)."""
    chosen = env.get(variable) or default
    return default if os.path.dirname(os.path.abspath(chosen)) == os.path.abspath(folder) else chosen


def cuda_nvcc(env):
    """nvcc as torch finds it without PYTORCH_NVCC: under CUDA_HOME (or CUDA_PATH) when set, else on the PATH."""
    home = env.get("CUDA_HOME") or env.get("CUDA_PATH")
    return os.path.join(home, "bin", "nvcc") if home else "nvcc"


def write_wrapper(path, argv):
    """An executable ``sh`` script that runs ``argv`` with its own arguments after it; its path."""
    with open(path, "w") as handle:
        handle.write("#!/bin/sh\nexec %s \"$@\"\n" % " ".join(shlex.quote(word) for word in argv))
    os.chmod(path, 0o755)
    return path


def node_peaks(config):
    """The peaks the launchers of this build read (the seeds, then this node's own), merged; {} without admission."""
    return _admission.node_peaks(config) if config else {}


def source_seconds(config):
    """``{path in the project: seconds}`` of the sources whose compile time is known (learned here, seeded, or the
    shipped census of this tree; for the others, the time of the same path in another version or commit of the tree,
    ``_admission_census.similar_seconds``): the cold build's ETA (``_timeline.paced_eta``); {} without
    admission."""
    if not config:
        return {}
    peaks = node_peaks(config)
    known = dict((policy.path_of(key), float(entry["seconds"])) for key, entry in census.of_tree(peaks, config.get("tree")).items()
                 if settings_rule.number(entry.get("seconds"), 0.01) is not None)
    similar = census.similar_seconds(peaks,
                                     [node.load_json(path) for path in config.get("census") or []], config.get("tree"))
    return dict(similar, **known)


def compiles_of_build(config, session):
    """How many of this build's compiles the ledger holds running, frozen and waiting: its launchers are ninja's
    children, in the build's session ``session`` (the holder's: guarded_build starts every build in a session of its
    own; ninja gives each step a process group of its own, so the build's process group holds none of them - the real
    tree through the role read 0 running beside two compiles). Other builds of the node share the ledger. None without
    admission."""
    if not config or not session:
        return None
    counts = {"running": 0, "frozen": 0, "waiting": 0}
    for pid, entry in node.load_json(os.path.join(config["state_dir"], "ledger.json")).items():
        try:
            mine = policy.valid_entry(pid, entry) and os.getsid(int(pid)) == session
        except OSError:
            mine = False
        if mine:
            counts["frozen" if entry.get("frozen") else entry["state"]] += 1
    return counts


def refused_sources(config, limit_bytes):
    """Why the build cannot fit (a message naming each source that needs more than one compile may hold alone - the
    limit less what ninja needs beside it, not the budget less the reserve: a resumed build in a cgroup just big
    enough is not refused - learned over it, or OOM-killed holding a peak that times the margin is over it, and the
    smallest memory limit that builds them), or None: said before the first compile and after an OOM."""
    if not config:
        return None
    big, _smallest, message = census.refusal(node_peaks(config), settings_rule.ceiling(config, limit_bytes),
                                             config.get("tree"), float(config["margin"]))
    if not big:
        return None
    return "admission: %s; give the build more memory (memory_limit)" % message
