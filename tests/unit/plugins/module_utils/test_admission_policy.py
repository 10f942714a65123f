# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The admission launcher's pure policy (plugins/module_utils/_build/_admission_policy.py: keys, peaks, the scheduler's
decision, the settings); the launcher runs with real processes and real cgroups in tests/build/test_admission*.py."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils import _human as human
from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _admission_policy as policy

GIB = 1024 ** 3


@pytest.mark.parametrize("argv, source", [
    (["-x", "cu", "-c", "/t/csrc/gemm/fp8_gemm_kernel.cu", "-o", "x.o"], "/t/csrc/gemm/fp8_gemm_kernel.cu"),
    (["-DA", "-o", "x.o", "-c", "b.cpp"], "b.cpp"),
    (["-o", "libx.so", "a.o", "b.o"], None),
    (["--version"], None),
    (["-MD", "-MF", "x.d", "y.cc"], "y.cc"),
])
def test_source_of(argv, source):
    assert policy.source_of(argv) == source


def test_source_key_relative_to_root_else_absolute():
    assert policy.source_key("/t/sgl-kernel/csrc/a.cu", "/t/sgl-kernel") == "csrc/a.cu"
    assert policy.source_key("csrc/a.cu", "/t/sgl-kernel", cwd="/t/sgl-kernel") == "csrc/a.cu"
    assert policy.source_key("/off/mscclpp/x.cc", "/t/sgl-kernel") == "/off/mscclpp/x.cc"
    assert policy.source_key("/t/sgl-kernel-2/a.cu", "/t/sgl-kernel") == "/t/sgl-kernel-2/a.cu"
    assert policy.source_key(None, "/t") is None


def test_expected_bytes_learned_or_default():
    peaks = {"csrc/fp8.cu": {"peak_bytes": 15 * GIB}}
    assert policy.expected_bytes(peaks, "csrc/fp8.cu", 5 * GIB, 1.1) == (int(15 * GIB * 1.1), True)
    assert policy.expected_bytes(peaks, "csrc/new.cu", 5 * GIB, 1.1) == (5 * GIB, False)


def entry(state, gib, since):
    return {"state": state, "bytes": int(gib * GIB), "since": since}


def job(name, gib, seconds=None, threads=1, learned=True, since=0):
    return {"pid": name, "bytes": int(gib * GIB), "seconds": seconds, "threads": threads, "learned": learned,
            "since": since}


@pytest.mark.parametrize("waiting, running, budget_gib, cpus, picked", [
    # the longest learned compile that fits starts first, not the first come
    ([job("a", 1, 10, since=1), job("b", 1, 300, since=2), job("c", 1, 60, since=3)], [], 16, 4, "b"),
    # the longest does not fit beside what runs: the longest that does
    ([job("heavy", 14, 300), job("light", 2, 30)], [job("r", 3, 100)], 16, 4, "light"),
    # nothing fits in memory
    ([job("heavy", 14, 300)], [job("r", 3, 100)], 16, 4, None),
    # alone it always runs, even above the budget or the CPUs
    ([job("huge", 20, 300, threads=8)], [], 16, 4, "huge"),
    # the CPUs, counting nvcc --threads: 3 of 4 used, a 2-thread compile waits, a 1-thread one starts
    ([job("t2", 1, 100, threads=2), job("t1", 1, 10)], [job("r", 1, 100, threads=3)], 16, 4, "t1"),
    ([job("t1", 1, 10)], [job("r", 1, 100, threads=4)], 16, 4, None),
    # an unlearned one never starts beside another unlearned one; a learned one may start beside it (if it fits)
    ([job("new", 1, learned=False)], [job("r", 1, learned=False)], 16, 4, None),
    ([job("new", 1, learned=False), job("old", 1, 5)], [job("r", 1, learned=False)], 16, 4, "old"),
    # ties and unknown times: first come
    ([job("x", 1, since=5), job("y", 1, since=2)], [], 16, 4, "y"),
    # an entry's own build budget (two builds on one node) decides for it
    ([dict(job("b2", 4, 100), budget=6 * GIB)], [job("r", 3, 100)], 16, 4, None),
])
def test_pick_next(waiting, running, budget_gib, cpus, picked):
    choice = policy.pick_next(waiting, running, budget_gib * GIB, cpus)
    assert (choice and choice["pid"]) == picked


@pytest.mark.parametrize("arrivals, now, expected", [
    ([], 100.0, False),                         # nothing waits: nothing to hold
    ([100.0], 100.2, True),                     # one just joined: the ones ninja started with it are on their way
    ([99.0, 99.4, 99.8], 100.0, True),          # still joining, 0.4 s apart on a loaded machine
    ([98.0, 98.4, 99.0], 100.0, False),         # a lull of 1 s: the queue is full, decide
    ([90.0, 92.0, 94.9], 95.0, False),          # joining for 5 s (10 x 0.5): decide anyway among the settled
    ([94.0, 94.9], 95.0, True),                 # 1 s of joining is not yet the 5 s of patience
])
def test_still_arriving(arrivals, now, expected):
    assert policy.still_arriving([{"since": t} for t in arrivals], now, 0.5) is expected


def test_still_arriving_never_holds_without_a_settle_time():
    assert policy.still_arriving([{"since": 100.0}], 100.0, 0) is False


@pytest.mark.parametrize("held, live, phases, position, expected", [
    (5 * GIB, 2 * GIB, [], 0, 5 * GIB),                        # unlearned: what it reserved ...
    (5 * GIB, 10 * GIB, [], 0, int(10 * GIB * 1.15)),          # ... or more once it holds more
    # learned phases: the largest still ahead, so it follows the compile down as cicc ends
    (0, GIB, [["cudafe++", GIB], ["cicc", 10 * GIB], ["ptxas", 2 * GIB], ["cc1plus", GIB]], 0, int(10 * GIB * 1.15)),
    (0, GIB, [["cudafe++", GIB], ["cicc", 10 * GIB], ["ptxas", 2 * GIB], ["cc1plus", GIB]], 2, int(2 * GIB * 1.15)),
    (0, 3 * GIB, [["cudafe++", GIB], ["cicc", 10 * GIB], ["ptxas", 2 * GIB], ["cc1plus", GIB]], 3, int(3 * GIB * 1.15)),
])
def test_reservation_follows_the_phase(held, live, phases, position, expected):
    assert policy.reservation({"bytes": held}, live, 1.15, phases, position) == expected


def test_advance_through_the_learned_phases():
    phases = [["cc1plus", 1], ["cicc", 9], ["ptxas", 2], ["cc1plus", 1]]
    assert policy.advance(phases, 0, "cicc") == 1
    assert policy.advance(phases, 1, "cc1plus") == 3        # the host compile after ptxas, not the preprocessing
    assert policy.advance(phases, 2, "nvcc") == 2           # a name never learned: where it was


@pytest.mark.parametrize("rc, was_killed", [
    (0, False), (1, False), (2, False), (255, False),
    (-9, True), (-15, True),
    (137, True),    # nvcc / ccache: cicc killed by the OOM killer (SIGKILL)
    (143, True),    # a stop (SIGTERM)
    (139, False),   # a segfault is the compiler's failure, not a kill
])
def test_killed_by_signal(rc, was_killed):
    assert policy.killed_by_signal(rc) is was_killed


def test_tree_members_are_the_root_and_its_descendants():
    parents = {10: 1, 11: 10, 12: 11, 13: 10, 20: 1, 21: 20}   # nvcc 10 -> cicc 11 -> ptxas 12, cudafe++ 13
    assert sorted(policy.tree_members(parents, 10)) == [10, 11, 12, 13]
    assert policy.tree_members(parents, 99) == [99]


def test_reclaim_drops_dead_launchers():
    ledger = {"10": entry("running", 1, 1), "11": entry("waiting", 1, 2)}
    assert policy.reclaim(ledger, lambda pid: pid == 11) == {"11": entry("waiting", 1, 2)}


def test_record_last_wins_killed_keeps_larger():
    peaks = policy.record({}, "a.cu", 3 * GIB, 60, False, 100)
    assert peaks["a.cu"]["peak_bytes"] == 3 * GIB and peaks["a.cu"]["runs"] == 1
    peaks = policy.record(peaks, "a.cu", 2 * GIB, 50, False, 200)
    assert peaks["a.cu"]["peak_bytes"] == 2 * GIB and peaks["a.cu"]["runs"] == 2
    peaks = policy.record(peaks, "a.cu", 1 * GIB, 5, True, 300)      # killed early: keeps what was known
    assert peaks["a.cu"]["peak_bytes"] == 2 * GIB and peaks["a.cu"]["killed"]
    assert policy.record(peaks, None, GIB, 1, False, 1) == peaks


def test_record_a_compiler_cache_hit_changes_nothing_learned():
    peaks = policy.record({}, "fp8.cu", 15 * GIB, 250, False, 100)
    hit = policy.record(peaks, "fp8.cu", GIB // 50, 2, False, 200)         # ccache: 2 s, 20 MiB
    assert hit["fp8.cu"]["peak_bytes"] == 15 * GIB and hit["fp8.cu"]["seconds"] == 250 and hit["fp8.cu"]["cache_hits"] == 1
    changed = policy.record(peaks, "fp8.cu", 12 * GIB, 200, False, 300)  # a real, smaller compile: learned
    assert changed["fp8.cu"]["peak_bytes"] == 12 * GIB


def test_budget_smaller_of_config_and_cgroup_less_reserve():
    assert policy.budget({"budget_bytes": 16 * GIB, "reserve_bytes": GIB // 2}, 12 * GIB, 20 * GIB) == 12 * GIB - GIB // 2
    assert policy.budget({"budget_bytes": None, "reserve_bytes": 0}, None, 20 * GIB) == 20 * GIB


SIZE_TABLE = ["16GiB", "512M", "512MiB", "512Mi", "1.5GiB", "100", 100, 0, "0", 3.0, "64gib", "64Gib", "64G", "2K",
              "1.7B", "1E", " 64GiB ", "7T", "0.3K", "64g", "64b", "64KiB", "1.5b", "64B",
              # refused by both
              "64GB", "64gb", "5 GB", "5 GiB", ".5GiB", "-1", -1, "1e9", "lots", "", None, True, 1.5, float("nan"),
              float("inf"), [1], "64GiBs", "64Bi", "G",
              "64giB", "64GIB", "64Mi", "64gIb", "64kiB", "64Kib", "64KIB", "64KB", "64Kb"]


@pytest.mark.parametrize("value", SIZE_TABLE)
def test_the_launchers_size_parser_gives_the_projects_answers(value):
    """The launcher stays one stdlib file, so it keeps a tiny parser; this table holds it to _human's rule."""
    try:
        expected = human.parse_size_option("reserve_bytes", value)
    except ValueError as exc:
        with pytest.raises(ValueError) as refused:
            policy.parse_size("reserve_bytes", value)
        assert "reserve_bytes" in str(refused.value) and "reserve_bytes" in str(exc)
    else:
        assert policy.parse_size("reserve_bytes", value) == expected


def test_checked_config_refuses_unknown_keys_and_bad_values_naming_them():
    with pytest.raises(ValueError, match="unknown admission setting.*margn, reserv_bytes"):
        policy.checked_config({"margn": 1.2, "reserv_bytes": "1GiB"})
    with pytest.raises(ValueError, match="budget_bytes: '64GB' is ambiguous"):
        policy.checked_config({"budget_bytes": "64GB"})
    with pytest.raises(ValueError, match="margin"):
        policy.checked_config({"margin": "1.2"})
    assert policy.checked_config({"reserve_bytes": "1GiB"})["reserve_bytes"] == GIB
    assert policy.checked_config({})["budget_bytes"] is None


@pytest.mark.parametrize("entry, ok", [
    ({"peak_bytes": GIB, "seconds": 3.5}, True), ({"peak_bytes": GIB}, True),
    (5, False), ([1, 2], False), ("4GiB", False), (None, False),
    ({"peak_bytes": float("nan")}, False), ({"peak_bytes": float("inf")}, False), ({"peak_bytes": "4GiB"}, False),
    ({"peak_bytes": GIB, "seconds": "12"}, False), ({"peak_bytes": -690 * 1024 ** 2}, False),
    ({"peak_bytes": 0}, False), ({"peak_bytes": True}, False), ({"peak_bytes": GIB, "seconds": float("nan")}, False),
])
def test_valid_peak(entry, ok):
    assert (policy.valid_peak(entry) is not None) is ok
    # a bad entry is never seen: the default, not a crash and not a lifted budget
    assert policy.expected_bytes({"a.cu": entry}, "a.cu", 5 * GIB, 1.0) == ((GIB, True) if ok else (5 * GIB, False))


def test_reclaim_drops_bad_entries_and_keeps_a_dead_launchers_live_compiler():
    good = entry("running", 1, 1)
    ledger = {"10": good, "11": 5, "12": dict(good, bytes=-GIB), "x": good, "13": dict(good, since="now"),
              "14": dict(good, child=99), "15": dict(good, child=98), "16": dict(good, state="done")}
    alive = {10, 99}.__contains__
    assert policy.reclaim(ledger, alive) == {"10": good, "14": dict(good, child=99)}


def test_keys_carry_the_trees_identity_and_the_arch_flags():
    sm90 = ["-gencode=arch=compute_90,code=sm_90", "--threads", "2", "-c", "/t/a.cu"]
    sm100 = ["-gencode", "arch=compute_100a,code=sm_100a", "--threads=2", "-c", "/t/a.cu"]
    assert policy.flags_id(sm90) != policy.flags_id(sm100) and policy.flags_id(["-O2", "-c", "a.c"]) is None
    assert policy.flags_id(sm90) == policy.flags_id(list(sm90))
    assert policy.source_key("/t/a.cu", "/t", tree="sgl-kernel@0.3/12.0", flags="ab12") == "sgl-kernel@0.3/12.0:a.cu#ab12"
    assert policy.source_key("/t/a.c", "/t") == "a.c"


@pytest.mark.parametrize("argv, threads", [
    (["--threads", "4", "-c", "a.cu"], 4), (["--threads=2"], 2), (["-t", "8"], 8), (["-t=3"], 3),
    (["--threads", "0"], 16), (["-c", "a.c"], 1), (["--threads", "x"], 1), (["--threads"], 1),
])
def test_threads_of(argv, threads):
    assert policy.threads_of(argv, 16) == threads


def test_merge_peaks_own_last_killed_never_replaces_finished_bad_dropped():
    seed = {"a.cu": {"peak_bytes": 9 * GIB, "seconds": 100}, "b.cu": {"peak_bytes": GIB, "seconds": 5},
            "bad.cu": {"peak_bytes": -1}, "c.cu": {"peak_bytes": 2 * GIB, "seconds": 9}}
    own = {"a.cu": {"peak_bytes": 8 * GIB, "seconds": 90}, "c.cu": {"peak_bytes": GIB, "seconds": 2, "killed": True}}
    merged = policy.merge_peaks(seed, own, "not a table")
    assert merged["a.cu"]["peak_bytes"] == 8 * GIB          # this node's own measurement wins
    assert merged["b.cu"]["peak_bytes"] == GIB              # what only the seed knows
    assert merged["c.cu"]["peak_bytes"] == 2 * GIB          # a killed entry never replaces a finished one
    assert "bad.cu" not in merged


def test_too_big_names_the_sources_of_this_tree_above_the_budget():
    peaks = {"t@1:fp8.cu#x": {"peak_bytes": 15 * GIB}, "t@1:small.cu": {"peak_bytes": GIB},
             "other:fp8.cu": {"peak_bytes": 20 * GIB}, "t@1:neg.cu": {"peak_bytes": -5}}
    assert policy.too_big(peaks, 12 * GIB, "t@1") == [("t@1:fp8.cu#x", 15 * GIB)]
    assert policy.too_big(peaks, 12 * GIB) == [("other:fp8.cu", 20 * GIB), ("t@1:fp8.cu#x", 15 * GIB)]


def test_a_killed_source_is_not_learned_and_needs_at_least_the_default():
    peaks = {"k.cu": {"peak_bytes": GIB, "seconds": 100, "killed": True}}
    assert policy.expected_bytes(peaks, "k.cu", 5 * GIB, 1.15) == (5 * GIB, False)
    assert policy.expected_seconds(peaks, "k.cu") is None   # not started first by its (partial) time


def test_record_learns_phases_and_keeps_them_through_a_kill():
    peaks = policy.record({}, "a.cu", 9 * GIB, 100, False, 1, [["cicc", 9 * GIB], ["ptxas", GIB]])
    assert policy.phases_of(peaks["a.cu"]) == [["cicc", 9 * GIB], ["ptxas", GIB]]
    killed = policy.record(peaks, "a.cu", 2 * GIB, 10, True, 2, [["cicc", 2 * GIB]])
    assert policy.phases_of(killed["a.cu"]) == [["cicc", 9 * GIB], ["ptxas", GIB]]
    assert policy.phases_of({"phases": [["cicc", "9GiB"]]}) == []
