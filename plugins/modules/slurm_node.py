#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: slurm_node
short_description: Drain a Slurm node that is not ready, resume one this collection drained
version_added: 0.2.0
author: gpufleet.preflight contributors (@gpufleet)
extends_documentation_fragment:
  - gpufleet.preflight.attributes.linux
description:
  - Reads the node's state and drain reason with C(sinfo), then, after LBNL NHC's rules, drains a node that is
    not ready with C(scontrol update NodeName=<node> State=DRAIN Reason="<prefix> <first failed check> - <short
    message>") (the reason itself reads C(gpufleet:) then the check's name, a colon and its short message) and
    resumes a ready node B(only when this collection drained it).
  - A drain is this collection's when a record on the host that runs C(scontrol) (O(state_dir)/C(slurm-<node>.json))
    holds the exact reason text it set AND the time slurmctld recorded for that drain still matches. A person's drain
    whose reason happens to start with O(reason_prefix) therefore is never resumed, nor is one re-set later with the
    same words.
  - A drain by anyone else (another reason, or an empty one) is never overwritten nor resumed. Nodes that are not
    responding (C(down*), C(idle*)), down, failing, in maintenance, rebooting, reserved, powering or planned are left
    alone; RV(message) says why.
  - The reason names the first failed check's cause (for a hung GPU driver C(nvidia-smi did not answer within 10s), not C(unknown)) and is kept
    while the same set of checks fails, so sinfo's drain time stays the first failure's; it changes only when the set
    changes. Right before C(scontrol), C(sinfo) is read again and nothing is done when the node changed meanwhile (a
    person's drain is never overwritten); the intent is recorded before the drain, so a run killed between the
    drain and its record still owns that drain.
  - slurmctld unreachable, C(sinfo)/C(scontrol) missing or a node Slurm does not know - nothing is changed, the task
    does not fail, and RV(error) and a warning say what happened.
options:
  node_name:
    description:
      - The node's name in Slurm. Unset - the short hostname of the host the module runs on.
      - One node - a name Slurm reads as several (C(gpu[1-8]), C(a,b), C(ALL)) is refused, so one node's verdict never
        drains or resumes others.
    type: str
  resume:
    description:
      - Resume a ready node whose drain this collection set. V(false) - drain only, never resume (NHC's
        C(MARK_OFFLINE) without marking online); a person resumes the node.
    type: bool
    default: true
  ready:
    description:
      - The node's verdict (for example C(preflight_result.ready)).
    type: bool
    required: true
  failed_checks:
    description:
      - The failed checks, in the verdict's order, as dicts with C(name) and C(message) (C(preflight_result.checks)
        filtered to status failed/unknown). The first one names the drain reason.
    type: list
    elements: dict
    default: []
  drain_cap_nodes:
    description:
      - The drain circuit breaker - the most nodes of the node's partitions drained by this collection (reason starting
        with O(reason_prefix), set within O(drain_cap_window)), counted from C(sinfo) of every node, so the node-local
        health check and every host of the run hold the same cap. Beyond it a NEW drain is not made - RV(held_back),
        RV(message) says so; checked again after the drain, and our own drain over the cap (nodes draining at the same
        moment) is resumed at once. The smaller of this and O(drain_cap_percent) applies. V(null) - no count limit.
      - A whole number, or V(null).
    type: raw
    default: 20
  drain_cap_percent:
    description:
      - The most nodes drained by this collection as a percentage of the nodes sharing a partition with the node
        (rounded down, at least 1). V(null) - no share limit; with O(drain_cap_nodes) null too, no breaker.
      - A number, or V(null).
    type: raw
    default: 25
  drain_cap_window:
    description:
      - Seconds - the drains that count are those Slurm says were set within this window. V(0) - every drain of ours
        held now.
    type: int
    default: 3600
  reason_prefix:
    description:
      - The first word of every reason this collection sets. One printable word, at most 32 characters.
    type: str
    default: "gpufleet:"
  reason_max_length:
    description:
      - Longest drain reason set, 24 to 512 characters (longer messages are cut with C(...)).
    type: int
    default: 120
  state_dir:
    description:
      - Directory for the records of the drains this collection set, on the host that runs C(scontrol).
    type: path
    default: /var/lib/gpufleet-preflight
  slurm_conf:
    description:
      - The C(slurm.conf) for C(sinfo) and C(scontrol) (as C(SLURM_CONF)). Unset - their own default.
    type: path
attributes:
  check_mode:
    support: full
    details: In check mode only C(sinfo) runs; RV(action) and RV(message) say what would be drained or resumed.
notes:
  - Runs C(sinfo -h -N -n <node> -o '%T|%H|%u|%E') and C(scontrol update); C(PATH) first, then C(/usr/bin),
    C(/usr/local/bin), C(/opt/slurm/bin).
seealso:
  - module: gpufleet.preflight.readiness
  - name: LBNL Node Health Check (NHC)
    description: The health check whose drain rules these follow.
    link: https://github.com/mej/nhc
"""

EXAMPLES = r"""
- name: Drain this node when it is not ready, resume it when it is again
  gpufleet.preflight.slurm_node:
    node_name: "{{ inventory_hostname_short }}"
    ready: "{{ preflight_result.ready }}"
    failed_checks: "{{ preflight_result.checks | selectattr('status', 'in', ['failed', 'unknown']) }}"
"""

RETURN = r"""
node:
  description: The Slurm node name.
  returned: always
  type: str
  sample: node003
action:
  description: What was done (or, in check mode, would be) - V(drain), V(resume) or V(none).
  returned: always
  type: str
  sample: drain
state:
  description: The node's state as sinfo printed it before acting (after, for a drain), or null when unknown.
  returned: always
  type: str
  sample: drained
reason:
  description: The node's drain reason now (the one set for a drain).
  returned: always
  type: str
  sample: "gpufleet: available_memory: effective available memory 3.1Gi is below the 8Gi required"
message:
  description: One line saying what was found and done, starting with the node name.
  returned: always
  type: str
  sample: "node003: not ready; draining: gpufleet: build_processes: 2 build processes still running"
notice:
  description: Whether a person should read RV(message) - something was done, a drain or a state was left alone, or an
    error.
  returned: always
  type: bool
held_back:
  description: Whether a drain was held back by the drain circuit breaker (the node is not ready and not drained).
  returned: always
  type: bool
error:
  description: Why nothing could be done (slurmctld unreachable, sinfo/scontrol missing, node unknown), else null.
  returned: always
  type: str
  sample: "node003: slurmctld is unreachable (...): nothing drained or resumed"
"""

import os
import socket

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _readiness_options, _slurm
from ansible_collections.gpufleet.preflight.plugins.module_utils._run import find_executable, run_with_timeout, search_path
from ansible_collections.gpufleet.preflight.plugins.module_utils._values import non_finite

ARGUMENT_SPEC = dict(
    node_name=dict(type="str"),
    ready=dict(type="bool", required=True),
    failed_checks=dict(type="list", elements="dict", default=[]),
    reason_prefix=dict(type="str", default=_slurm.DEFAULT_PREFIX),
    reason_max_length=dict(type="int", default=_slurm.MAX_REASON),
    state_dir=dict(type="path", default=_slurm.DEFAULT_STATE_DIR),
    slurm_conf=dict(type="path"),
    resume=dict(type="bool", default=True),
    # raw: V(null) (no limit) must reach the module as itself, not as a failed conversion
    drain_cap_nodes=dict(type="raw", default=_readiness_options.default("drain_cap_nodes")),
    drain_cap_percent=dict(type="raw", default=_readiness_options.default("drain_cap_percent")),
    drain_cap_window=dict(type="int", default=_readiness_options.default("drain_cap_window")),
)
DRAIN_CAP = ("drain_cap_nodes", "drain_cap_percent", "drain_cap_window")
SLURM_DIRS = ["/usr/bin", "/usr/local/bin", "/opt/slurm/bin"]
TIMEOUT = 30


def drain_cap_value(params, name):
    """The drain cap option converted in place (None stays None: no limit), or the error naming it."""
    rule = _readiness_options.BY_NAME[name]["check"]
    value = params[name]
    if value is None or value == "":
        params[name] = None
        return None
    kind = float if _readiness_options.BY_NAME[name]["type"] == "float" else int
    try:
        number = kind(value)
    except (TypeError, ValueError):
        number = None
    if isinstance(value, bool) or number is None or non_finite(number) or not rule["min"] <= number <= rule["max"]:
        return "%s: must be null or %s %s to %s, got %r" % (
            name, "a number" if kind is float else "a whole number", rule["min"], rule["max"], value)
    params[name] = number
    return None


def check_options(params):
    """The first bad option, in words naming it; None when all are fine."""
    try:
        _slurm.validate_prefix(params["reason_prefix"])
    except ValueError as exc:
        return str(exc)
    try:
        _slurm.validate_node_name(params["node_name"])
    except ValueError as exc:
        return str(exc)
    if not 24 <= params["reason_max_length"] <= 512:
        return "reason_max_length: must be 24 to 512, got %s" % params["reason_max_length"]
    for name in DRAIN_CAP:
        error = drain_cap_value(params, name)
        if error:
            return error
    if params["slurm_conf"] and not os.path.isfile(params["slurm_conf"]):
        return "slurm_conf: %s is not a file" % params["slurm_conf"]
    return None


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    if not params["node_name"]:
        params["node_name"] = socket.gethostname().split(".")[0]
    error = check_options(params)
    if error:
        module.fail_json(msg=error)
    env = dict(os.environ)
    if params["slurm_conf"]:
        env["SLURM_CONF"] = params["slurm_conf"]

    def run(argv):
        rc, out, err = run_with_timeout(argv, TIMEOUT, env=env)
        return (1 if rc is None else rc), out, err

    def find(name):
        return find_executable(name, search_path(SLURM_DIRS))

    outcome = _slurm.apply(params["node_name"], params["ready"], params["failed_checks"], run, find,
                           prefix=params["reason_prefix"], state_dir=params["state_dir"],
                           check_mode=module.check_mode, max_length=params["reason_max_length"],
                           resume=params["resume"],
                           limits=dict(max_nodes=params["drain_cap_nodes"], percent=params["drain_cap_percent"],
                                       window=params["drain_cap_window"]))
    if outcome["error"]:
        module.warn(outcome["error"])
    module.exit_json(msg=outcome["message"], **outcome)


if __name__ == "__main__":
    main()
