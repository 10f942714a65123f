# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_hardware_checks: d_state, cpu_governor, nvme_health over the hardware facts of the fixture trees."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _hardware as hw
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _hardware_checks as hc
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _policy_validation
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _readiness_options as table

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "hardware")


def policy(**overrides):
    return _policy_validation.validate_policy(dict(table.defaults(), profiles=["node"], **overrides))


def facts(tree="gpu_node", smart=("healthy", "failing")):
    def run(argv, timeout):
        with open(os.path.join(FIXTURES, "nvme-smart-log-%s.json" % smart[int(argv[2][-1])])) as handle:
            return 0, handle.read(), ""
    hardware = hw.collect_hardware(hw.PARTS, run, root=os.path.join(FIXTURES, tree), nvme_program="nvme", d_state_interval=0)
    return {"node": {"errors": [], "hardware": hardware}}


CASES = [
    (hc.check_d_state, facts(), dict(check_d_state=True), "failed",
     "2 processes stuck in uninterruptible sleep (D state): nfs worker (x) (pid 101, in nfs_wait_bit_killable), "
     "jbd2/nvme0n1p (pid 103, in jbd2_journal_commit_transaction)"),
    (hc.check_d_state, facts(), dict(check_d_state=True, max_d_state_processes=2), "ok", ""),
    (hc.check_d_state, facts("vm"), dict(check_d_state=True), "ok", ""),
    (hc.check_cpu_governor, facts(), dict(expected_cpu_governor="performance"), "failed",
     "2 CPUs on powersave: set `cpupower frequency-set -g performance`"),
    (hc.check_cpu_governor, facts("vm"), dict(expected_cpu_governor="performance"), "skipped", "no cpufreq driver"),
    (hc.check_nvme_health, facts(), dict(check_nvme=True), "failed",
     "nvme1 (KIOXIA KCM6XRUL3T84) has critical warning 0x4, spare 5% below its threshold 10%, 104% of its rated life "
     "used, 17 media errors: back up what it holds and replace the drive"),
    (hc.check_nvme_health, facts(smart=("healthy", "healthy")), dict(check_nvme=True), "ok", ""),
    (hc.check_nvme_health, facts("vm"), dict(check_nvme=True), "skipped", "no NVMe controller"),
    (hc.check_nvme_health, {"node": {"errors": []}}, dict(check_nvme=True), "unknown", "was not gathered"),
]


@pytest.mark.parametrize("check, node_facts, overrides, status, words", CASES,
                         ids=["%s-%d" % (case[0].__name__[6:], i) for i, case in enumerate(CASES)])
def test_check(check, node_facts, overrides, status, words):
    entry = check(node_facts, policy(**overrides))
    assert entry["status"] == status and words in entry["message"], entry
    assert entry["profile"] == "node"


@pytest.mark.parametrize("check", (hc.check_d_state, hc.check_cpu_governor, hc.check_nvme_health))
def test_off_by_default(check):
    assert check(facts(), policy()) is None


def test_an_unreadable_smart_log_is_unknown_not_healthy():
    node = facts()
    for dev in node["node"]["hardware"]["nvme"]["devices"]:
        for key in ("critical_warning", "media_errors", "available_spare", "percentage_used"):
            dev.pop(key, None)
        dev["error"] = "nvme smart-log: permission denied"
    entry = hc.check_nvme_health(node, policy(check_nvme=True))
    assert entry["status"] == "unknown" and "permission denied" in entry["message"]


def ipmi_facts(tmp_path, second="ipmitool-sel-elist-after.txt", runs=2):
    def run_for(sel):
        def run(argv, timeout):
            with open(os.path.join(FIXTURES, sel if argv[1] == "sel" else "ipmitool-sensor.txt")) as handle:
                return 0, handle.read(), ""
        return run
    out = None
    for sel in ("ipmitool-sel-elist-before.txt", second)[:runs]:
        out = hw.collect_hardware(("ipmi_sel", "sensors"), run_for(sel), state_dir=str(tmp_path), ipmitool="ipmitool")
    return {"node": {"errors": [], "hardware": out}}


def test_ipmi_sel_names_the_new_entries(tmp_path):
    entry = hc.check_ipmi_sel(ipmi_facts(tmp_path), policy(check_ipmi_sel=True))
    assert entry["status"] == "failed", entry
    assert entry["message"].startswith("2 new BMC event log entries since the previous run, latest: 12/04/2026 21:02:10 "
                                       "Memory #0x53: Correctable ECC (@DIMM B3) (Asserted); 12/04/2026 21:17:48")
    assert hc.check_ipmi_sel(ipmi_facts(tmp_path), policy(check_ipmi_sel=True, max_sel_new_entries=2))["status"] == "ok"


def test_ipmi_sel_first_run_and_no_new_entry(tmp_path):
    first = hc.check_ipmi_sel(ipmi_facts(tmp_path, runs=1), policy(check_ipmi_sel=True))
    assert first["status"] == "skipped" and "first run" in first["message"]
    same = hc.check_ipmi_sel(ipmi_facts(tmp_path, second="ipmitool-sel-elist-before.txt"), policy(check_ipmi_sel=True))
    assert same["status"] == "ok"


def test_sensors_past_a_critical_threshold(tmp_path):
    entry = hc.check_sensors(ipmi_facts(tmp_path), policy(check_sensors=True))
    assert entry["status"] == "failed" and "CPU2 Temp at 101.000 degrees C (critical)" in entry["message"], entry
    assert "Inlet Temp" not in entry["message"]  # non-critical: shown in observed, not failed
    absent = {"node": {"errors": [], "hardware": {"sensors": {"state": "absent", "message": "ipmitool is not installed"}}}}
    assert hc.check_sensors(absent, policy(check_sensors=True))["status"] == "skipped"


def test_a_new_check_reaches_the_verdict_the_metrics_and_the_slurm_reason(tmp_path):
    """Issue 37 item 4: a failing new check is named in the verdict, as a failed check_status sample, and as the
    drain reason Slurm shows (its cause, not just its name)."""
    from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _metrics, _policy, _slurm
    node_facts = facts()
    checks = _policy.evaluate(node_facts, policy(check_nvme=True))
    ready, message = _policy.verdict(checks)
    assert not ready and "nvme_health: nvme1 (KIOXIA KCM6XRUL3T84) has critical warning 0x4" in message
    text = _metrics.render({"ready": ready, "checks": checks, "facts": node_facts})
    assert 'gpufleet_preflight_check_status{check="nvme_health",profile="node",source="playbook",status="failed"} 1' in text
    reason = _slurm.drain_reason(_slurm.DEFAULT_PREFIX, [check for check in checks if check["name"] == "nvme_health"])
    assert reason.startswith("gpufleet: ") and "critical warning 0x4" in reason and len(reason) <= _slurm.MAX_REASON
