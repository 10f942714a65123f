# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""lean_failure, console_message and returned_facts: what a verdict shows and returns by default."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.preflight.plugins.action.readiness import console_message, lean_failure, returned_facts


def test_lean_failure_keeps_failed_checks_and_drops_facts_and_policy():
    full = dict(ready=False, failed=True, changed=False, msg="not ready: a: fix it", message="not ready: a: fix it",
                failed_checks=["a"], policy={"x": 1}, ansible_facts={"gpufleet_memory": {}}, subsets=["memory"],
                checks=[dict(name="a", status="failed", message="fix it", observed=1, expected=2, profile="common"),
                        dict(name="b", status="ok", message="", observed=1, expected=1, profile="common")])
    lean = lean_failure(full)
    # msg says each cause once; the checks' messages would say them again (issue 27 item 4: 2-6 KB fatal lines)
    assert "checks" not in lean and "message" not in lean and lean["failed_checks"] == ["a"]
    assert "policy" not in lean and "ansible_facts" not in lean and lean["failed"] and lean["msg"] == full["msg"]


NO_SMI = "nvidia-smi not found on PATH or in /usr/bin, /usr/local/bin: is the NVIDIA driver installed?"


def test_one_cause_of_six_gpu_checks_is_said_once():
    checks = [dict(name="build_processes", status="failed", message="1 build process still running: ninja (pid 7, 2s)"),
              dict(name="gpu_count", status="failed", message="0 GPUs usable, 8 expected: %s (not_found)" % NO_SMI),
              dict(name="memory", status="ok", message="ok")]
    checks += [dict(name=name, status="unknown", message="unknown: nvidia-smi state is not_found: " + NO_SMI)
               for name in ("compute_capability", "ecc_errors", "row_remaps", "gpu_compute_apps", "driver_version")]
    text = console_message(checks)
    assert text.count("nvidia-smi not found") == 1, text
    assert text.startswith("not ready: build_processes: 1 build process still running")
    assert "gpu_count, compute_capability, ecc_errors, row_remaps, gpu_compute_apps, driver_version: 0 GPUs usable" in text
    assert "memory" not in text


def test_a_long_cause_is_cut_and_a_ready_node_has_no_console_message():
    text = console_message([dict(name="custom", status="failed", message="x" * 2000)])
    assert len(text) < 1200 and text.endswith("... [cut: 2000 characters in all; the reports and -v have the whole text]")
    whole = "y" * 990   # the longest sentences the checks write, a recent OOM kill's, are about 400 characters
    assert console_message([dict(name="recent_oom", status="failed", message=whole)]) == "not ready: recent_oom: " + whole
    assert console_message([dict(name="memory", status="ok", message="ok")]) is None


GATHERED = dict(gpufleet_memory={"effective": {}}, gpufleet_build_processes={"count": 0, "processes": []},
                gpufleet_gpus={"devices": [{}] * 8}, gpufleet_kernel_events={"oom_kills": [{}] * 20},
                gpufleet_toolchain={}, gpufleet_disks={})
VERDICT = dict(ready=True, message="ready", checks=[dict(name="a", status="ok")], policy={"x": 1}, failed_checks=[])


def test_by_default_a_result_returns_only_the_facts_reports_and_publishers_read():
    facts = returned_facts(GATHERED, VERDICT, full_facts=False)
    assert sorted(facts) == ["gpufleet_build_processes", "gpufleet_memory", "gpufleet_readiness"]
    # the result's own checks and policy carry them; the verdict fact does not repeat them
    assert facts["gpufleet_readiness"] == dict(ready=True, message="ready", failed_checks=[])


def test_full_facts_returns_every_gathered_fact_and_the_whole_verdict():
    facts = returned_facts(GATHERED, VERDICT, full_facts=True)
    assert sorted(facts) == sorted(list(GATHERED) + ["gpufleet_readiness"])
    assert facts["gpufleet_readiness"] is VERDICT
