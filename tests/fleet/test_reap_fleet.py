# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/reap.yml on the fleet: stray builds ended, bystanders untouched, check mode harmless."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import shlex
import shutil

from fleetlib import REPO_ROOT, run_playbook

REAP = os.path.join(REPO_ROOT, "playbooks", "reap.yml")


def alive(node, pid):
    """Alive and not a zombie, seen from inside the node."""
    state = node.run("awk '/^State:/ {print $2}' /proc/%d/status 2>/dev/null" % pid).stdout.strip()
    return state not in ("", "Z", "X")


def spawn_stubborn(node, name):
    """A copy of bash named `name` that ignores SIGTERM, orphaned; its pid inside the node."""
    binary = os.path.join(node.fleet.bin_dir, name)
    if not os.path.exists(binary):
        shutil.copy2("/bin/bash", binary)
    script = 'trap "" TERM; while :; do sleep 0.2; done'
    cmd = "( %s -c %s </dev/null >/dev/null 2>&1 & echo $! )" % (shlex.quote(binary), shlex.quote(script))
    return int(node.run(cmd, check=True).stdout.strip())


def test_reap_ends_stray_builds_and_nothing_else(fleet, tmp_path):
    node = fleet["node1"]
    strays = dict((name, node.spawn_orphan(name)) for name in ("ninja", "cc1plus", "nvcc"))
    strays["nvlink"] = spawn_stubborn(node, "nvlink")
    bystander = node.spawn_orphan("sleep")
    neighbour = fleet["node2"].spawn_orphan("ninja")
    common = dict(reap_hosts="node1", preflight_hosts="node1", reap_grace=2, preflight_profiles=[],
                  preflight_min_available_memory="1GiB", preflight_report_dir=str(tmp_path))

    dry = run_playbook(REAP, fleet.inventory_path, extra_vars=common, args=["--check"])
    assert "would end 4 process(es)" in dry.stdout, dry.stdout[:5000]
    assert all(alive(node, pid) for pid in strays.values()), "check mode killed something"

    real = run_playbook(REAP, fleet.inventory_path, extra_vars=common)
    assert re.search(r"ended 4 process\(es\)", real.stdout), real.stdout[-3000:]
    assert "still running: 0" in real.stdout
    for name, pid in strays.items():
        assert not alive(node, pid), "%s (pid %d) survived the reap" % (name, pid)
    assert alive(node, bystander), "the bystander sleep was killed"
    assert alive(fleet["node2"], neighbour), "a process on another node was killed"
    # The stubborn one ignored SIGTERM and needed the SIGKILL after the grace period.
    assert re.search(r"changed: \[node1\]", real.stdout)
    # ...and the preflight that follows now finds node1 ready.
    assert re.search(r"node1\s+ready", real.stdout), real.stdout[-2000:]

    again = run_playbook(REAP, fleet.inventory_path, extra_vars=common)
    assert re.search(r"TASK \[End the selected build processes\] \**\nok: \[node1\]", again.stdout), again.stdout[:1500]
    assert "ended 0 process(es)" in again.stdout
    assert re.search(r"node1\s+: ok=\d+\s+changed=0", again.stdout), again.stdout[-1500:]


def test_reap_refuses_bad_input_and_kills_nothing(fleet, tmp_path):
    node = fleet["node1"]
    pid = node.spawn_orphan("ninja")
    for extra, option in ((dict(reap_grace=-1), "grace"), (dict(reap_patterns=["ninja("]), "patterns"),
                          (dict(reap_names=[], reap_patterns=[]), "selects nothing to reap")):
        result = run_playbook(REAP, fleet.inventory_path, extra_vars=dict(extra, reap_hosts="node1", preflight_hosts="node1",
                                                                          preflight_report_dir=str(tmp_path)))
        assert result.rc != 0
        assert option in result.stdout, (option, result.stdout[-1500:])
        assert "Traceback" not in result.stdout + result.stderr
        assert alive(node, pid)
