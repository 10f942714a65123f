# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of gpufleet.preflight.readiness: one node_facts round trip, the verdict here."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible_collections.gpufleet.preflight.plugins.plugin_utils import _policy
from ansible_collections.gpufleet.preflight.plugins.plugin_utils._node_checks import CHECKS as PROFILE_CHECKS

NODE_FACTS = "gpufleet.preflight.node_facts"

ARGUMENT_SPEC = dict(
    min_available_memory=dict(type="raw", default="8GiB"),
    max_build_processes=dict(type="int", default=0),
    max_memory_pressure=dict(type="float", default=10.0),
    build_process_names=dict(type="list", elements="str", default=[]),
    build_process_patterns=dict(type="list", elements="str", default=[]),
    profiles=dict(type="list", elements="str", choices=list(_policy.PROFILES), default=list(_policy.PROFILES)),
    expected_gpus=dict(type="int", default=8),
    compute_capability=dict(type="str", default="12.0"),
    min_driver_version=dict(type="str"),
    allow_gpu_compute_apps=dict(type="bool", default=False),
    nvcc_arch=dict(type="str", default="sm_120a"),
    cmake_min_version=dict(type="str", default="3.18"),
    build_path=dict(type="path", default="/tmp"),
    min_free_disk=dict(type="raw", default="20GiB"),
    min_free_inodes=dict(type="int", default=100000),
    oom_window_minutes=dict(type="int", default=60),
    custom_checks=dict(type="list", elements="dict", default=[]),
    gpu_timeout=dict(type="float", default=10),
    toolchain_python=dict(type="path"),
    kernel_events_window=dict(type="int", default=86400),
    wait=dict(type="float", default=0),
    interval=dict(type="float", default=5),
    fail_when_not_ready=dict(type="bool", default=True),
)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = True

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        try:
            policy = _policy.validate_policy(args)
        except ValueError as exc:
            raise AnsibleActionFail(str(exc))

        node_args = dict(
            gather_subset=_policy.subsets_for(policy),
            build_process_names=args["build_process_names"],
            build_process_patterns=args["build_process_patterns"],
            gpu_timeout=args["gpu_timeout"],
            disk_paths=[args["build_path"]],
            kernel_events_window=args["kernel_events_window"],
        )
        if args["toolchain_python"]:
            node_args["toolchain_python"] = args["toolchain_python"]

        started = time.monotonic()
        deadline = started + policy["wait"]
        attempts = 0
        while True:
            attempts += 1
            gathered = self._execute_module(module_name=NODE_FACTS, module_args=node_args, task_vars=task_vars)
            if gathered.get("unreachable") or gathered.get("failed"):
                gathered.setdefault("msg", "node_facts failed")
                return gathered
            facts = dict((key[len("gpufleet_"):], value) for key, value in gathered["ansible_facts"].items())
            checks = _policy.evaluate(facts, policy, PROFILE_CHECKS)
            ready, message = _policy.verdict(checks)
            remaining = deadline - time.monotonic()
            if ready or remaining <= 0:
                break
            time.sleep(min(policy["interval"] or 1, remaining))

        waited = round(time.monotonic() - started, 1)
        if policy["wait"] and ready:
            message += " (ready after waiting %d s, %d check%s of the node)" % (int(waited), attempts, "" if attempts == 1 else "s")
        elif policy["wait"]:
            message += " (still not ready after waiting %g s: %d checks of the node over %.1f s)" % (policy["wait"], attempts, waited)
        readiness = dict(
            ready=ready,
            message=message,
            checks=checks,
            failed_checks=[c["name"] for c in checks if c["status"] in ("failed", "unknown")],
            profiles=args["profiles"],
            subsets=node_args["gather_subset"],
            waited_seconds=waited,
            attempts=attempts,
            checked_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            policy=args,
        )
        ansible_facts = dict(gathered["ansible_facts"])
        ansible_facts["gpufleet_readiness"] = readiness
        result.update(readiness)
        result.update(changed=False, ansible_facts=ansible_facts, msg=message)
        if not ready and args["fail_when_not_ready"]:
            result["failed"] = True
        return result
