#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: active_test
short_description: Run a GPU active test (DCGM diagnostic level 2, 3 or 4) on an idle node and keep its result
version_added: 0.1.0
author: gpufleet.preflight contributors (@gpufleet)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpufleet.preflight.attributes
  - gpufleet.preflight.attributes.linux
description:
  - Runs C(dcgmi diag -r LEVEL -j) only when the node is idle - no compute process on any GPU (C(nvidia-smi
    --query-compute-apps)) and no compile admitted or queued in the build admission ledgers under
    O(admission_state_dirs) whose launcher still lives - and kills it at O(budget) seconds.
  - A result that parsed is kept at O(result_path) with C(verified_at) and C(valid_until) (epoch seconds); the
    readiness option C(dcgm_result_max_age) of M(gpufleet.preflight.readiness) reads it without rerunning.
  - A busy node, an absent C(dcgmi) or a stopped C(nv-hostengine) is reported, never failed for, and nothing is kept.
options:
  level:
    description:
      - DCGM run level; V(3) and V(4) run long stress tests (tens of minutes to hours) and are opt-in.
    type: int
    choices: [2, 3, 4]
    default: 2
  budget:
    description:
      - Seconds the diagnostic may run before it is killed (level 2 takes about 2 minutes on 8 GPUs).
    type: float
    default: 600
  result_path:
    description:
      - Where the result is kept.
    type: path
    default: /var/lib/gpufleet/dcgm-diag.json
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
attributes:
  check_mode:
    support: none
"""

EXAMPLES = r"""
- name: DCGM level 2 on idle nodes, valid for a day
  gpufleet.preflight.active_test:
    level: 2
    admission_state_dirs: [/var/lib/gpufleet-build]
"""

RETURN = r"""
state:
  description: V(ok) (ran, result kept), V(not_run) (the node was busy), V(absent), V(error) or V(timeout).
  returned: always
  type: str
message:
  description: Why it did not run or what went wrong.
  returned: always
  type: str
kept:
  description: The kept record (level, passed, verified_at, valid_until, failures, tests); null when nothing ran.
  returned: always
  type: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _dcgm_deep, _gpus
from ansible_collections.gpufleet.preflight.plugins.module_utils._values import non_finite
from ansible_collections.gpufleet.preflight.plugins.module_utils._run import find_executable, run_with_timeout, search_path


def main():
    module = AnsibleModule(argument_spec=dict(
        level=dict(type="int", choices=[2, 3, 4], default=2),
        budget=dict(type="float", default=600),
        result_path=dict(type="path", default=_dcgm_deep.STATE_FILE),
        valid_hours=dict(type="float", default=24),
        admission_state_dirs=dict(type="list", elements="path", default=[]),
    ), supports_check_mode=False)
    for name in ("budget", "valid_hours"):
        value = module.params[name]
        if non_finite(value) or value <= 0:
            module.fail_json(msg="%s must be a number of %s above 0, not %r" % (name, "seconds" if name == "budget" else "hours", value))
    for path in [module.params["result_path"]] + list(module.params["admission_state_dirs"]):
        if not path or not os.path.isabs(path) or "\0" in path:
            module.fail_json(msg="result_path and admission_state_dirs must be absolute paths, not %r" % path)
    gpus = _gpus.collect_gpus(run_with_timeout)
    dcgmi = find_executable("dcgmi", search_path(_gpus.DEFAULT_SEARCH_DIRS))
    entry = _dcgm_deep.run_active_test(run_with_timeout, gpus, dcgmi, module.params)
    if entry["state"] in ("error", "timeout"):
        module.fail_json(msg=entry["message"], **entry)
    module.exit_json(changed=entry["state"] == "ok", **entry)


if __name__ == "__main__":
    main()
