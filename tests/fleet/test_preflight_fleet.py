# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/preflight.yml against the real sshd fleet, with real faults (issue: the seed's health check, done right).

node2: orphaned ninja and cc1plus left by a "forced restart"; node3: a 2 GiB memory cgroup while the
policy asks for 4 GiB available; node4: sshd stopped. Every other node must be ready.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib.util
import json
import os
import re

import pytest

from fleetlib import REPO_ROOT, TIMINGS, run_playbook

GIB = 1024 ** 3
PLAYBOOK = os.path.join(REPO_ROOT, "playbooks", "preflight.yml")


def connection_plugins():
    """ssh always; paramiko_ssh while ansible-core still ships it (deprecated in 2.19, removed in 2.21)."""
    try:
        has_paramiko = importlib.util.find_spec("ansible.plugins.connection.paramiko_ssh") is not None
    except ImportError:
        has_paramiko = False
    return ["ssh", pytest.param("paramiko_ssh", marks=pytest.mark.skipif(
        not has_paramiko, reason="this ansible-core no longer ships ansible.builtin.paramiko_ssh (removed in 2.21)"))]


def inject_faults(fleet):
    node2, node3, node4 = fleet["node2"], fleet["node3"], fleet["node4"]
    orphans = {"ninja": node2.spawn_orphan("ninja"), "cc1plus": node2.spawn_orphan("cc1plus")}
    node3.set_memory_limit(2 * GIB)
    node4.stop_sshd()
    return orphans


def read_report(directory):
    with open(os.path.join(directory, "preflight.json")) as handle:
        return json.load(handle)


@pytest.mark.parametrize("connection", connection_plugins())
def test_preflight_flags_exactly_the_faulty_nodes(fleet, tmp_path, connection):
    orphans = inject_faults(fleet)
    free_on_node3 = fleet["node3"].run("free -b | awk '/^Mem:/ {print $2}'", check=True).stdout.strip()

    result = run_playbook(PLAYBOOK, fleet.inventory_path, extra_vars={
        "preflight_min_available_memory": "4GiB",
        "preflight_profiles": [],
        "preflight_report_dir": str(tmp_path),
    }, args=["-c", connection])
    TIMINGS["preflight_playbook_%d_nodes_%s" % (len(fleet.nodes), connection)] = result.duration

    # Not-ready and unreachable nodes fail the run; the play itself must not crash.
    assert result.rc in (2, 4), result.stdout[-3000:] + result.stderr[-3000:]
    assert "Traceback" not in result.stdout + result.stderr
    report = read_report(str(tmp_path))
    hosts = report["hosts"]
    bad = {"node2", "node3", "node4"}
    for name in sorted(hosts):
        if name not in bad:
            assert hosts[name]["status"] == "ready", (name, hosts[name]["reason"])
    assert report["summary"] == {"ready": len(fleet.nodes) - 3, "not_ready": 2, "unreachable": 1, "total": len(fleet.nodes)}

    # node2: both orphans named, with their pids inside the node and the orphaned flag.
    node2 = hosts["node2"]
    assert node2["status"] == "not_ready" and node2["failed_checks"] == ["build_processes"]
    assert node2["build_processes"] == 2
    assert "2 build processes still running: " in node2["reason"]
    for name, pid in orphans.items():
        assert "%s (pid %d, orphaned, " % (name, pid) in node2["reason"]

    # node3: effective total is the 2 GiB cgroup although free there shows the host's memory.
    node3 = hosts["node3"]
    assert node3["status"] == "not_ready" and node3["failed_checks"] == ["available_memory"]
    assert node3["memory"]["effective_total_bytes"] == 2 * GIB
    assert node3["memory"]["limited_by"] == "cgroup"
    assert node3["memory"]["host_total_bytes"] == int(free_on_node3) > 4 * GIB
    assert "capped by the memory cgroup at 2.0Gi total" in node3["reason"]

    # node4: unreachable, and said so.
    assert hosts["node4"]["status"] == "unreachable"
    assert re.search(r"unreachable", hosts["node4"]["reason"])

    # The console summary says the same as the report.
    out = result.stdout
    assert "%d ready, 2 not ready, 1 unreachable (of %d)" % (len(fleet.nodes) - 3, len(fleet.nodes)) in out
    assert re.search(r"node2\s+not ready\s+.*build_processes: 2 build processes still running", out)
    assert re.search(r"node3\s+not ready\s+\S+ / 2\.0Gi \(cgroup; host", out)
    assert re.search(r"node4\s+unreachable", out)
    # ...and the drop step failed exactly the not-ready nodes with the reason.
    assert re.search(r"fatal: \[node2\]: FAILED!.*2 build processes still running", out)
    assert re.search(r"fatal: \[node3\]: FAILED!.*effective available memory", out)
    assert not re.search(r"fatal: \[node(1|5|6|7|8)\]", out)
