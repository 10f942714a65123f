# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""guarded_build on real systemd + cgroup v2 nodes: default confinement (a systemd scope), a node without git,
and a cgroup v2 namespace root with processes and no systemd (a privileged container)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from conftest import HUNGRY, HUNGRY_CMD, TIMINGS, WORK, on_every_node

MIB = 1 << 20
STEPS = 12

# python3 as a privileged container's process sees it: its own cgroup namespace whose root holds processes
# (a bystander the module did not start, and the container's init), cgroupfs mounted read-write from inside,
# a PID namespace whose init is sh (not systemd), and no /run/systemd. The "container" is capped by memory.max.
CGNS = "/sys/fs/cgroup/gpufleet-cgns"
CGNS_WRAPPER = r"""#!/bin/sh
set -e
cg=%(cg)s
mkdir -p "$cg"
echo $$ > "$cg/cgroup.procs"
sleep 900 </dev/null >/dev/null 2>&1 &
echo $! > /run/gpufleet-cgns-bystander.pid
exec unshare --cgroup --pid --fork --mount --mount-proc --propagation private /bin/sh -c '
  mount -t tmpfs tmpfs /run
  umount -l /sys/fs/cgroup  # bookworm'"'"'s mount(8) refuses a second cgroup2 mount on the same target
  mount -t cgroup2 cgroup2 /sys/fs/cgroup
  /usr/bin/python3 "$@"' sh "$@"
""" % {"cg": CGNS}


def oom_lines(lines):
    return [line for line in lines if "oom-kill:" in line or "Killed process" in line or "Out of memory" in line]


def scope_units(node):
    return node.out("systemctl list-units --all --no-legend --plain 'gpufleet-build-*' | awk '{print $1}'").split()


def test_default_confinement_backs_off_inside_a_systemd_scope(vms):
    """-j8 x 150 MiB in 400 MiB OOMs; with default options the build runs in a transient scope per attempt,
    the kernel kills only compile steps inside that scope, the jobs halve until it fits, sshd and the VM live on."""
    before = {}
    for name, node in sorted(vms.nodes.items()):
        node.put_tree(HUNGRY, WORK + "/hungry")
        before[name] = {
            "sshd": node.out("systemctl show -p MainPID --value ssh.service").strip(),
            "boot_id": node.out("cat /proc/sys/kernel/random/boot_id").strip(),
            "marker": node.kmsg_mark("guarded-build-systemd"),
        }
    args = {"cmd": HUNGRY_CMD.format(mib=150, seconds=2, steps=STEPS, ramp=0), "chdir": WORK + "/hungry", "name": "vmoom",
            "jobs": 8, "memory_limit": "400MiB", "memory_per_thread": "150MiB"}
    results = vms.adhoc("all", "gpufleet.preflight.guarded_build", args, timeout=1500)

    def check(name, node):
        result = results[name]
        assert result["_status"] == "CHANGED", result.get("msg") or result
        TIMINGS["%s_guarded_build_seconds" % name] = result["_seconds"]
        attempts = result["attempts"]
        print("%s: attempts %s, peak %s, confinement %s" % (
            name, [(a["jobs"], a["kind"]) for a in attempts], result.get("peak_memory_human"),
            result["confinement"]))
        assert result["confinement"]["requested"] == "auto", result["confinement"]
        assert result["confinement"]["strategy"] == "systemd", result["confinement"]
        assert [a["strategy"] for a in attempts] == ["systemd"] * len(attempts), attempts
        assert len(attempts) >= 2, attempts
        assert attempts[0]["jobs"] == 8 and attempts[0]["oom"] and attempts[0]["oom_kills"] > 0, attempts[0]
        assert [a["jobs"] for a in attempts] == [8 >> n for n in range(len(attempts))], attempts
        assert attempts[-1]["rc"] == 0 and not attempts[-1]["oom"], attempts[-1]
        assert result["final_jobs"] <= 2, result["final_jobs"]
        assert result["memory_limit_bytes"] == 400 * MIB
        # memory.peak may pass memory.max by a few pages: charges the kernel cannot fail (seen: +4 KiB on 6.1)
        assert result["peak_memory_bytes"] <= 400 * MIB + 256 * 1024, result["peak_memory_bytes"]
        assert node.out("ls %s/hungry/build | grep -c '^unit_.*\\.o$'" % WORK).strip() == str(STEPS)

        # the kernel's word: every OOM kill since the marker is a compile step (hog) inside one of the
        # build's own scopes under system.slice; no global OOM, nothing else killed
        kernel = oom_lines(node.kernel_lines_since(before[name]["marker"]))
        assert kernel, "no OOM kill in the kernel log"
        # <base>-p<module pid>-s<its start time>-<attempt>-<epoch>.scope (_confinement.owned_name + the attempt)
        scope_re = re.compile(r"oom_memcg=/system\.slice/gpufleet-build-vmoom-[0-9a-f]{8}-p\d+-s\d+-\d+-\d+\.scope,")
        for line in kernel:
            assert "Out of memory:" not in line or "Memory cgroup out of memory" in line, line
            if "oom-kill:" in line:
                assert scope_re.search(line) and "task=hog," in line, line
                assert "task_memcg=/system.slice/gpufleet-build-vmoom-" in line, line
            if "Killed process" in line:
                assert "Memory cgroup out of memory: Killed process" in line and "(hog)" in line, line
        reported = [line for a in attempts for line in a["kernel_oom_lines"]]
        assert reported, "the module reports the kernel's OOM lines"

        # the node lives on: same boot, same sshd, and the scopes are gone
        assert node.out("cat /proc/sys/kernel/random/boot_id").strip() == before[name]["boot_id"]
        assert node.out("systemctl show -p MainPID --value ssh.service").strip() == before[name]["sshd"]
        assert node.out("systemctl is-active ssh.service").strip() == "active"
        assert scope_units(node) == [], "scopes left behind"
        assert node.run("ls -d /sys/fs/cgroup/system.slice/gpufleet-build-*").returncode != 0, "cgroups left behind"

    on_every_node(vms.nodes, check)

    again = vms.adhoc("all", "gpufleet.preflight.guarded_build", args)
    for name in sorted(vms.nodes):
        assert again[name]["_status"] == "SUCCESS", again[name].get("msg")
        assert again[name]["up_to_date"] is True and again[name]["attempts"] == [], again[name]


def test_node_without_git_stamps_by_tree_hash(vms):
    """deb13 is a minimal image without git: the stamp falls back to hashing the tree."""
    node = vms.nodes["deb13"]
    assert node.run("command -v git").returncode != 0, "deb13 should have no git"
    assert node.out("echo $PATH")  # PATH is the stock one; git is simply not installed
    node.put_tree(HUNGRY, WORK + "/nogit")
    args = {"cmd": HUNGRY_CMD.format(mib=8, seconds=0, steps=3, ramp=0), "chdir": WORK + "/nogit", "name": "nogit",
            "jobs": 2, "memory_limit": "200MiB", "memory_per_thread": "16MiB"}
    first = vms.adhoc("deb13", "gpufleet.preflight.guarded_build", args)["deb13"]
    assert first["_status"] == "CHANGED", first.get("msg") or first
    assert "git" not in str(first.get("source_revision", {}).get("git") or ""), first["source_revision"]
    print("deb13 source_revision without git: %s" % first["source_revision"])
    second = vms.adhoc("deb13", "gpufleet.preflight.guarded_build", args)["deb13"]
    assert second["_status"] == "SUCCESS" and second["up_to_date"] is True, second
    assert second["fingerprint"] == first["fingerprint"]
    node.out("echo '/* changed */' >> %s/nogit/hog.c" % WORK)
    third = vms.adhoc("deb13", "gpufleet.preflight.guarded_build", args)["deb13"]
    assert third["_status"] == "CHANGED", third.get("msg") or third
    assert third["fingerprint"] != first["fingerprint"], "a changed source file changes the tree hash"


def _cgns_setup(node, cap):
    node.put_file("/usr/local/sbin/python3-in-cgns", CGNS_WRAPPER)
    node.out("mkdir -p %s && echo %d > %s/memory.max" % (CGNS, cap, CGNS))


def _cgns_teardown(node):
    node.run("kill $(cat /run/gpufleet-cgns-bystander.pid 2>/dev/null) 2>/dev/null; "
             "for i in $(seq 50); do [ -s %s/cgroup.procs ] || break; sleep 0.2; done; "
             "find %s -mindepth 1 -depth -type d -exec rmdir {} \\; ; rmdir %s; rm -f /run/gpufleet-cgns-bystander.pid"
             % (CGNS, CGNS, CGNS))


def test_memory_facts_in_a_cgroup_namespace_root(vms):
    """A privileged container's view: cgroupfs mounted at its namespace root, which carries the container's limit."""
    for node in vms.nodes.values():
        _cgns_setup(node, 600 * MIB)
    try:
        results = vms.adhoc("all", "gpufleet.preflight.node_facts", {"gather_subset": ["memory"]},
                            extra_vars={"ansible_python_interpreter": "/usr/local/sbin/python3-in-cgns"})

        def check(name, _node):
            assert results[name]["_status"] == "SUCCESS", results[name]
            memory = results[name]["ansible_facts"]["gpufleet_memory"]
            assert memory["cgroup"]["version"] == 2 and memory["cgroup"]["path"] == "/", memory["cgroup"]
            assert memory["cgroup"]["dir"] == "/sys/fs/cgroup", memory["cgroup"]
            assert memory["cgroup"]["limit_bytes"] == 600 * MIB, (memory["cgroup"], memory["errors"])
            assert memory["effective"]["limited_by"] == "cgroup", memory["effective"]

        on_every_node(vms.nodes, check)
    finally:
        for node in vms.nodes.values():
            _cgns_teardown(node)


def test_auto_in_a_cgroup_namespace_root_moves_nothing_and_uses_the_watchdog(vms):
    """cgroup v2 without systemd, namespace root holding processes: cgroupfs would have to move processes the module
    did not start (no-internal-processes rule), so auto must fall back to the watchdog, move nothing, and the
    build must still finish by backoff with no kernel OOM kill in the capped "container"."""
    cap = 600 * MIB
    markers = {}
    for name, node in sorted(vms.nodes.items()):
        _cgns_setup(node, cap)
        node.put_tree(HUNGRY, WORK + "/cgns")
        markers[name] = node.kmsg_mark("guarded-build-cgns")
    try:
        # Each step's memory grows over 2 s, as a compiler's does (tests/build/test_guarded_build_watchdog.py too): the
        # watchdog acts on what it can see coming. Four steps taking 150 MiB at once pass the cap between two of any
        # watchdog's samples; under TCG with the other lane compiling, that raced the kernel (1 trial in 2 on 2026-12-04).
        args = {"cmd": HUNGRY_CMD.format(mib=150, seconds=2, steps=STEPS, ramp=2), "chdir": WORK + "/cgns", "name": "cgns",
                "jobs": 8, "memory_limit": "400MiB", "memory_per_thread": "150MiB", "reserve": "100MiB"}
        results = vms.adhoc("all", "gpufleet.preflight.guarded_build", args, timeout=1500,
                            extra_vars={"ansible_python_interpreter": "/usr/local/sbin/python3-in-cgns"})

        def check(name, node):
            result = results[name]
            print("%s: %s attempts %s confinement %s" % (name, result["_status"], [
                (a["jobs"], a["kind"], a.get("watchdog")) for a in result.get("attempts", [])],
                result.get("confinement")))
            bystander = node.out("cat /run/gpufleet-cgns-bystander.pid").strip()
            # nothing moved: the bystander is where it was, the namespace root delegates nothing, no child cgroup
            assert node.out("cat /proc/%s/cgroup" % bystander).strip() == "0::/gpufleet-cgns"
            assert node.out("cat %s/cgroup.subtree_control" % CGNS).strip() == ""
            assert node.out("find %s -mindepth 1 -type d" % CGNS).strip() == ""
            assert result["_status"] == "CHANGED", result.get("msg") or result
            confinement = result["confinement"]
            assert confinement["requested"] == "auto" and confinement["strategy"] == "watchdog", confinement
            assert "systemd" in confinement["skipped"] and "cgroupfs" in confinement["skipped"], confinement
            attempts = result["attempts"]
            assert len(attempts) >= 2 and attempts[0]["jobs"] == 8 and attempts[0]["oom"], attempts
            assert attempts[-1]["rc"] == 0, attempts[-1]
            # the watchdog acted before the kernel: no OOM kill in the container, none in the kernel log
            events = node.out("cat %s/memory.events" % CGNS)
            assert re.search(r"^oom_kill 0$", events, re.M), events
            assert oom_lines(node.kernel_lines_since(markers[name])) == []

        on_every_node(vms.nodes, check)
    finally:
        for node in vms.nodes.values():
            _cgns_teardown(node)
