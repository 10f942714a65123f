# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""build_processes reaping under systemd: an orphaned `ninja` re-parented to systemd is reaped, nothing else."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

SPAWN = (
    # an orphan: a copy of /bin/sleep named ninja whose parent exited, so systemd (pid 1) adopted it
    "cp /bin/sleep /tmp/ninja && setsid sh -c '/tmp/ninja 600 >/dev/null 2>&1 & echo $! > /tmp/ninja.pid' && "
    # bystanders: a plain sleep, and a process that only mentions ninja in its command line
    "setsid sh -c 'sleep 601 >/dev/null 2>&1 & echo $! > /tmp/bystander.pid' && "
    "setsid sh -c 'python3 -c \"import time; time.sleep(602)\" ninja cmake >/dev/null 2>&1 & echo $! > /tmp/mentions.pid' && "
    "sleep 1 && cat /tmp/ninja.pid /tmp/bystander.pid /tmp/mentions.pid"
)


def alive(node, pid):
    return node.run("test -d /proc/%d && ! grep -q '^State:.*Z' /proc/%d/status" % (pid, pid)).returncode == 0


def test_orphaned_ninja_is_reaped_and_nothing_else(vms):
    pids = {}
    for name, node in sorted(vms.nodes.items()):
        ninja, bystander, mentions = [int(p) for p in node.out(SPAWN).split()]
        pids[name] = (ninja, bystander, mentions)
        assert node.out("cut -d' ' -f4 /proc/%d/stat" % ninja).strip() == "1", "%s: ninja is not an orphan" % name
    try:
        seen = vms.adhoc("all", "gpufleet.preflight.build_processes", {"orphaned_only": True})
        for name in sorted(vms.nodes):
            ninja = pids[name][0]
            found = [p for p in seen[name]["processes"] if p["pid"] == ninja]
            assert found and found[0]["name"] == "ninja" and found[0]["orphaned"] is True, (name, seen[name])
            assert found[0]["ppid"] == 1, (name, found)
            assert not [p for p in seen[name]["processes"] if p["pid"] in pids[name][1:]], (name, seen[name])

        reaped = vms.adhoc("all", "gpufleet.preflight.build_processes",
                           {"state": "absent", "orphaned_only": True, "grace": 2})
        for name, node in sorted(vms.nodes.items()):
            ninja, bystander, mentions = pids[name]
            result = reaped[name]
            assert result["_status"] == "CHANGED", (name, result)
            assert [k["pid"] for k in result["killed"]] == [ninja], (name, result["killed"])
            assert result["killed"][0]["how"] == "term", (name, result["killed"])
            assert not alive(node, ninja), "%s: ninja %d still alive" % (name, ninja)
            assert alive(node, bystander), "%s: the plain sleep was touched" % name
            assert alive(node, mentions), "%s: the process that only mentions ninja was touched" % name
            # systemd, journald, sshd and the session are all still there
            assert node.out("systemctl is-active ssh.service systemd-journald.service").split() == ["active", "active"]
        after = vms.adhoc("all", "gpufleet.preflight.build_processes", {"orphaned_only": True})
        for name in sorted(vms.nodes):
            assert after[name]["count"] == 0, (name, after[name]["processes"])
    finally:
        for name, node in sorted(vms.nodes.items()):
            node.run("kill -9 %s 2>/dev/null; rm -f /tmp/ninja /tmp/*.pid" % " ".join(str(p) for p in pids.get(name, ())))
