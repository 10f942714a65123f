# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# GENERATED from plugins/module_utils/_readiness/_readiness_options.py by tests/tools/gen_preflight_options.py: edit there.

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    """Options that tune how node_facts gathers, shared by node_facts and the readiness action that runs it."""

    DOCUMENTATION = r"""
options:
  build_process_names:
    description:
      - Executable names to count as build processes B(in addition to) the defaults (cmake, ninja, make, gmake, cc1,
        cc1plus, cicc, ptxas, nvcc, nvlink, fatbinary, cudafe++, collect2, ld and ld.* linkers). Shell globs allowed.
    type: list
    elements: str
    default: []
  build_process_patterns:
    description:
      - Python regular expressions matched against the whole command line of a process; a match counts it as a build
        process too (for example a wrapper script).
    type: list
    elements: str
    default: []
  dcgm_diag_timeout:
    description:
      - Seconds C(dcgmi diag -r 1) may take (with the readiness option C(check_dcgm_diag)); it runs after the other
        probes, so a node answers within O(gpu_timeout) + O(gpu_probe_budget) + this (45 s with the defaults).
    type: float
    default: 20
  gpu_probe_timeout:
    description:
      - Seconds each extra nvidia-smi probe (C(nvlink -s), C(nvlink -e), C(-q)) may take before it is killed and reported
        as timed out, naming the probe.
    type: float
    default: 5
  gpu_probe_budget:
    description:
      - Seconds all extra nvidia-smi probes together may take, after the device query (at most O(gpu_timeout)); they
        run side by side. With the defaults a node answers within 25 s, inside Slurm's 60 s HealthCheckProgram limit.
    type: float
    default: 15
  gpu_timeout:
    description:
      - Seconds to wait for C(nvidia-smi) before reporting the GPUs as timed out; a wedged driver makes it hang. Must
        be a finite number greater than 0.
    type: float
    default: 10
  toolchain_python:
    description:
      - The Python interpreter (for example a build venv's C(bin/python)) whose torch and scikit-build-core to inspect.
      - Defaults to the Python that runs the module on the node (C(ansible_python_interpreter)), inspected in-process.
    type: path
  kernel_events_window:
    description:
      - How far back, in seconds, to report OOM kills and GPU Xid errors from the kernel log.
    type: int
    default: 86400
"""
