# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A 500-node fleet's readiness results made of the results a real 8-node run registered (recorded/, written by
tests/fleet/test_reports_fleet.py with GPUFLEET_RECORD=1): every fault of that run mixed in, in fixed proportions
and a fixed order, the healthy nodes' available memory spread so the fleet chart has a shape.

Used by tests/host/test_html_chromium.py and bench/reports_500.py; ``python reports500.py OUT.json [N]`` writes them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RECORDED = os.path.join(HERE, "recorded", "preflight_8_nodes.json")
PLAYBOOK = os.path.join(HERE, "fleet_reports_recorded.yml")
# what each recorded node is (tests/fleet/test_reports_fleet.py) and how many of 500 are like it
KINDS = (("node1", "healthy", 436), ("node3", "gpu-less", 12), ("node4", "wedged gpu", 8),
         ("node5", "orphaned build process", 14), ("node6", "oom", 10), ("node7", "memory-limited", 12),
         ("node8", "unreachable", 8))


def _human(value):
    units = ("B", "Ki", "Mi", "Gi", "Ti")
    value = float(value)
    for unit in units:
        if value < 1024 or unit == units[-1]:
            return ("%.1f%s" % (value, unit)) if value < 10 and unit != "B" else ("%d%s" % (value, unit))
        value /= 1024.0


def recorded():
    with open(RECORDED) as handle:
        return json.load(handle)


def fleet_results(count=500, seed=500):
    """``{nodeNNN: registered result}`` for ``count`` nodes (the proportions of KINDS, scaled)."""
    source = recorded()
    total = sum(n for _name, _kind, n in KINDS)
    plan = []
    for name, _kind, share in KINDS[1:]:
        plan += [name] * max(1, int(round(share * count / float(total))))
    plan = (plan + [KINDS[0][0]] * count)[:count]
    rng = random.Random(seed)
    rng.shuffle(plan)
    results = {}
    for index, name in enumerate(plan):
        result = copy.deepcopy(source[name])
        if name == "node1" and result:
            effective = result["ansible_facts"]["gpufleet_memory"]["effective"]
            available = int(effective["total_bytes"] * rng.uniform(0.25, 0.97))
            effective.update(available_bytes=available, available_human=_human(available))
        results["node%03d" % (index + 1)] = result
    return results


def kinds_of(results):
    """``{kind: [node names]}`` of ``fleet_results``: which faults the fleet holds."""
    source = recorded()
    by_kind = {}
    for node, result in sorted(results.items()):
        for name, kind, _share in KINDS:
            if result == source[name] or (name == "node1" and result and result.get("ready")):
                by_kind.setdefault(kind, []).append(node)
                break
    return by_kind


if __name__ == "__main__":
    with open(sys.argv[1], "w") as out:
        json.dump(fleet_results(int(sys.argv[2]) if len(sys.argv) > 2 else 500), out)
