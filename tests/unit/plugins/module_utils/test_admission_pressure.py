# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Freeze before kill (plugins/module_utils/_build/_admission_pressure.py, issue 35 item 1): what the launcher does to
the running compiles as their memory grows towards the budget - table-tested; the launcher doing it to real processes
in tests/build/test_admission_freeze.py."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _admission_policy as policy
from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _admission_pressure as pressure

GIB = 1024 ** 3


def run(pid, live, rate=0.0, started=0, frozen=None, seconds=None, reserved=None):
    return {"pid": pid, "live": int(live * GIB), "rate": rate * GIB, "started": started, "frozen": frozen,
            "seconds": seconds, "bytes": int((reserved or live) * GIB)}


@pytest.mark.parametrize("running, budget_gib, actions", [
    # room for the growth over the horizon (4 s): nothing to do
    ([run("a", 4, 0.5), run("b", 4, 0.5, started=5)], 16, []),
    # the growth would cross the budget: freeze the one furthest from done (unlearned: the youngest), not both
    ([run("a", 6, 0.5), run("b", 6, 0.5, started=5)], 15, [("freeze", "b")]),
    # learned times decide: "a" has 500 s left, "b" 10 s
    ([run("a", 6, 0.5, seconds=600), run("b", 6, 0.5, started=5, seconds=20)], 15, [("freeze", "a")]),
    # one that does not grow is never frozen (freezing it frees nothing)
    ([run("a", 6, 0.5), run("b", 6, 0.0, started=5), run("c", 2, 0.0, started=6)], 15.5, [("freeze", "a")]),
    # never the last one running: alone, a compile is left to run (or to the kernel, if it alone is too big)
    ([run("a", 14, 1.0)], 15, []),
    # freezing cannot make room (one runs, a frozen one holds what it needs): the frozen one is evicted
    ([run("a", 9, 0.5), run("b", 5, frozen=3, started=5)], 15, [("evict", "b")]),
    # a limit lowered under what they hold, none growing: the ones that did least are evicted, never the last
    ([run("a", 6), run("b", 6, started=10), run("c", 6, started=11)], 11, [("evict", "c"), ("evict", "b")]),
    # room again: thaw in the order they were frozen, each while what it may still grow by fits the budget
    ([run("a", 3), run("b", 4, frozen=3, reserved=6), run("c", 4, frozen=2, reserved=6)], 14, [("thaw", "c")]),
    ([run("a", 3), run("b", 4, frozen=3, reserved=6), run("c", 4, frozen=2, reserved=6)], 16, [("thaw", "c"), ("thaw", "b")]),
    ([run("a", 1), run("b", 2, frozen=3, reserved=3), run("c", 2, frozen=2, reserved=3)], 16, [("thaw", "c"), ("thaw", "b")]),
    # nothing else runs: the oldest frozen thaws whatever it may grow by (never all frozen)
    ([run("b", 4, frozen=3, reserved=40), run("c", 4, frozen=2, reserved=40)], 16, [("thaw", "c")]),
])
def test_decide(running, budget_gib, actions):
    assert pressure.decide(running, budget_gib * GIB, 4.0, 20.0) == actions


def test_the_launchers_overhead_counts_as_held():
    assert pressure.decide([run("a", 5, 0.5), run("b", 5, 0.5, started=5)], int(14.5 * GIB), 4.0, 20.0) == []
    assert pressure.decide([run("a", 5, 0.5), run("b", 5, 0.5, started=5)], 13 * GIB, 4.0, 20.0, overhead=GIB) == [
        ("freeze", "b")]


def test_nothing_starts_while_a_compile_is_frozen():
    assert pressure.admitting([run("a", 1), run("b", 1)])
    assert not pressure.admitting([run("a", 1), run("b", 1, frozen=3)])


def test_a_learned_compile_grows_at_most_to_its_reservation():
    """A ramp measured over one sample (600 MiB/s) says nothing past a learned peak: a compile learned at 207 MiB
    (reservation) holding 160 does not project to 430 and freeze itself beside a 33 MiB one in a 400 MiB budget."""
    other = dict(run("other", 160 / 1024.0, 600 / 1024.0, started=5, reserved=207 / 1024.0), learned=True)
    assert pressure.decide([run("two", 33 / 1024.0), other], 400 * 1024 ** 2, 0.45, 6.0) == []
    assert pressure.decide([run("two", 33 / 1024.0), dict(other, learned=False)], 400 * 1024 ** 2, 0.45, 6.0) == [
        ("freeze", "other")]


def test_a_learned_compile_past_what_was_learned_grows_at_its_rate():
    """Learned small (a cache hit learned as a peak: reserved 230 MiB), holding 220 and growing: its learning is wrong, its growth
    is projected as measured, and it is frozen before it takes the budget."""
    wrong = dict(run("wrong", 220 / 1024.0, 1.0, started=5, reserved=230 / 1024.0), learned=True)
    assert pressure.decide([run("other", 0.5), wrong], GIB, 1.0, 6.0) == [("freeze", "wrong")]


def test_a_compile_not_sampled_yet_counts_as_its_reservation():
    """Started, not sampled yet (``fresh``, live 0, rate 0): it holds an unknown share of what the cgroup shows, up to
    its reservation - counted as that, so neither the freeze nor the overhead (the working set less the samples) miss it."""
    fresh = dict(run("new", 0, started=19, reserved=3), fresh=True)
    assert pressure.growth(fresh, 4.0) == 3 * GIB
    assert pressure.held_now(fresh, 20.0, 4.0) == 3 * GIB
    assert pressure.decide([run("a", 6), fresh], 8 * GIB, 4.0, 20.0) == [("freeze", "new")]
    assert pressure.decide([run("a", 6), dict(fresh, fresh=False)], 8 * GIB, 4.0, 20.0) == []


def test_a_set_admitted_at_the_edge_is_not_frozen_before_its_first_sample():
    """CI, 2026-12-05: the seeded stand-in (heavy 320 MiB, lights 40 MiB, margin 1.15) in a 484 MiB budget. Admission
    counts the margin once (``_admission_policy.load``); the freeze counted each fresh compile at its whole reservation,
    so the set admitted at the edge was over the budget at the next decision: a compile frozen holding nothing, then
    evicted. One rule now: what admission admitted, the freeze does not freeze."""
    margin, mib = 1.15, 1024 ** 2

    def fresh(pid, peak_mib):
        return {"pid": pid, "live": 0, "rate": 0, "started": 19, "frozen": None, "seconds": peak_mib / 10, "learned": True,
                "fresh": True, "bytes": int(peak_mib * mib * margin)}

    admitted = [fresh("heavy", 320), fresh("light1", 40), fresh("light2", 40), fresh("light3", 40)]
    budget = int(policy.load(admitted, margin)) + 1
    assert budget < sum(e["bytes"] for e in admitted), "the edge: each reservation whole is over the budget"
    assert pressure.decide(admitted, budget, 4.0, 20.0, margin=margin) == []
    assert pressure.decide(admitted, budget - 2 * mib, 4.0, 20.0, margin=margin) == [("freeze", "heavy")], "over it"
    # sampled on their learned path (each under its peak), the set still projects to no more than it was admitted at
    sampled = [dict(e, fresh=False, live=e["bytes"] // 2, rate=mib * 100) for e in admitted]
    assert pressure.projected(sampled, 4.0, margin) <= policy.load(admitted, margin) + 1
    # one grown past its peak (its learning wrong) is projected at its rate, beyond what was admitted
    past = [dict(sampled[0], live=int(330 * mib), rate=mib * 50)] + sampled[1:]
    assert pressure.projected(past, 4.0, margin) > policy.load(admitted, margin)
    assert pressure.decide(admitted, budget, 4.0, 20.0) == [("freeze", "heavy")], "margin 1: every reservation whole"


@pytest.mark.parametrize("entry, now, held_gib", [
    # sampled 1 s ago at 2 GiB, growing 0.5 GiB/s: 2.5 GiB now (the cgroup shows that growth: not the launchers')
    (dict(run("a", 2, 0.5), sampled=19.0), 20.0, 2.5),
    # a stale sample grows no further than the horizon (4 s)
    (dict(run("a", 2, 0.5), sampled=10.0), 20.0, 4.0),
    # a frozen compile does not grow
    (dict(run("a", 2, 0.5, frozen=15), sampled=19.0), 20.0, 2.0),
    # no sample time (an older launcher's entry): what it held at its sample
    (run("a", 2, 0.5), 20.0, 2.0),
])
def test_what_a_compile_holds_now(entry, now, held_gib):
    assert pressure.held_now(entry, now, 4.0) == int(held_gib * GIB)


def test_a_frozen_compile_holding_nothing_is_not_evicted():
    """One compile alone projects past the budget (its own growth): the frozen one beside it holds nothing yet -
    evicting it would free nothing and cost it its place (cold builds evicted light compiles before their first sample)."""
    empty = dict(run("new", 0, started=19, frozen=19.5, reserved=0.2))
    assert pressure.decide([run("heavy", 0.2, 0.2), empty], GIB, 4.0, 20.0) == []
    assert pressure.decide([run("heavy", 0.2, 0.2), dict(empty, live=GIB // 8)], GIB, 4.0, 20.0) == [("evict", "new")]


@pytest.mark.parametrize("gaps, expected", [
    ([], 2.5),                          # nothing runs: the configured two samples and a poll
    ([1.0, 1.02], 2.54),                # samples about as asked: about the same
    ([1.0, 1.6], 3.7),                  # one launcher's samples came 1.6 s apart: the next decision may be that late
    ([30.0], 12.5),                     # one stopped a while: at most five configured horizons
])
def test_the_freeze_looks_as_far_ahead_as_the_samples_really_come(gaps, expected):
    running = [{"state": "running", "gap": gap} for gap in gaps] + [{"state": "waiting", "gap": 9.0}]
    assert pressure.horizon(2.5, running, 0.5) == pytest.approx(expected)
