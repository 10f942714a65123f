# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The active tests' rows of the readiness option table (issue 37 item 2; ``_readiness_options.OPTIONS`` holds them
after the node profile's): same shape, same rules, see ``_readiness_options``. The node-local check only reads the
result an active test kept; it never runs one."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.preflight.plugins.module_utils._constants import ACTIVE_RESULT_DIR, ACTIVE_RESULT_FILES

CHECK = ("main", "check")

ACTIVE_TEST_OPTIONS = (
    dict(name="dcgm_result_max_age", check=dict(min=0, max=8760, unit="hours"), type="int", default=0, roles=CHECK, description=[
        "Require a passing DCGM diagnostic (C(dcgmi diag -r 2 -j) or deeper) younger than this many hours, read from "
        "the result an active test kept on the node at O(dcgm_result_path) (gpu profile); the check never reruns the "
        "diagnostic. A missing, expired or failed result fails the node and says how to refresh it. V(0) does not "
        "require one (the default: the node-local check costs what it did).",
    ]),
    dict(name="dcgm_result_min_level", check=dict(min=2, max=4), type="int", default=2, roles=CHECK, description=[
        "The lowest DCGM run level the kept result must come from (O(dcgm_result_max_age)): V(2) (about 2 minutes, the "
        "default), V(3) or V(4) (long stress tests, opt-in).",
    ]),
    dict(name="dcgm_result_path", check=dict(form="absolute_path"), type="path", roles=CHECK,
         default=ACTIVE_RESULT_DIR + "/" + ACTIVE_RESULT_FILES["dcgm_diag"],
         description=["Where the DCGM active test keeps its result on the node (C(verified_at), C(valid_until), the tests), "
                      "read by O(dcgm_result_max_age)."]),
    dict(name="bandwidth_result_max_age", check=dict(min=0, max=8760, unit="hours"), type="int", default=0, roles=CHECK,
         description=[
        "Require a passing result of each bandwidth active test in O(bandwidth_result_tests) younger than this many "
        "hours, read from what the active test (M(gpufleet.preflight.active_test), C(nvbandwidth), C(all_reduce_perf)) "
        "kept in O(bandwidth_result_dir) (gpu profile); the check never reruns a test. A missing, expired or failed "
        "result fails the node and says how to refresh it, and so does one kept without a verdict (no floor was "
        "published for the GPU model and none was given). V(0) does not require one (the default).",
    ]),
    dict(name="bandwidth_result_tests", check=dict(form="choices"), type="list", elements="str",
         choices=["nvbandwidth", "nccl_all_reduce"], default=["nvbandwidth", "nccl_all_reduce"], roles=CHECK, description=[
        "The bandwidth active tests whose kept result O(bandwidth_result_max_age) requires.",
    ]),
    dict(name="bandwidth_result_dir", check=dict(form="absolute_path"), type="path", default=ACTIVE_RESULT_DIR, roles=CHECK,
         description=["Where the bandwidth active tests keep their results on the node (C(nvbandwidth.json), "
                      "C(nccl-all-reduce.json), the active test's default C(result_path)), read by "
                      "O(bandwidth_result_max_age)."]),
)
