# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""node_facts' memory subset and readiness on real systemd + cgroup v2 nodes, over ssh through Ansible."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

MIB = 1 << 20
SCOPE_LIMIT = 300 * MIB
SLICE_LIMIT = 400 * MIB


def test_vms_are_systemd_and_cgroup_v2(vms):
    """What the namespace fleet cannot give: systemd as PID 1, the unified hierarchy, an ssh session scope."""
    for name, node in sorted(vms.nodes.items()):
        facts = node.out("cat /proc/1/comm; stat -fc %T /sys/fs/cgroup; cat /proc/self/cgroup; "
                         "cat /sys/fs/cgroup/cgroup.subtree_control").split("\n")
        assert facts[0] == "systemd", (name, facts)
        assert facts[1] == "cgroup2fs", (name, facts)
        assert re.match(r"^0::/user\.slice/user-0\.slice/session-\d+\.scope$", facts[2]), (name, facts)
        assert "memory" in facts[3].split(), (name, facts)


def test_memory_facts_read_the_scope_memory_max(vms):
    """node_facts run inside `systemd-run --scope -p MemoryMax=300M`: the scope's limit bounds effective memory."""
    # the module itself runs in a transient scope with its own limit (pipelining feeds it on stdin)
    for node in vms.nodes.values():
        node.put_file("/usr/local/sbin/python3-in-scope",
                      "#!/bin/sh\nexec systemd-run --scope --quiet --collect -p MemoryMax=%d /usr/bin/python3 \"$@\"\n"
                      % SCOPE_LIMIT)
    inside = vms.adhoc("all", "gpufleet.preflight.node_facts", {"gather_subset": ["memory"]},
                       extra_vars={"ansible_python_interpreter": "/usr/local/sbin/python3-in-scope"})
    outside = vms.adhoc("all", "gpufleet.preflight.node_facts", {"gather_subset": ["memory"]})
    for name in sorted(vms.nodes):
        assert inside[name]["_status"] == "SUCCESS", inside[name]
        memory = inside[name]["ansible_facts"]["gpufleet_memory"]
        cgroup, effective, host = memory["cgroup"], memory["effective"], memory["host"]
        assert cgroup["version"] == 2, (name, cgroup)
        assert re.match(r"^/system\.slice/run-[^/]+\.scope$", cgroup["path"]), (name, cgroup["path"])
        assert cgroup["limit_bytes"] == SCOPE_LIMIT, (name, cgroup)
        assert cgroup["limit_dir"] == "/sys/fs/cgroup" + cgroup["path"], (name, cgroup)
        assert 0 < cgroup["usage_bytes"] < SCOPE_LIMIT, (name, cgroup)
        assert cgroup["available_bytes"] == SCOPE_LIMIT - cgroup["working_set_bytes"], (name, cgroup)
        assert host["total_bytes"] > 1024 * MIB, (name, host)  # free(1) still shows the VM's ~1.5 GiB
        assert effective["limited_by"] == "cgroup", (name, effective)
        assert effective["total_bytes"] == SCOPE_LIMIT, (name, effective)
        assert effective["available_bytes"] == cgroup["available_bytes"], (name, effective, cgroup)
        assert memory["pressure"].get("present", True) is not False, (name, memory["pressure"])

        assert outside[name]["_status"] == "SUCCESS", outside[name]
        plain = outside[name]["ansible_facts"]["gpufleet_memory"]
        assert re.match(r"^/user\.slice/user-0\.slice/session-\d+\.scope$", plain["cgroup"]["path"]), (name, plain)
        assert plain["cgroup"]["limit_bytes"] is None, (name, plain["cgroup"])
        assert plain["effective"]["limited_by"] == "host", (name, plain["effective"])
        assert plain["effective"]["total_bytes"] == plain["host"]["total_bytes"], (name, plain["effective"])


def test_readiness_is_judged_by_the_user_slice_memory_max(vms):
    """`systemctl set-property user-0.slice MemoryMax=400M`: every ssh session of root is capped; readiness sees it."""
    policy = {"min_available_memory": "1GiB", "profiles": [], "fail_when_not_ready": False}
    before = vms.adhoc("all", "gpufleet.preflight.readiness", policy)
    for name, node in sorted(vms.nodes.items()):
        assert before[name]["ready"] is True, (name, before[name].get("msg"), before[name].get("checks"))
        node.out("systemctl set-property --runtime user-0.slice MemoryMax=%d" % SLICE_LIMIT)
    try:
        capped = vms.adhoc("all", "gpufleet.preflight.readiness", policy)
        for name, node in sorted(vms.nodes.items()):
            assert node.out("cat /sys/fs/cgroup/user.slice/user-0.slice/memory.max").strip() == str(SLICE_LIMIT)
            result = capped[name]
            assert result["ready"] is False, (name, result)
            check = [c for c in result["checks"] if c["name"] == "available_memory"][0]
            assert check["status"] == "failed", (name, check)
            assert "capped by the memory cgroup at 400Mi total" in check["message"], (name, check)
            memory = result["ansible_facts"]["gpufleet_memory"]
            assert memory["cgroup"]["limit_bytes"] == SLICE_LIMIT, (name, memory["cgroup"])
            assert memory["cgroup"]["limit_dir"] == "/sys/fs/cgroup/user.slice/user-0.slice", (name, memory["cgroup"])
            assert memory["effective"]["limited_by"] == "cgroup", (name, memory["effective"])
            assert memory["effective"]["available_bytes"] < SLICE_LIMIT, (name, memory["effective"])
            # the same node passes a policy its capped memory meets
        small = vms.adhoc("all", "gpufleet.preflight.readiness", dict(policy, min_available_memory="100MiB"))
        for name in sorted(vms.nodes):
            assert small[name]["ready"] is True, (name, small[name].get("msg"))
    finally:
        for node in vms.nodes.values():
            node.run("systemctl set-property --runtime user-0.slice MemoryMax=infinity")


def test_readiness_flags_an_oom_kill_in_a_system_service(vms):
    """A real OOM kill in a service of the node (not in the ssh session's scope, not in a guarded build's scope)
    is the node's: recent_oom must hold it back. On systemd the session runs in user.slice/.../session-N.scope,
    so "the node's own cgroup" is not where the ssh session sits."""
    unit = "gpufleet-vm-oomtest"
    for name, node in sorted(vms.nodes.items()):
        node.run("systemd-run --unit=%s --collect --wait -p MemoryMax=64M -p MemorySwapMax=0 "
                 "python3 -c 'b = bytearray(256 << 20)'" % unit, timeout=300)
        log = node.out("dmesg | grep -E 'oom-kill:.*%s' || true" % unit)
        assert "oom_memcg=/system.slice/%s.service" % unit in log, (name, log)
    results = vms.adhoc("all", "gpufleet.preflight.readiness", {
        "profiles": ["build"], "oom_window_minutes": 60, "min_available_memory": "100MiB",
        "fail_when_not_ready": False})
    problems = []
    for name in sorted(vms.nodes):
        checks = dict((c["name"], c) for c in results[name].get("checks", []))
        check = checks.get("recent_oom")
        if not check or check["status"] != "failed" or "/system.slice/%s.service" % unit not in check["message"]:
            problems.append("%s: recent_oom %s" % (name, check))
    assert not problems, "\n".join(problems)
