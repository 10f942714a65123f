#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: active_test
short_description: Run a GPU active test (DCGM diagnostic, nvbandwidth, NCCL all-reduce) on an idle node and keep its result
version_added: 0.1.0
author: gpufleet.preflight contributors (@gpufleet)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpufleet.preflight.attributes
  - gpufleet.preflight.attributes.linux
description:
  - Runs O(test) only when the node is idle - no compute process on any GPU (C(nvidia-smi --query-compute-apps)) and
    no compile admitted or queued in the build admission ledgers under O(admission_state_dirs) whose launcher still
    lives - and kills it at O(budget) seconds.
  - V(dcgm_diag) is C(dcgmi diag -r LEVEL -j), judged by DCGM itself. V(nvbandwidth) is NVIDIA's C(nvbandwidth) -
    each GPU's host-to-device and device-to-host copy, and every pair's device-to-device read where the GPUs are
    NVLinked. V(nccl_all_reduce) is nccl-tests' C(all_reduce_perf) at one 16 GiB message on all the node's GPUs,
    judged by its bus bandwidth and its data check.
  - The bandwidth tests judge against a floor in GB/s - O(min_host_bandwidth), O(min_peer_bandwidth),
    O(min_bus_bandwidth), else the figure published for the GPU model (Azure's HPC node health checks' configurations
    for H100 80GB HBM3, H200 and GB200, named in the result) - and keep the numbers without a verdict for a model with
    no published figure and no floor given.
  - A result that parsed is kept at O(result_path) with C(verified_at) and C(valid_until) (epoch seconds); the
    readiness option C(dcgm_result_max_age) of M(gpufleet.preflight.readiness) reads the DCGM one without rerunning.
  - A busy node, an absent tool or a stopped C(nv-hostengine) is reported, never failed for, and nothing is kept.
options:
  test:
    description:
      - Which active test to run.
    type: str
    choices: [dcgm_diag, nvbandwidth, nccl_all_reduce]
    default: dcgm_diag
  level:
    description:
      - DCGM run level (O(test=dcgm_diag)); V(3) and V(4) run long stress tests (tens of minutes to hours) and are
        opt-in.
    type: int
    choices: [2, 3, 4]
    default: 2
  budget:
    description:
      - Seconds the test may run before it is killed (DCGM level 2 takes about 2 minutes on 8 GPUs).
    type: float
    default: 600
  result_dir:
    description:
      - Where the result is kept unless O(result_path) says otherwise, as C(dcgm-diag.json), C(nvbandwidth.json) or
        C(nccl-all-reduce.json) by O(test) - the files the readiness options C(dcgm_result_path) and
        C(bandwidth_result_dir) read by default.
    type: path
    default: /var/lib/gpufleet
  result_path:
    description:
      - Where the result is kept (a file). Default the test's file in O(result_dir).
    type: path
  valid_hours:
    description:
      - Hours the result stays valid (C(valid_until) = C(verified_at) + this).
    type: float
    default: 24
  admission_state_dirs:
    description:
      - State directories of build admission ledgers (C(ledger.json)) to consult, read-only.
    type: list
    elements: path
    default: []
  executable:
    description:
      - The test's program (C(nvbandwidth) or C(all_reduce_perf)) where it is not on the search path
        (C(PATH), then C(/usr/local/bin), C(/usr/bin), C(/opt/nccl-tests/build), C(/opt/nvbandwidth)).
    type: path
  min_host_bandwidth:
    description:
      - Floor in GB/s for each GPU's host-to-device and device-to-host copy (O(test=nvbandwidth)); default the
        published figure for the GPU model, else no verdict.
    type: float
  min_peer_bandwidth:
    description:
      - Floor in GB/s for each NVLinked pair's device-to-device read (O(test=nvbandwidth)).
    type: float
  min_bus_bandwidth:
    description:
      - Floor in GB/s for C(all_reduce_perf)'s bus bandwidth at 16 GiB (O(test=nccl_all_reduce)).
    type: float
attributes:
  check_mode:
    support: none
"""

EXAMPLES = r"""
- name: DCGM level 2 on idle nodes, valid for a day
  gpufleet.preflight.active_test:
    level: 2
    admission_state_dirs: [/var/lib/gpufleet-build]

- name: Every GPU's PCIe copies, against 50 GB/s (a PCIe Gen5 x16 board; no figure is published for it)
  gpufleet.preflight.active_test:
    test: nvbandwidth
    min_host_bandwidth: 50

- name: NCCL all-reduce on all the node's GPUs, judged by the published figure for the model
  gpufleet.preflight.active_test:
    test: nccl_all_reduce
    executable: /opt/nccl-tests/build/all_reduce_perf
"""

RETURN = r"""
summary:
  description: One line - how the test went and until when its result holds, or why it did not run.
  returned: always
  type: str
  sample: "dcgm_diag: dcgmi diag -r 2 -j in 95 s: passed; valid until 2026-12-06 09:20 UTC"
state:
  description: V(ok) (ran, result kept), V(not_run) (the node was busy), V(absent), V(error) or V(timeout).
  returned: always
  type: str
message:
  description: Why it did not run or what went wrong.
  returned: always
  type: str
kept:
  description:
    - The kept record - DCGM (level, passed, verified_at, valid_until, failures, tests); a bandwidth test (test,
      passed, judged, floors, floors_source, measured, failures, verified_at, valid_until); null when nothing ran.
  returned: always
  type: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _bandwidth_tests, _dcgm_deep, _gpus
from ansible_collections.gpufleet.preflight.plugins.module_utils._values import non_finite
from ansible_collections.gpufleet.preflight.plugins.module_utils._run import find_executable, run_with_timeout, search_path


PROGRAMS = dict(dcgm_diag="dcgmi", nvbandwidth="nvbandwidth", nccl_all_reduce="all_reduce_perf")
EXTRA_DIRS = ("/opt/nccl-tests/build", "/opt/nvbandwidth")


def main():
    module = AnsibleModule(argument_spec=dict(
        test=dict(type="str", choices=sorted(PROGRAMS), default="dcgm_diag"),
        level=dict(type="int", choices=[2, 3, 4], default=2),
        budget=dict(type="float", default=600),
        result_dir=dict(type="path", default=_bandwidth_tests.RESULT_DIR),
        result_path=dict(type="path"),
        valid_hours=dict(type="float", default=24),
        admission_state_dirs=dict(type="list", elements="path", default=[]),
        executable=dict(type="path"),
        min_host_bandwidth=dict(type="float"),
        min_peer_bandwidth=dict(type="float"),
        min_bus_bandwidth=dict(type="float"),
    ), supports_check_mode=False)
    params = module.params
    for name in ("budget", "valid_hours", "min_host_bandwidth", "min_peer_bandwidth", "min_bus_bandwidth"):
        value = params[name]
        if value is not None and (non_finite(value) or value <= 0):
            unit = "seconds" if name == "budget" else "hours" if name == "valid_hours" else "GB/s"
            module.fail_json(msg="%s must be a number of %s above 0, not %r" % (name, unit, value))
    test = params["test"]
    if params["result_path"] is None and params["result_dir"]:
        params["result_path"] = os.path.join(params["result_dir"], _bandwidth_tests.RESULT_FILES[test])
    paths = [params["result_dir"], params["result_path"]] + list(params["admission_state_dirs"])
    if params["executable"]:
        paths.append(params["executable"])
    for path in paths:
        if not path or not os.path.isabs(path) or "\0" in path:
            module.fail_json(msg="result_dir, result_path, executable and admission_state_dirs must be absolute paths, not %r" % path)
    # the nvbandwidth test reads the NVLink links: the peer reads are judged only where the GPUs are NVLinked
    gpus = _gpus.collect_gpus(run_with_timeout, probes=("nvlink_status",) if test == "nvbandwidth" else ())
    executable = params["executable"] or find_executable(
        PROGRAMS[test], search_path(_gpus.DEFAULT_SEARCH_DIRS + (EXTRA_DIRS if test != "dcgm_diag" else ())))
    if params["executable"] and not (os.path.isfile(executable) and os.access(executable, os.X_OK)):
        module.fail_json(msg="executable %s is not an executable file on this node" % executable)
    entry = _dcgm_deep.run_active_test(run_with_timeout, gpus, executable, params)
    if entry["state"] in ("error", "timeout"):
        module.fail_json(msg=entry["summary"], **entry)
    module.exit_json(changed=entry["state"] == "ok", **entry)


if __name__ == "__main__":
    main()
