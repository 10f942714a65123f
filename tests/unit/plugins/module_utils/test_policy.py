# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _policy
from ansible_collections.gpufleet.preflight.tests.unit.plugins.module_utils.conftest import GIB, memory, policy, procs


@pytest.mark.parametrize("facts, overrides, ok, in_message", [
    # the seed's node: 448 GiB available of 449
    ({"memory": memory(448 * GIB, 449 * GIB)}, {}, True, ""),
    ({"memory": memory(448 * GIB, 449 * GIB)}, dict(min_available_memory="0.8"), True, ""),
    # a container capped at 2 GiB while free shows 24 GiB
    ({"memory": memory(int(1.8 * GIB), 2 * GIB, "cgroup", 24 * GIB)}, {}, False,
     "effective available memory 1.8Gi is below the 4.0Gi required (capped by the memory cgroup at 2.0Gi total; free shows the host's 24Gi)"),
    ({"memory": memory(3 * GIB, 10 * GIB)}, dict(min_available_memory="0.5"), False, "below the 5.0Gi required"),
    ({}, {}, False, "unknown: memory facts were not gathered"),
])
def test_available_memory(facts, overrides, ok, in_message):
    check = _policy.check_available_memory(facts, policy(**overrides))
    assert check["ok"] is ok
    assert in_message in check["message"]


def test_build_processes_message_names_each_process():
    facts = {"build_processes": procs((115, "ninja", True, False, 7380), (201, "cc1plus", False, False, 30),
                                      (202, "cc1plus", False, False, 31))}
    check = _policy.check_build_processes(facts, policy())
    assert check["ok"] is False and check["observed"] == 3
    assert check["message"].startswith(
        "3 build processes still running: ninja (pid 115, orphaned, 2h 03m), cc1plus x2; ")


@pytest.mark.parametrize("entries, allowed, ok", [
    ((), 0, True),
    (((7, "cmake", False, False, 5),), 0, False),
    (((7, "cmake", False, False, 5),), 1, True),
    (((7, "ninja", True, True, 5),), 0, False),
])
def test_build_processes_threshold(entries, allowed, ok):
    check = _policy.check_build_processes({"build_processes": procs(*entries)}, policy(max_build_processes=allowed))
    assert check["ok"] is ok


def test_zombie_and_orphan_flags_in_message():
    check = _policy.check_build_processes({"build_processes": procs((9, "nvcc", True, True, 65))}, policy())
    assert "nvcc (pid 9, orphaned, zombie, 1m 05s)" in check["message"]


@pytest.mark.parametrize("pressure, status", [
    ({"present": True, "some": {"avg10": 0.0}}, "ok"),
    ({"present": True, "some": {"avg10": 42.5}}, "failed"),
    ({"present": False, "reason": "kernel without PSI"}, "skipped"),
    ({"present": True, "some": {}}, "unknown"),
])
def test_memory_pressure(pressure, status):
    facts = {"memory": memory(GIB, GIB, pressure=pressure)}
    assert _policy.check_memory_pressure(facts, policy())["status"] == status


FACTS = {"gpus": {"devices": [{"temperature": 40}, {"temperature": 90}], "count": 2}}


@pytest.mark.parametrize("spec, status, observed", [
    ({"name": "hot", "query": "gpus.devices[?temperature > `85`] | length(@)", "equals": 0}, "failed", 1),
    ({"name": "count", "query": "gpus.count", "equals": 2}, "ok", 2),
    ({"name": "count_max", "query": "gpus.count", "max": 1}, "failed", 2),
    ({"name": "count_min", "query": "gpus.count", "min": 1}, "ok", 2),
    ({"name": "missing", "query": "toolchain.cmake.version", "equals": "4.0"}, "unknown", None),
])
def test_custom_checks(spec, status, observed):
    checks = _policy.evaluate(FACTS, policy(custom_checks=[spec], max_memory_pressure=None))
    custom = [c for c in checks if c["profile"] == "custom"][0]
    assert custom["status"] == status
    assert custom["observed"] == observed
    if status == "unknown":
        assert spec["query"] in custom["message"]


def test_subsets_follow_profiles_and_custom_checks():
    assert _policy.subsets_for(policy(profiles=[])) == ["memory", "build_processes"]
    assert _policy.subsets_for(policy(profiles=["gpu"])) == ["memory", "build_processes", "gpus", "kernel_events"]
    assert "toolchain" in _policy.subsets_for(policy(profiles=[], custom_checks=[
        {"name": "c", "query": "toolchain.cmake.present", "equals": True}]))


def test_unselected_profile_checks_are_reported_not_applied():
    def check_gpu_thing(facts, policy):
        return {"name": "gpu_thing", "ok": False, "status": "unknown", "message": "unknown: gpus facts were not gathered",
                "profile": "gpu", "observed": None, "expected": 8}
    checks = _policy.evaluate({"memory": memory(8 * GIB, 8 * GIB), "build_processes": procs()},
                              policy(profiles=["build"]), [check_gpu_thing])
    gpu = [c for c in checks if c["name"] == "gpu_thing"][0]
    assert gpu["status"] == "skipped" and "profile gpu not selected" in gpu["message"]
    assert _policy.verdict(checks)[0] is True


def test_verdict_names_every_failed_check():
    checks = _policy.evaluate({"memory": memory(GIB, 2 * GIB), "build_processes": procs((1, "ninja", True, False, 5))},
                              policy(max_memory_pressure=None))
    ready, message = _policy.verdict(checks)
    assert ready is False
    assert message.startswith("not ready: available_memory: ") and "; build_processes: 1 build process still running" in message


# ---------------------------------------------------------------- issue 12 items 12, 14, 17, 19


def test_a_container_init_named_like_a_build_tool_is_not_sent_to_reap():
    only_init = _policy.check_build_processes({"build_processes": procs((1, "make", False, False, 90000))},
                                              policy(max_build_processes=0))
    assert "pid 1 is this node's (container's) init, which ansible-playbook gpufleet.preflight.reap cannot end" \
        in only_init["message"]
    assert "end them with" not in only_init["message"]
    both = procs((1, "make", False, False, 90000), (40, "cc1plus", True, False, 60))
    mixed = _policy.check_build_processes({"build_processes": both}, policy())
    assert "end them with ansible-playbook gpufleet.preflight.reap (not pid 1" in mixed["message"]


def test_the_reap_hint_names_reap_orphaned_only_false_for_a_live_build():
    """Issue 39: reap ends only orphans by default; a hint naming reap alone for a live (or setsid'd) build came back
    after every reap, which ended nothing. The playbook is named as an installed collection runs it."""
    live = _policy.check_build_processes({"build_processes": procs((40, "nvcc", False, False, 60))}, policy())
    assert "end them with ansible-playbook gpufleet.preflight.reap -e reap_orphaned_only=false (it still has a parent" \
        in live["message"] and "playbooks/reap.yml" not in live["message"], live["message"]
    mixed = _policy.check_build_processes({"build_processes": procs((40, "nvcc", False, False, 60),
                                                                    (41, "ninja", True, False, 60))}, policy())
    assert "-e reap_orphaned_only=false (1 of them still has a parent" in mixed["message"], mixed["message"]
    orphans = _policy.check_build_processes({"build_processes": procs((41, "ninja", True, False, 60))}, policy())
    assert orphans["message"].endswith("; wait for them, or end them with ansible-playbook gpufleet.preflight.reap")


def test_process_names_with_control_characters_are_escaped_in_the_message():
    entry = _policy.check_build_processes({"build_processes": procs((7, "\x1b[31mninja\x07", True, False, 5))}, policy())
    assert "\x1b" not in entry["message"] and "\x07" not in entry["message"]
    assert "\\x1b[31mninja\\x07 (pid 7" in entry["message"]
