# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One fleet decision over AWX job slices (issue 38 item 5). Pure.

Each slice job runs the preflight on its share of the inventory and decides its own gate; with AWX's ``awx_job_id``
(every slice job has its own) the report entry point also publishes the slice's verdicts under a key of its own,
``gpufleet_preflight_slice_<job id>``, so AWX's merge of the slices' artifacts (one dict, key by key) keeps every
slice. ``merge`` takes those entries and decides once, over the whole fleet, with the same ``_gate.gate``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.preflight.plugins.plugin_utils import _gate

PREFIX = "gpufleet_preflight_slice_"


def slices_of(variables):
    """The slice entries among a dict of variables (or AWX artifacts): {slice id: entry}; malformed ones named."""
    found, bad = {}, []
    for key in sorted(variables or {}):
        if not str(key).startswith(PREFIX):
            continue
        entry = variables[key]
        if (not isinstance(entry, dict) or not isinstance(entry.get("ready"), list)
                or not isinstance(entry.get("not_ready"), list)):
            bad.append(key)
            continue
        found[key[len(PREFIX):]] = entry
    return found, bad


def merge(variables, max_not_ready=None, stop_when_none_ready=True, expected_slices=None):
    """dict(gate, ready, not_ready, total, slices, malformed) -- the fleet's decision over every slice.

    A host in several slices (an inventory sliced twice) is ready only when every slice says so. A malformed
    entry, no slice at all, or fewer slices than ``expected_slices`` (a slice that failed before publishing)
    stops the run: the decision cannot be made for hosts nobody reported.
    """
    slices, bad = slices_of(variables)
    status = {}
    for name in sorted(slices):
        for host in slices[name]["ready"]:
            status.setdefault(str(host), "ready")
        for host in slices[name]["not_ready"]:
            status[str(host)] = "not_ready"
    not_ready = sorted(host for host, state in status.items() if state != "ready")
    report = dict(summary=dict(total=len(status), not_ready=len(not_ready), unreachable=0))
    decision = _gate.gate(report, max_not_ready, stop_when_none_ready)
    missing = None
    if expected_slices is not None and len(slices) < int(expected_slices):
        missing = "%d of %d slices published their verdicts" % (len(slices), int(expected_slices))
    if bad or not slices or missing:
        why = ("malformed slice entries: %s" % ", ".join(bad) if bad else missing if missing
               else "no %s* entry: no slice published its verdicts (awx_job_id unset?)" % PREFIX)
        decision = dict(decision, decision="stop", abort=True, reason=why)
    return dict(gate=decision, ready=sorted(h for h, s in status.items() if s == "ready"), not_ready=not_ready,
                total=len(status), slices=sorted(slices), malformed=bad)
