# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""bench/replay_cold.py: the product's own cold path (pick_next's claims, _admission_pressure.decide's freeze, thaw and
evict at the launcher's samples) in the replay, on builds small enough to work out by hand, then on the real tree's
record (issue 35's "Done when": fully cold <= 1.3x warm with 0 OOM kills on every shape)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import random
import sys

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO, "bench"))
import replay  # noqa: E402 pylint: disable=wrong-import-position
import replay_cold  # noqa: E402 pylint: disable=wrong-import-position
import replay_product  # noqa: E402 pylint: disable=wrong-import-position

GIB = replay.GIB


def job(name, seconds, peak_gib, order=0):
    return replay.Job(name, seconds, peak_gib * GIB, order)


def events(sim, name=None):
    return [(round(t, 3), kind) + (() if name else (source,)) for t, kind, source in sim.trace
            if name is None or source == name]


def test_a_freeze_at_a_sample_lets_the_other_finish_then_a_thaw():
    # 2 cores / 16 GiB (budget 15.5), both unknown: each claims min(5 GiB, 15.5 / 2) and both start. a grows 0.24 GiB/s
    # to 12 GiB, b 0.2 GiB/s to 6 GiB (done growing at 30 s). Sampled at 38 s: 9.12 + 6 + a's 2.5 s of growth = 15.72
    # > 15.5 (at 37 s: 15.48): a, the only one growing, is frozen (unfrozen, it would reach 12 + 6 = 18 GiB: the OOM
    # killer). b ends at 60 s, a thaws and ends 22 s late.
    jobs = [job("a", 100, 12, 0), job("b", 60, 6, 1)]
    sim = replay_cold.ColdSim(jobs, 2, 16, {})
    result = sim.run()
    assert events(sim, "a") == [(0, "start"), (38, "freeze"), (60, "thaw"), (122, "end")]
    assert result["oom_kills"] == 0 and result["makespan"] == pytest.approx(122)
    assert (result["freezes"], result["thaws"], result["evictions"]) == (1, 1, 0)


def test_decisions_come_only_at_samples_and_a_late_one_shows_as_an_oom_kill():
    # the same build with a launcher that samples every 1,000 s: nothing is frozen and the kernel kills a
    jobs = [job("a", 100, 12, 0), job("b", 60, 6, 1)]
    sim = replay_cold.ColdSim(jobs, 2, 16, {}, sample=1000.0)
    result = sim.run()
    assert result["oom_kills"] >= 1 and result["freezes"] == 0
    assert events(sim)[2] == (pytest.approx(10 / 0.24, abs=1e-3), "oom", "a")   # 0.24 t + 6 GiB = 16 GiB


def test_when_freezing_cannot_make_room_the_frozen_one_is_evicted_and_runs_first_and_alone():
    # two unknown 12 GiB compiles: at 30 s (7.2 + 7.2 + 2 x 0.6) a is frozen; b alone still grows towards the budget
    # with a's 7.2 GiB held (at 33 s: 7.2 + 7.92 + 0.6 > 15.5): a is evicted, its 30 s lost, and it runs again alone
    jobs = [job("a", 100, 12, 0), job("b", 100, 12, 1)]
    sim = replay_cold.ColdSim(jobs, 2, 16, {})
    result = sim.run()
    assert events(sim, "a") == [(0, "start"), (30, "freeze"), (33, "evict"), (100, "start"), (200, "end")]
    assert result["oom_kills"] == 0 and result["evictions"] == 1 and result["lost_seconds"] == pytest.approx(30)


def test_the_live_budget_is_read_at_each_decision():
    # 16 GiB, lowered to 10 GiB at 10 s (2.4 GiB held): the decisions from then on use the 9.5 GiB budget, so two
    # unknown 6 GiB compiles never meet the OOM killer: a frozen at 38 s, evicted at 39 s, run alone after b
    jobs = [job("a", 100, 6, 0), job("b", 100, 6, 1)]
    sim = replay_cold.ColdSim(jobs, 2, 16, {}, limits=[(10, 10)])
    result = sim.run()
    assert result["oom_kills"] == 0 and events(sim, "a")[1:3] == [(38, "freeze"), (39, "evict")]
    # a limit cut under what the compiles already hold is the kernel's to act on, at once: no decision comes first
    cut = replay_cold.ColdSim(jobs, 2, 16, {}, limits=[(40, 8)]).run()
    assert cut["oom_kills"] == 1


# -- the real tree ---------------------------------------------------------------------------------------------------
# What holds now (2026-12-04, docs/benchmarks.md "Cold path modelled (issue 35)"), per shape: cold / warm through the
# product's path, and warm and seeded against the bare bound.
# (2026-12-05: 32 / 64 GiB 1.17x since a frozen compile thaws while its allowance fits the budget, 1.30x at 90 %)
# (2026-12-05, "Big rocks first while the memory binds": cold unchanged to the second, warm 1,140 -> 1,125 s, so 1.18x)
COLD_OVER_WARM = {(2, 16): 1.01, (32, 64): 1.19, (112, 449): 1.0}
# the launcher's measured rate (2026-12-05: the lower of its window's and its last interval's) on 32 / 64 GiB: 1.17x
# (1.32x with the 90 % thaw level)
COLD_MEASURED_OVER_WARM = {(2, 16): 1.01, (32, 64): 1.19, (112, 449): 1.0}
WARM_OVER_BOUND = {(2, 16): 1.14, (32, 64): 1.06, (112, 449): 1.0}
# issue 35's 1.15x on every shape since big rocks go first while the memory binds and EASY backfills while the CPUs
# bind (1.14x / 1.14x; 1.16x / 1.18x before)
SEEDED_OVER_BOUND = {(2, 16): 1.15, (32, 64): 1.15, (112, 449): 1.0}
# seeded by the fleet's merge of three nodes (the median time of each source): within issue 35's 1.15x on every shape
FLEET_OVER_BOUND = {(2, 16): 1.15, (32, 64): 1.11, (112, 449): 1.0}


def test_the_products_cold_path_on_the_real_tree():
    """Fully cold through the product's path: 0 OOM kills and <= 1.3x its warm on every shape (32 / 64 GiB: 1.18x,
    1.18x with the launcher's measured rate - 1.30x and 1.32x with the 90 % thaw level; 2 / 16 GiB: 1.00x). Warm 1.14x the bare bound on 2 / 16
    GiB since ``drained_by`` answers when the longest runs alone (it answered "never" for fp8_gemm_kernel.cu, whose
    peak x margin is over the budget: 1.21x), 1.06x on 32 / 64 GiB. Seeded from one other node 1.14x on 2 / 16 and on
    32 / 64 GiB (target 1.15x; 1.16x and 1.18x before big rocks first / EASY backfill); from the fleet's merge of three
    (median times) 1.14x and 1.10x."""
    rows = replay_product.product_path(replay.load_record(replay.DEFAULT_RECORD), replay.SHAPES)
    assert len(rows) == 5 * len(replay.SHAPES)
    for r in rows:
        shape, result = (r["cores"], r["memory_gib"]), r["result"]
        assert result["oom_kills"] == 0 and not result["failed"], (shape, r["row"], result)
        if r["row"].startswith("cold"):
            ratio = (COLD_MEASURED_OVER_WARM if r["row"] == "cold, measured rate" else COLD_OVER_WARM)[shape]
            assert result["makespan"] <= ratio * r["warm_s"] + replay.EPS, (shape, r["row"], result["makespan"] / r["warm_s"])
        limit = {"warm": WARM_OVER_BOUND, "seeded": SEEDED_OVER_BOUND, "seeded by the fleet (3 nodes)": FLEET_OVER_BOUND}.get(r["row"])
        if limit:
            assert result["makespan"] <= limit[shape] * r["bound_s"] + replay.EPS, (shape, r["row"], result["makespan"] / r["bound_s"])
    cold = dict(((r["cores"], r["memory_gib"]), r["result"]) for r in rows if r["row"] == "cold")
    assert cold[(112, 449)]["freezes"] == 0 and cold[(32, 64)]["evictions"] == 0 and cold[(2, 16)]["evictions"] == 1


def test_the_products_cold_path_never_ooms_in_other_ninja_orders():
    """Shuffled ninja orders, cold: 0 OOM kills (the makespan is not held here: cold, a late longest source ends late;
    over 10 orders 32 / 64 GiB is 1.24x its warm on average, 1.56x at worst)."""
    jobs = replay.load_record(replay.DEFAULT_RECORD)
    rng = random.Random(35)
    for cores, mem_gib in replay.SHAPES:
        for dummy in range(2):
            order = sorted(jobs, key=lambda j: j.order)
            rng.shuffle(order)
            result = replay_cold.ColdSim(jobs, cores, mem_gib, {}, order).run()
            assert result["oom_kills"] == 0 and not result["failed"], (cores, mem_gib, result)


def test_replay_product_prints_the_cold_rows(capsys, monkeypatch):
    monkeypatch.setenv("GPUFLEET_BENCH_QUICK", "1")
    assert replay_product.main(["--shapes", "32x64"]) == 0
    out = capsys.readouterr().out
    assert "| 32 cores / 64 GiB | cold | 1330 s | 1.25 | 1.18 | 0 | 77 / 77 / 0 (0 s) |" in out
    assert "| 32 cores / 64 GiB | warm | 1063 s | 1299 s (1.22x) | 1125 s (1.06x) | 0 / 0 |" in out
