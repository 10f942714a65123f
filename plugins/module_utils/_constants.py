# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Names both sides share, and nothing else: no imports, so the checks (controller or node-local health check)
read them without pulling in the node collectors (``_node_facts`` imports every collector, ``_confinement``
``_cgroupfs`` and ``_memory``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# node_facts' subsets, in the order they are gathered (cheap /proc reads first); custom checks read these names.
SUBSETS = ("memory", "build_processes", "cpus", "node", "disks", "kernel_events", "toolchain", "gpus")

# Xid codes GPU health checks treat as fatal (need a reset or reboot, or mean lost/damaged hardware).
FATAL_XIDS = frozenset((48, 56, 57, 58, 62, 63, 64, 65, 68, 69, 73, 74, 79, 80, 81, 92, 119, 120))

# The name every guarded_build cgroup starts with: an OOM kill inside one is that build's backoff, not the node's.
GUARDED_BUILD_CGROUP_PREFIX = "gpufleet-build-"

# The longest a node waits on nvidia-smi: beyond that the driver is wedged, whatever the option says.
MAX_GPU_TIMEOUT = 600.0
# The oldest kernel log worth reading: a year.
MAX_KERNEL_EVENTS_WINDOW = 366 * 86400.0
# Bounded waits: a day is longer than any node takes to settle; 1e99 s would hold the play for ever.
MAX_WAIT_SECONDS = 86400

# Where each active test keeps its result on the node by default: active_test writes them, the readiness checks
# dcgm_result and bandwidth_result read them (the options dcgm_result_path and bandwidth_result_dir).
ACTIVE_RESULT_DIR = "/var/lib/gpufleet"
ACTIVE_RESULT_FILES = {"dcgm_diag": "dcgm-diag.json", "nvbandwidth": "nvbandwidth.json", "nccl_all_reduce": "nccl-all-reduce.json"}

# A guarded build's files in its build directory (guarded_build writes them; the roles and build_watch read them
# through the gpufleet.preflight.build_paths filter, never by spelling the names).
BUILD_STAMP_NAME = ".gpufleet-build.stamp"
BUILD_STATUS_NAME = "gpufleet-build.status.json"
BUILD_LOG_NAME = "gpufleet-build.log"
