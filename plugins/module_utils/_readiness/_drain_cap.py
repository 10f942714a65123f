# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The drain circuit breaker: at most N nodes, or x % of the partition, drained by this collection within a window.

Counted from Slurm itself -- one ``sinfo`` listing of every node (``%N|%P|%T|%H|%E``): the nodes sharing a partition
with this one that are drained with a reason starting with our prefix, set (sinfo's ``%H``) within the window -- so
every path that drains (the node-local health check on each node, the playbook's ``slurm_node`` on every host of
the run) holds the same cap with no state of its own. A person's drain copying our prefix counts too: the breaker
errs towards draining fewer nodes, never more.

Two nodes may decide at the same moment, so the cap is checked twice: before the drain (the drains held now leave
room) and after it (sinfo again: every drain of ours in the window, this one included, within the cap). A node
that finds itself over the cap after its own drain resumes that drain at once (it is the very one it set). Of
several nodes draining at once, the last to read back sees all of them, so at most the cap stay drained; when
they all read back after all have landed, all undo, and the next runs fill the room (fewer drains, never more).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

LIST_FORMAT = "%N|%P|%T|%H|%E"


def listing_argv(sinfo):
    """Every node, one line per node and partition: name, partition, state, reason time, reason."""
    return [sinfo, "-h", "-N", "-o", LIST_FORMAT]


def parse_listing(text):
    """sinfo ``-h -N -o '%N|%P|%T|%H|%E'`` -> {node: dict(partitions, state, time, reason)}.

    A node in several partitions has one line per partition (its partitions are merged); the default partition's
    ``*`` is dropped; ``none`` / ``Unknown`` placeholders become empty; a line of another shape is skipped.
    """
    nodes = {}
    for line in (text or "").splitlines():
        parts = line.strip().split("|", 4)
        if len(parts) != 5 or not parts[0]:
            continue
        name, partition, state, when, reason = [part.strip() for part in parts]
        entry = nodes.setdefault(name, dict(partitions=set(), state=state.lower(),
                                            time="" if when in ("Unknown", "N/A") else when,
                                            reason="" if reason in ("none", "(null)") else reason))
        if partition:
            entry["partitions"].add(partition.rstrip("*"))
    return nodes


def members(listing, node):
    """The nodes that share a partition with ``node`` (itself included), sorted; every node when it is unlisted."""
    mine = (listing.get(node) or {}).get("partitions") or set()
    if not mine:
        return sorted(listing)
    return sorted(name for name, entry in listing.items() if entry["partitions"] & mine)


def cap(total, max_nodes, percent):
    """How many of ``total`` nodes the collection may hold drained: the smaller of ``max_nodes`` and ``percent`` of
    ``total`` (rounded down, at least 1, so a fleet of 8 can still drain a node); None when both are unset."""
    limits = []
    if max_nodes is not None:
        limits.append(int(max_nodes))
    if percent is not None:
        limits.append(max(1, int(total * float(percent) / 100.0)))
    return min(limits) if limits else None


def ours(listing, names, prefix, now, window, slurm):
    """The nodes among ``names`` drained with our reason prefix within ``window`` seconds before ``now`` (0: any
    age), sorted. ``slurm``: ``is_drained(state)`` and ``epoch(sinfo_time) -> seconds or None`` (``_slurm``'s); a
    drain whose time cannot be read counts (the safe side)."""
    is_drained, epoch = slurm
    found = []
    for name in names:
        entry = listing.get(name)
        if not entry or not is_drained(entry["state"]) or not entry["reason"].startswith(prefix + " "):
            continue
        when = epoch(entry["time"])
        if window and when is not None and when < now - window:
            continue
        found.append(name)
    return sorted(found)


def judge(listing, node, prefix, limits, slurm, now=None, after=False):
    """dict(allowed, cap, total, drained, message) for one node's new drain -- pure, table-tested.

    ``limits``: dict(max_nodes, percent, window). Before the drain (``after=False``) the drains held now, other than
    this node's, must leave room; after it (``after=True``) every drain of ours in the window, this one included,
    must be within the cap. ``allowed`` is True when no cap is set. ``slurm``: (is_drained, epoch), see :func:`ours`.
    """
    now = time.time() if now is None else now
    names = members(listing, node)
    limit = cap(len(names), limits.get("max_nodes"), limits.get("percent"))
    held = ours(listing, names, prefix, now, limits.get("window") or 0, slurm)
    others = [name for name in held if name != node]
    count = len(held) if after else len(others) + 1
    result = dict(allowed=limit is None or count <= limit, cap=limit, total=len(names), drained=others)
    if result["allowed"]:
        result["message"] = ""
        return result
    window = limits.get("window") or 0
    result["message"] = ("%s: not ready, NOT drained: the drain circuit breaker holds: %d of at most %s of the %d nodes "
                         "of its partitions drained by %s %s (%s)%s; the fleet may be failing as one (a policy, a driver "
                         "update, the controller): see the report before raising preflight_drain_cap_nodes/_percent"
                         % (node, len(others), limit, len(names), prefix,
                            "within %d s" % window if window else "now", ", ".join(others[:8]) + (
                                ", ..." if len(others) > 8 else ""),
                            "; our own drain was resumed at once" if after else ""))
    return result
