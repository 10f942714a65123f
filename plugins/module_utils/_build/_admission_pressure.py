# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Freeze before kill (issue 35 item 1): the admission launcher's pure decision about the compiles that run when their
memory grows towards the budget. bench/replay.py imports it to model the cold build; the launcher
(plugins/module_utils/_build/_admission.py) takes it under the ledger's lock at every sample and signals the process
groups (_admission_node.signal_compile).

Each running entry: ``live`` (what its process tree holds now), ``rate`` (bytes a second it grew by since the last
sample, >= 0), ``frozen`` (when it was frozen, or absent), ``started``, ``seconds`` (learned, or None), ``bytes`` (its
reservation), ``learned``. The rule: when what runs, grown for ``horizon`` seconds at its rates, would cross the budget, freeze the
growing compile furthest from done - never the last one running - so that the others finish and free memory; a frozen
compile keeps its memory, so the trigger fires while the growth still fits. Where freezing cannot make room (one
compile left running, the frozen ones holding what it needs), evict the frozen compile that has done least: killed and
queued again by its launcher, never learned as an OOM. With room again, thaw in the order they were frozen, each while its ``allowance`` fits the budget. Only a
compile that alone needs more than the budget is left to the kernel, and then learned and refused."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# thaw while what runs, the thawed one grown by its ``allowance`` (at least its growth over the horizon), stays within
# the budget: the allowance is the hysteresis against a freeze at the next sample. A 90 % level (before 2026-12-05)
# left 12-24 GiB frozen and idle on 32 / 64 GiB cold, nothing admitted meanwhile: 1.30x warm, now 1.17x (docs/benchmarks.md)
THAW_LEVEL = 1.0


# the longest the freeze looks ahead, in base horizons: one launcher stopped a while (a debugger, a SIGSTOP of its
# own) must not make every compile look as if it grew for minutes
LONGEST_HORIZON = 5


def horizon(base, running, poll):
    """How far ahead the freeze looks: ``base`` (two samples and a poll, as configured), or longer where a running
    compile's last two samples came further apart (``gap``): on a starved machine (nvcc on every core, the launchers
    descheduled) the next decision comes no sooner than the samples do, and the trigger must still fire while the
    growth fits. At most ``LONGEST_HORIZON`` x ``base``."""
    gaps = [float(e.get("gap") or 0) for e in running if e.get("state", "running") == "running"]
    return min(max([base] + [2 * gap + poll for gap in gaps]), LONGEST_HORIZON * base)


def growth(entry, horizon):
    """What an unfrozen compile may add in ``horizon`` seconds at its rate: a learned one well under its reservation
    no more than up to it (its peak x margin: a ramp says nothing past it), an unlearned one - or a learned one near or
    past it, whose learning may be wrong (a cache hit learned as a peak) - at its rate. One started but not sampled
    yet (``fresh``) holds an unknown share of what the cgroup shows: up to its reservation."""
    grown = max(entry.get("rate") or 0, 0) * horizon
    if entry.get("fresh"):
        return max(int(entry.get("bytes") or 0) - int(entry.get("live") or 0), grown)
    if entry.get("learned") and entry["live"] < 0.9 * int(entry.get("bytes") or 0):
        grown = min(grown, int(entry["bytes"]) - entry["live"])   # near or past what was learned: the learning may be wrong
    return grown


def grown(active, horizon, margin=1.0):
    """What the unfrozen compiles ``active`` may add in ``horizon`` seconds, together. The learned ones are held to what
    admission admitted them at (``_admission_policy.load``): each up to its peak (its reservation / ``margin``), the
    margin once, for the largest - each grown to its whole reservation, a set admitted at the edge was over the budget at
    the very next decision, before any sample, and a fresh compile was frozen holding nothing (CI, 2026-12-05)."""
    total = sum(growth(e, horizon) for e in active)
    learned = [e for e in active if e.get("learned")]
    if not learned or margin <= 1:
        return total
    peaks = [int(e.get("bytes") or 0) / float(margin) for e in learned]
    admitted = sum(max(int(e["live"] or 0), peak) for e, peak in zip(learned, peaks)) + max(peaks) * (margin - 1)
    on_its_path = sum(int(e["live"] or 0) + growth(e, horizon) for e in learned)
    return total - max(on_its_path - admitted, 0)


def projected(entries, horizon, margin=1.0):
    """What ``entries`` hold in ``horizon`` seconds: what they hold now, the unfrozen ones grown at their rates."""
    return sum(e["live"] for e in entries) + grown([e for e in entries if not e.get("frozen")], horizon, margin)


def held_now(entry, now, horizon):
    """What a running compile holds now, estimated: its last sample grown at its rate since (bounded by ``horizon``),
    its reservation before its first sample. The cgroup's working set is read now and the samples are up to a second
    old; what the set holds beyond the compiles is the launchers' overhead, which must not count a compile's growth
    since its sample as well (counted twice, it froze and evicted compiles that fitted)."""
    if entry.get("fresh"):
        return max(int(entry.get("bytes") or 0), int(entry.get("live") or 0))
    since = min(max(now - float(entry.get("sampled") or now), 0.0), horizon)
    return int(entry.get("live") or 0) + (0 if entry.get("frozen") else int(max(entry.get("rate") or 0, 0) * since))


def remaining(entry, now):
    """Seconds a compile is expected to run still (learned time less its age; unlearned: unbounded)."""
    seconds = entry.get("seconds")
    return max(seconds - (now - entry["started"]), 0.0) if seconds else float("inf")


def furthest_from_done(entry, now):
    """Freeze order: the most time left first, then the youngest (the least work kept frozen)."""
    return (remaining(entry, now), entry["started"])


def allowance(entry, horizon):
    """What a frozen compile may grow by once thawed: its reservation (learned peak x margin, or an unlearned one's
    claim or live x margin) less what it holds, or the rate it grew at before it was frozen, whichever is more."""
    return max(int(entry.get("bytes") or 0) - int(entry["live"]), growth(entry, horizon), 0)


def decide(running, budget, horizon, now, overhead=0, margin=1.0):
    """``[(action, pid)]`` with action ``freeze``, ``evict`` or ``thaw`` for the running entries, so that what they
    hold - and ``overhead``, the launchers' own memory - stays within ``budget`` over the next ``horizon`` seconds;
    ``margin``: the one admission kept once (``grown``)."""
    active = [e for e in running if not e.get("frozen")]
    frozen = sorted((e for e in running if e.get("frozen")), key=lambda e: e["frozen"])
    held = sum(e["live"] for e in running)
    level = held + grown(active, horizon, margin) + overhead
    actions = []
    if level > budget:
        growing = sorted((e for e in active if growth(e, horizon) > 0), key=lambda e: furthest_from_done(e, now), reverse=True)
        for entry in growing:
            if level <= budget or len(active) <= 1:
                break
            active.remove(entry)
            frozen.append(entry)
            actions.append(("freeze", entry["pid"]))
            level = held + grown(active, horizon, margin) + overhead
        # freezing made no room (one compile runs, or none grows: a limit lowered under what they hold): the compiles
        # that did least free theirs and are queued again - the frozen first, never the last one running, never one
        # that holds nothing (frozen before its first sample: evicting it frees nothing and costs it its place)
        for entry in sorted(frozen, key=lambda e: e["started"], reverse=True) + sorted(active, key=lambda e: e["started"])[:0:-1]:
            if level <= budget or (entry in active and len(active) <= 1):
                break
            if entry in frozen and not entry["live"]:
                continue
            actions = [a for a in actions if a[1] != entry["pid"]] + [("evict", entry["pid"])]
            held -= entry["live"]
            if entry in active:
                active.remove(entry)
            level = held + grown(active, horizon, margin) + overhead
        return actions
    for entry in frozen:
        if not active or level + allowance(entry, horizon) <= THAW_LEVEL * budget:
            actions.append(("thaw", entry["pid"]))
            active.append(entry)
            level += allowance(entry, horizon)
    return actions


def admitting(running):
    """Whether new compiles may start: not while one is frozen (the frozen ones go first, as memory comes back)."""
    return not any(e.get("frozen") for e in running)
