# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The health_check role with ``health_check_schedule: systemd`` on real systemd nodes: the role installs the
service and timer, the timer fires the check (its OnBootSec has passed, so starting it elapses it at once), and
the check's exit code and node_exporter textfile agree."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import time

from conftest import TIMINGS, on_every_node

PLAYBOOK = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scheduler", "playbooks",
                        "health_check.yml")
METRICS_DIR = "/var/lib/gpufleet-vm-textfile"
# the common checks only (memory, build processes): a VM has no GPU or nvcc for the gpu and build profiles, and
# 1.5 GiB of memory, below the default 8 GiB minimum
POLICY = {"profiles": [], "min_available_memory": "256MiB"}
VERDICT_OF_EXIT = {0: ("1", "0"), 1: ("0", "0"), 2: ("0", "1")}  # exit -> (ready, unknown) gauges


def show(node, unit, *props):
    text = node.out("systemctl show %s %s" % (unit, " ".join("-p " + p for p in props)))
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def test_role_installs_a_timer_that_runs_the_check(vms):
    started = time.time()
    before = {}
    for name, node in vms.nodes.items():
        node.run("systemctl disable --now gpufleet-health-check.timer; rm -rf %s; mkdir -p %s" % (METRICS_DIR, METRICS_DIR))
        before[name] = show(node, "gpufleet-health-check.service", "ExecMainExitTimestampMonotonic").get(
            "ExecMainExitTimestampMonotonic", "0")
    proc = vms.playbook(PLAYBOOK, extra_vars={"health_check_schedule": "systemd", "health_check_policy": POLICY,
                                              "health_check_metrics_dir": METRICS_DIR})
    assert proc.returncode == 0, proc.stdout[-6000:]
    installed = time.time()

    def check(name, node):
        try:
            timer = show(node, "gpufleet-health-check.timer", "ActiveState", "UnitFileState", "Triggers")
            assert timer["ActiveState"] == "active" and timer["UnitFileState"] == "enabled", timer
            assert timer["Triggers"] == "gpufleet-health-check.service", timer
            # the timer, not the role, starts the service: wait for its first run to end
            deadline = time.time() + 120
            while True:
                service = show(node, "gpufleet-health-check.service", "ExecMainStatus", "ExecMainExitTimestampMonotonic",
                               "Result", "ActiveState", "NRestarts", "InvocationID")
                if service["ExecMainExitTimestampMonotonic"] not in ("", "0", before[name]) and service["ActiveState"] != "activating":
                    break
                assert time.time() < deadline, "the timer did not run the check within 120 s: %s" % service
                time.sleep(1)
            trigger = show(node, "gpufleet-health-check.timer", "LastTriggerUSecMonotonic")
            assert trigger["LastTriggerUSecMonotonic"] not in ("", "0"), trigger
            code = int(service["ExecMainStatus"])
            journal = node.out("journalctl -q -o cat _SYSTEMD_INVOCATION_ID=%s" % service["InvocationID"])
            print("%s: exit %d after %.0f s; %s" % (name, code, time.time() - installed, journal.strip()[:300]))
            assert code in VERDICT_OF_EXIT, (code, journal)
            assert service["Result"] == "success", service  # SuccessExitStatus=1 2: a verdict is no unit failure
            assert re.search(r"^(ready|not ready|unknown)\b", journal, re.M), journal

            metrics = node.out("cat %s/gpufleet_preflight_health_check.prom" % METRICS_DIR)
            gauges = dict(re.findall(r'^(gpufleet_preflight_(?:ready|unknown))\{source="health_check"\} (\S+)$', metrics, re.M))
            assert (gauges.get("gpufleet_preflight_ready"), gauges.get("gpufleet_preflight_unknown")) == \
                VERDICT_OF_EXIT[code], (code, metrics)
            assert code == 0, "a VM with no build running should be ready under %s: %s" % (POLICY, journal)
            stamp = re.search(r'^gpufleet_preflight_last_check_timestamp_seconds\{source="health_check"\} (\S+)$', metrics, re.M)
            assert stamp and float(stamp.group(1)) >= installed - 60, metrics
        finally:
            node.run("systemctl disable --now gpufleet-health-check.timer")

    on_every_node(vms.nodes, check)
    TIMINGS["health_check_timer_test_seconds"] = time.time() - started
