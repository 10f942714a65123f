# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# GENERATED from plugins/module_utils/_readiness/_readiness_options.py by tests/tools/gen_preflight_options.py: edit there.

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    """The readiness policy's options that require a result an active test kept on the node."""

    DOCUMENTATION = r"""
options:
  dcgm_result_max_age:
    description:
      - 'Require a passing DCGM diagnostic (C(dcgmi diag -r 2 -j) or deeper) younger than this many hours, read from
        the result an active test kept on the node at O(dcgm_result_path) (gpu profile); the check never reruns the
        diagnostic. A missing, expired or failed result fails the node and says how to refresh it. V(0) does not require
        one (the default: the node-local check costs what it did).'
    type: int
    default: 0
  dcgm_result_min_level:
    description:
      - 'The lowest DCGM run level the kept result must come from (O(dcgm_result_max_age)): V(2) (about 2 minutes,
        the default), V(3) or V(4) (long stress tests, opt-in).'
    type: int
    default: 2
  dcgm_result_path:
    description:
      - Where the DCGM active test keeps its result on the node (C(verified_at), C(valid_until), the tests), read
        by O(dcgm_result_max_age).
    type: path
    default: /var/lib/gpufleet/dcgm-diag.json
  bandwidth_result_max_age:
    description:
      - Require a passing result of each bandwidth active test in O(bandwidth_result_tests) younger than this many
        hours, read from what the active test (M(gpufleet.preflight.active_test), C(nvbandwidth), C(all_reduce_perf))
        kept in O(bandwidth_result_dir) (gpu profile); the check never reruns a test. A missing, expired or failed
        result fails the node and says how to refresh it, and so does one kept without a verdict (no floor was published
        for the GPU model and none was given). V(0) does not require one (the default).
    type: int
    default: 0
  bandwidth_result_tests:
    description:
      - The bandwidth active tests whose kept result O(bandwidth_result_max_age) requires.
    type: list
    elements: str
    choices: [nvbandwidth, nccl_all_reduce]
    default: [nvbandwidth, nccl_all_reduce]
  bandwidth_result_dir:
    description:
      - Where the bandwidth active tests keep their results on the node (C(nvbandwidth.json), C(nccl-all-reduce.json),
        the active test's default C(result_path)), read by O(bandwidth_result_max_age).
    type: path
    default: /var/lib/gpufleet
"""
