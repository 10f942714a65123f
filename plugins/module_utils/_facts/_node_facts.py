# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""node_facts' glue: validate the options once, then call one collector per subset."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.gpufleet.preflight.plugins.module_utils._process_match import NameMatcher, compile_patterns
from ansible_collections.gpufleet.preflight.plugins.module_utils._facts._subsets import resolve_subsets
from ansible_collections.gpufleet.preflight.plugins.module_utils._values import absolute_paths, program, seconds
from ansible_collections.gpufleet.preflight.plugins.module_utils._run import side_by_side
from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _memory
from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _processes
from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _cpus
from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _gpus
from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _gpu_probes
from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _toolchain
from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _disks
from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _kernel_events
from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _node
from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _hardware
from ansible_collections.gpufleet.preflight.plugins.module_utils import _constants

# Order is the order facts are gathered in; cheap /proc reads first (declared in _constants: the checks read it too).
SUBSETS = _constants.SUBSETS


# The longest a node waits on nvidia-smi, the oldest kernel log worth reading: in _constants, the readiness table's
# bounds for gpu_timeout and kernel_events_window read the same numbers.
MAX_GPU_TIMEOUT = _constants.MAX_GPU_TIMEOUT
MAX_KERNEL_EVENTS_WINDOW = _constants.MAX_KERNEL_EVENTS_WINDOW
# The extra GPU probes all together: a Slurm HealthCheckProgram is killed at 60 s (the readiness table says 50 too).
MAX_GPU_PROBE_BUDGET = 50.0
# The InfiniBand error counters of the previous run, beside the probe cache (issue 37 item 2).
IB_COUNTERS_STATE = "ib-counters-%s.json"  # per node (_hardware.node_tag): ~/.cache may be one home shared over NFS


def validate_options(params, known=SUBSETS):
    """Check what argument_spec cannot; ValueError naming the option otherwise."""
    try:
        subsets = resolve_subsets(params["gather_subset"], known)
    except ValueError as exc:
        raise ValueError("gather_subset: %s" % exc)
    NameMatcher(params["build_process_names"], "build_process_names")
    compile_patterns(params["build_process_patterns"], "build_process_patterns")
    NameMatcher(params.get("service_names") or [], "service_names")
    options = dict(params)
    options["gpu_timeout"] = seconds(params["gpu_timeout"], "gpu_timeout", maximum=MAX_GPU_TIMEOUT, zero=False)
    # The probes' options are newer than some callers' params (the health check's saved configs): the defaults.
    options["gpu_probe_timeout"] = seconds(params.get("gpu_probe_timeout", 5), "gpu_probe_timeout", maximum=MAX_GPU_TIMEOUT, zero=False)
    options["gpu_probe_budget"] = seconds(params.get("gpu_probe_budget", 15), "gpu_probe_budget", maximum=MAX_GPU_PROBE_BUDGET,
                                          zero=False)
    options["gpu_probes"] = list(params.get("gpu_probes") or ())
    options["dcgm_diag_timeout"] = seconds(params.get("dcgm_diag_timeout", 20), "dcgm_diag_timeout",
                                           maximum=MAX_GPU_PROBE_BUDGET, zero=False)
    probes = [name for name, _args in _gpu_probes.PROBES] + ["dcgm_diag"]
    unknown_probes = [name for name in options["gpu_probes"] if name not in probes]
    if unknown_probes:
        raise ValueError("gpu_probes: %s unknown; the probes are %s" % (", ".join(unknown_probes), ", ".join(probes)))
    options["kernel_events_window"] = int(seconds(params["kernel_events_window"], "kernel_events_window",
                                                  maximum=MAX_KERNEL_EVENTS_WINDOW, zero=False))
    options["toolchain_python"] = program(params["toolchain_python"], "toolchain_python")
    options["subsets"] = subsets
    options["ib_counters"] = bool(params.get("ib_counters"))  # newer than the health check's saved configs
    options["node_hardware"] = list(params.get("node_hardware") or ())
    unknown_parts = [part for part in options["node_hardware"] if part not in _hardware.PARTS]
    if unknown_parts:
        raise ValueError("node_hardware: %s unknown; the parts are %s" % (", ".join(unknown_parts), ", ".join(_hardware.PARTS)))
    options["disk_paths"] = absolute_paths(params["disk_paths"], "disk_paths") or default_disk_paths()
    return options


def default_disk_paths():
    """The temp dir and the cache that pip and ccache fill."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return [temp_dir(), cache]


def temp_dir():
    """``tempfile.gettempdir()``'s choice (TMPDIR, TEMP, TMP, then /tmp, /var/tmp, /usr/tmp, a writable one) without
    importing tempfile, whose imports (shutil, random, bz2, lzma) cost every health check about 0.01 s of CPU."""
    for name in ("TMPDIR", "TEMP", "TMP"):
        if os.environ.get(name):
            return os.path.abspath(os.environ[name])
    for candidate in ("/tmp", "/var/tmp", "/usr/tmp"):
        if os.path.isdir(candidate) and os.access(candidate, os.W_OK | os.X_OK):
            return candidate
    return os.getcwd()


def ib_state_path(run, options):
    """Where the InfiniBand counters of the previous run are kept: beside the probe cache ``run`` writes (node_facts:
    ``~/.cache/gpufleet-preflight/``, the health check: its state dir), named after the node (a home shared by many
    nodes keeps each one's counters apart); None in check mode or without a cache."""
    path = getattr(run, "path", None)
    if not path or options.get("check_mode"):
        return None
    return os.path.join(os.path.dirname(path), IB_COUNTERS_STATE % _hardware.node_tag())


def gather(options, run):
    """``{gpufleet_<subset>: facts}`` for every subset asked for."""
    collectors = {
        "memory": _memory.collect_memory,
        "build_processes": lambda: _processes.collect_build_processes(
            extra_names=options["build_process_names"], patterns=options["build_process_patterns"],
            patterns_option="build_process_patterns"),
        "cpus": _cpus.collect_cpus,
        "node": lambda: _node.collect_node(options.get("service_names") or (), ib_counters=options.get("ib_counters"),
                                           ib_state_path=ib_state_path(run, options),
                                           hardware=options.get("node_hardware") or (), run=run),
        "gpus": lambda: _gpus.collect_gpus(run, timeout=options["gpu_timeout"], probes=options["gpu_probes"],
                                           probe_timeout=options["gpu_probe_timeout"], probe_budget=options["gpu_probe_budget"],
                                           dcgm_diag_timeout=options["dcgm_diag_timeout"] if "dcgm_diag" in options["gpu_probes"] else None,
                                           dcgm_result_path=options.get("dcgm_result_path") or None,
                                           bandwidth_result_paths=options.get("bandwidth_result_paths") or None),
        "toolchain": lambda: _toolchain.collect_toolchain(run, python=options["toolchain_python"]),
        "disks": lambda: _disks.collect_disks(options["disk_paths"]),
        "kernel_events": lambda: _kernel_events.collect_kernel_events(options["kernel_events_window"], run),
    }
    names = options["subsets"]
    # The subsets that parse other programs' output (nvidia-smi and its probes, the kernel log, version probes) are
    # guarded; the others read the kernel's own files, and build_processes' ValueError names a bad option on purpose.
    failed = {"gpus": lambda why: _gpus.empty_gpus("error", why),
              "kernel_events": lambda why: _kernel_events.empty_events(options["kernel_events_window"], why),
              "toolchain": None}
    guarded = dict((name, guard(name, collectors[name], failed[name]) if name in failed else collectors[name])
                   for name in names)
    if len(names) < 2:
        return dict(("gpufleet_" + name, guarded[name]()) for name in names)
    # The subsets are independent and several wait on programs (nvidia-smi, nvcc, cmake, dmesg): gathered
    # side by side, a node answers in about its slowest subset rather than their sum.
    found = side_by_side(guarded)
    return dict(("gpufleet_" + name, found[name]) for name in names)


def guard(name, collect, failed=None):
    """``collect`` whose unforeseen error (a parser meeting output no driver prints) costs this subset's facts only:
    ``failed(why)`` (the subset's own "could not" shape, which its checks read as unknown), else ``{"error": why}``,
    which lacks every key a check needs, so each says the facts were not gathered. The others are kept."""
    def guarded():
        try:
            return collect()
        except Exception as exc:  # pylint: disable=broad-except  # any parser's bug: unknown facts, never a traceback
            why = "collecting %s failed: %s: %s" % (name, type(exc).__name__, str(exc)[:200])
            return failed(why) if failed else {"error": why}
    return guarded
