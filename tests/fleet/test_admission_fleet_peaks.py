# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Cold is safe across the fleet (issue 29 item 2): peaks node1 learned seed node2, which never built the tree.

On a 3-node test fleet, the mixed-memory stand-in (two 300 MiB sources, ten light ones) built by guarded_build's
admission option alone at -j4 under a 500 MiB cgroup, through sgl_kernel's fleet_peaks_seed.yml/fleet_peaks_collect.yml:
- node1 builds it cold and sends its peaks.json to the controller, which merges it into the fleet's peaks.json;
- node2, which never built it, gets that file before its build: every compile is scheduled from learned peaks (its
  ledger log says ``learned`` for all 12, a heavy one first) with 0 OOM kills;
- node3, taking no seed, builds it cold: every source is unknown, claims its default and runs wide, frozen or evicted
  when the growth would cross the budget - the comparison;
- --check changes nothing on the controller.
Seconds of each (seeded, cold, warm) are in docs/benchmarks.md "Seeded cold builds across the fleet"."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import sys

from fleetlib import REPO_ROOT, run_playbook

PLAYBOOK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "playbooks", "admission_fleet_peaks.yml")
MIXED = os.path.join(REPO_ROOT, "tests", "projects", "standin_mixed_memory")
MIB = 1024 ** 2


def build(fleet, work, compiler, hosts, label, exchange=True, args=()):
    result = run_playbook(PLAYBOOK, fleet.inventory_path, timeout=600, args=("--limit", hosts) + tuple(args),
                          extra_vars={"work": work, "project": MIXED, "compiler": compiler, "label": label,
                                      "exchange": exchange})
    assert result.rc == 0, (result.stdout + result.stderr)[-4000:]
    return result


def outcome(work, host, label):
    """(guarded_build's result, the ledger log's start rows of the 12 sources) of one node's build."""
    folder = os.path.join(work, host, label)
    with open(os.path.join(folder, "result.json")) as handle:
        result = json.load(handle)
    with open(os.path.join(folder, "guarded", "gpufleet-admission", "ledger.log")) as handle:
        starts = [row for row in map(json.loads, handle) if row["event"] == "start" and row["source"].startswith("src/")]
    return result, starts


def events(work, host, label, kind):
    with open(os.path.join(work, host, label, "guarded", "gpufleet-admission", "ledger.log")) as handle:
        return [row for row in map(json.loads, handle) if row["event"] == kind]


def oom_kills(result):
    return sum(attempt.get("oom_kills") or 0 for attempt in result.get("attempts") or [])


def test_peaks_learned_on_node1_seed_node2(fresh_fleet, tmp_path):
    fleet = fresh_fleet(3)
    work = str(tmp_path)
    compiler = tmp_path / "cc-hog"
    compiler.write_text("#!/bin/sh\nexec %s %s cc \"$@\"\n" % (sys.executable, os.path.join(MIXED, "hogcc.py")))
    compiler.chmod(0o755)
    merged = tmp_path / "controller" / "peaks.json"

    build(fleet, work, str(compiler), "node1", "learn")
    result, starts = outcome(work, "node1", "learn")
    assert not result.get("failed") and oom_kills(result) == 0, result.get("msg")
    # cold runs wide: a compile the freeze evicted starts again (a start more), every source once at least
    assert len(set(row["source"] for row in starts)) == 12 and not any(row["learned"] for row in starts), starts
    assert (tmp_path / "controller" / "nodes" / "node1.json").is_file()
    fleet_peaks = json.loads(merged.read_text())
    assert fleet_peaks["src/a_heavy_1.c"]["peak_bytes"] >= 250 * MIB, fleet_peaks

    before = merged.read_text()
    build(fleet, work, str(compiler), "node2", "checked", args=("--check",))
    assert merged.read_text() == before and not (tmp_path / "node2" / "admission" / "fleet-peaks.json").exists()

    build(fleet, work, str(compiler), "node2", "seeded")
    build(fleet, work, str(compiler), "node3", "cold", exchange=False)
    result, starts = outcome(work, "node2", "seeded")
    assert not result.get("failed") and oom_kills(result) == 0, result.get("msg")
    # node2 built from node1's peaks, then kept the table it taught in turn (its next build's seed)
    assert json.loads((tmp_path / "node2" / "admission" / "fleet-peaks.json").read_text()) == json.loads(merged.read_text())
    assert set(fleet_peaks) <= set(json.loads(merged.read_text()))
    # the seeded peaks were used: every source scheduled as learned, a heavy long one first, a light one beside it
    assert len(set(row["source"] for row in starts)) == 12 and all(row["learned"] for row in starts), starts
    # admission and the freeze agree on what the seeded compiles hold: none stopped to make room (the working set read
    # now less samples a second old once counted their growth twice, as overhead, and evicted compiles that fitted)
    assert not events(work, "node2", "seeded", "evict"), events(work, "node2", "seeded", "evict")
    # among those that had arrived: launchers reach the queue seconds apart on a loaded 2-core machine
    assert any(row["source"].startswith("src/a_heavy_") for row in starts[:3]), starts
    cold, cold_starts = outcome(work, "node3", "cold")
    assert not cold.get("failed") and len(set(row["source"] for row in cold_starts)) == 12
    assert not any(row["learned"] for row in cold_starts)
    # node2 sent its own peaks back: the fleet's table now has both nodes'
    assert (tmp_path / "controller" / "nodes" / "node2.json").is_file()
    build(fleet, work, str(compiler), "node1", "warm")   # node1 again, from its own peaks: the warm comparison
    warm, warm_starts = outcome(work, "node1", "warm")
    assert not warm.get("failed") and oom_kills(warm) == 0 and all(row["learned"] for row in warm_starts)
    print("seconds: cold learn %.1f seeded %.1f cold %.1f warm %.1f; OOM kills %d %d %d %d" % tuple(
        [one.get("duration") or -1 for one in (outcome(work, "node1", "learn")[0], result, cold, warm)]
        + [oom_kills(one) for one in (outcome(work, "node1", "learn")[0], result, cold, warm)]))
