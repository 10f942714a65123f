# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function
__metaclass__ = type

"""The test fleet itself: every node is a separate host to ssh and Ansible, faults stay on their node,
and teardown leaves nothing behind."""

import os
import socket

import pytest

from fleetlib import (TIMINGS, Fleet, cgroup_pids, nspids, paramiko_connection_available, parse_adhoc_status,
                      processes_mentioning, read_text, run_adhoc)

GIB = 1024 ** 3
CGROUP_LIMIT_CMD = ("p=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ {print $3}' /proc/self/cgroup); "
                    "if [ -n \"$p\" ]; then cat /sys/fs/cgroup/memory$p/memory.limit_in_bytes; "
                    "else cat /sys/fs/cgroup$(awk -F: '$1 == 0 {print $3}' /proc/self/cgroup)/memory.max; fi")


def ping(fleet, *args):
    result = run_adhoc("all", fleet.inventory_path, "ansible.builtin.ping", args=args)
    return result, parse_adhoc_status(result.stdout)


def test_every_node_has_its_own_hostname_pid_namespace_and_cgroup(fleet):
    for node in fleet.nodes:
        result = node.run("hostname; cat /proc/1/comm; cat /proc/self/cgroup", check=True)
        hostname, init_comm, cgroup_text = result.stdout.split("\n", 2)
        assert hostname == node.name
        assert init_comm == "sshd"
        assert "/%s/%s" % (fleet.run_id, node.name) in cgroup_text
        # Host side: the node's init is sshd, pid 1 in its own namespace, inside the node cgroup.
        assert read_text("/proc/%d/comm" % node.sshd_pid).strip() == "sshd"
        assert nspids(node.sshd_pid)[-1] == 1
        assert node.sshd_pid in cgroup_pids(node.cgroup_dir)


def test_ansible_ping_reaches_every_node(fleet):
    result, statuses = ping(fleet)
    TIMINGS["ansible_ping_seconds_%d_nodes" % len(fleet.nodes)] = result.duration
    assert result.rc == 0, result.stdout + result.stderr
    assert statuses == dict((node.name, "SUCCESS") for node in fleet.nodes)


def test_a_stopped_node_is_unreachable_and_the_others_answer(fleet):
    down = fleet.nodes[-1]
    down.stop_sshd()
    assert not down.running
    result, statuses = ping(fleet)
    assert result.rc != 0
    expected = dict((node.name, "SUCCESS") for node in fleet.nodes)
    expected[down.name] = "UNREACHABLE"
    assert statuses == expected, result.stdout + result.stderr


def test_heal_brings_a_stopped_node_back_fresh(fleet):
    node = fleet.nodes[0]
    old_pid = node.sshd_pid
    node.stop_sshd()
    fleet.heal()
    assert node.sshd_pid not in (None, old_pid)
    assert node.run("hostname").stdout.strip() == node.name


def test_memory_limit_shows_in_the_node_cgroup_while_free_shows_the_host(fleet):
    node = fleet.nodes[0]
    node.set_memory_limit(2 * GIB)
    limit = node.run(CGROUP_LIMIT_CMD, check=True).stdout.strip()
    assert int(limit) == 2 * GIB
    host_total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert host_total > 2 * GIB, "this check needs a host with more than 2 GiB"
    free_lines = node.run("free -b", check=True).stdout.splitlines()
    mem_total = int([line for line in free_lines if line.startswith("Mem:")][0].split()[1])
    assert abs(mem_total - host_total) < 64 * 1024 ** 2
    # The other nodes keep no limit.
    assert int(fleet.nodes[1].run(CGROUP_LIMIT_CMD).stdout.strip()) > 2 * GIB


def test_an_orphan_is_reparented_to_the_node_init_and_invisible_elsewhere(fleet):
    node, other = fleet.nodes[0], fleet.nodes[1]
    pid = node.spawn_orphan("ninja", 300)
    status = node.run("cat /proc/%d/status" % pid, check=True).stdout
    assert "\nPPid:\t1\n" in status
    assert status.startswith("Name:\tninja\n")
    # Seen from the host it is in the node's cgroup, with the node-side pid as its innermost NSpid.
    host_pids = [p for p in cgroup_pids(node.cgroup_dir) if nspids(p)[-1:] == [pid]]
    assert len(host_pids) == 1
    assert read_text("/proc/%d/comm" % host_pids[0]).strip() == "ninja"
    # Another node's /proc has no such process.
    seen_elsewhere = other.run("grep -lx ninja /proc/[0-9]*/comm")
    assert seen_elsewhere.rc == 1 and seen_elsewhere.stdout == ""


def test_a_real_oom_kill_counts_in_the_node_cgroup_and_spares_sshd(fleet):
    node = fleet.nodes[0]
    assert node.oom_kill_count() == 0
    result = node.trigger_oom()
    assert result.rc == 137, result
    assert node.oom_kill_count() == 1
    assert node.run("hostname").stdout.strip() == node.name
    assert fleet.nodes[1].oom_kill_count() == 0


def test_tmpfs_and_stub_are_private_to_their_node(fleet):
    node, other = fleet.nodes[0], fleet.nodes[1]
    build_dir = os.path.join(fleet.dir, "build")
    node.mount_tmpfs(build_dir, "16m")
    assert node.run("stat -f -c %%T %s" % build_dir, check=True).stdout.strip() == "tmpfs"
    assert node.run("df -B1 --output=size %s | tail -1" % build_dir, check=True).stdout.strip() == str(16 * 1024 ** 2)
    assert other.run("stat -f -c %%T %s" % build_dir, check=True).stdout.strip() != "tmpfs"

    node.put_stub("/usr/local/sbin/nvidia-smi", "#!/bin/sh\necho stub-nvidia-smi \"$@\"\n")
    assert node.run("nvidia-smi -L", check=True).stdout.strip() == "stub-nvidia-smi -L"
    assert other.run("test -e /usr/local/sbin/nvidia-smi").rc == 1
    assert not os.path.exists("/usr/local/sbin/nvidia-smi")
    if os.path.exists("/usr/local/bin/nvcc"):
        assert node.run("command -v nvcc").stdout.strip() == "/usr/local/bin/nvcc"


def test_ping_over_paramiko_connection(fleet):
    available, why = paramiko_connection_available()
    if not available:
        pytest.skip(why)
    result, statuses = ping(fleet, "-c", "ansible.builtin.paramiko_ssh")
    assert result.rc == 0, result.stdout + result.stderr
    assert statuses == dict((node.name, "SUCCESS") for node in fleet.nodes)


def test_a_second_fleet_alive_at_once_takes_its_own_address_block(fleet, fresh_fleet):
    second = fresh_fleet(2)
    assert second.slot != fleet.slot
    assert second.nodes[0].address == "127.0.%d.11" % second.slot
    assert second.nodes[0].run("hostname").stdout.strip() == "node1"
    result, statuses = ping(second)
    assert result.rc == 0 and statuses == {"node1": "SUCCESS", "node2": "SUCCESS"}, result.stdout + result.stderr
    assert fleet.nodes[0].run("hostname").stdout.strip() == "node1"


@pytest.mark.usefixtures("fleet_capable")
def test_teardown_leaves_no_process_cgroup_mount_or_ssh_master():
    fleet = Fleet().start(2)
    try:
        result, statuses = ping(fleet)  # leaves ControlPersist masters behind
        assert result.rc == 0 and len(statuses) == 2, result.stdout + result.stderr
        assert any("[mux]" in cmd for _pid, cmd in processes_mentioning(fleet.dir))
        node = fleet.nodes[0]
        node.spawn_orphan("cc1plus", 300)
        node.mount_tmpfs(os.path.join(fleet.dir, "build"), "8m")
        node.put_stub("/usr/local/sbin/nvidia-smi", "#!/bin/sh\nsleep 300\n")
        node.set_memory_limit(GIB)
        config_paths = [n.config_path for n in fleet.nodes]
    finally:
        fleet.stop()
    TIMINGS["stop_seconds_2_nodes_after_faults"] = fleet.timings["stop_seconds"]

    assert processes_mentioning(fleet.run_id) == []
    for config in config_paths:
        assert processes_mentioning(config) == []
    assert not os.path.exists(fleet.cgroup_run_dir)
    assert not os.path.exists(fleet.dir)
    mountinfo = read_text("/proc/self/mountinfo")
    assert fleet.run_id not in mountinfo
    assert "/usr/local/sbin" not in [line.split()[4] for line in mountinfo.splitlines()]
    for node in fleet.nodes:
        with pytest.raises(OSError):
            socket.create_connection((node.address, node.port), timeout=2).close()
