# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The admission launcher's pure policy (plugins/module_utils/_build/_admission_policy.py: keys, peaks, the scheduler's
decision); the launcher runs with real processes and real cgroups in tests/build/test_admission*.py."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type


import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _admission_policy as policy
from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _admission_threads as threads_rule

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


def test_an_offline_source_is_keyed_as_the_census_keys_it_wherever_its_folder_is():
    """FetchContent's offline sources: ``offline/<folder>/<path>`` under the launcher's ``offline_dir``, so the
    shipped census (measured with the folder elsewhere) and other nodes' peaks name the same source."""
    for offline in ("/data/deps", "/data/deps/", "/t/sgl-kernel/offline"):
        assert policy.source_key("/data/deps/repo-flashinfer/csrc/norm.cu", "/t/sgl-kernel", offline=offline,
                                 tree="sgl-kernel@0.3.19/120", flags="ab12") == (
            "sgl-kernel@0.3.19/120:offline/repo-flashinfer/csrc/norm.cu#ab12" if offline != "/t/sgl-kernel/offline"
            else "sgl-kernel@0.3.19/120:/data/deps/repo-flashinfer/csrc/norm.cu#ab12")
    assert policy.source_key("/t/sgl-kernel/offline/repo-x/a.cu", "/t/sgl-kernel", offline="/t/sgl-kernel/offline") == "offline/repo-x/a.cu"
    assert policy.source_key("/data/deps-2/a.cu", "/t/sgl-kernel", offline="/data/deps") == "/data/deps-2/a.cu"


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
    # the longest does not fit beside what runs: a shorter one only when it ends before the longest could start
    # (r ends at 100 s), else nothing starts and the machine drains for the longest (issue 35 item 3)
    ([job("heavy", 14, 300), job("light", 2, 30)], [dict(job("r", 3, 100), started=0)], 16, 4, "light"),
    ([job("heavy", 14, 300), job("light", 2, 200)], [dict(job("r", 3, 100), started=0)], 16, 4, None),
    ([job("heavy", 14, 300), job("light", 2, 30)], [job("r", 3, learned=False)], 16, 4, None),
    # nothing fits in memory
    ([job("heavy", 14, 300)], [job("r", 3, 100)], 16, 4, None),
    # alone, above the CPUs it runs; above the budget, a learned one waits (issue 35 item 2), an unlearned one runs
    ([job("many", 1, 300, threads=8)], [], 16, 4, "many"),
    ([job("huge", 20, 300)], [], 16, 4, None),
    ([job("huge", 20, 300), job("small", 1, 10)], [], 16, 4, "small"),
    ([dict(job("fits", 20, 300), ceiling=20 * GIB)], [], 16, 4, "fits"),
    ([job("new", 20, learned=False)], [], 16, 4, "new"),
    # the CPUs, counting nvcc --threads: 3 of 4 used, a 2-thread compile waits, a 1-thread one starts
    ([job("t2", 1, 100, threads=2), job("t1", 1, 10)], [job("r", 1, 100, threads=3)], 16, 4, "t1"),
    ([job("t1", 1, 10)], [job("r", 1, 100, threads=4)], 16, 4, None),
    # cold starts wide: an unlearned one starts beside another, claiming its default or the budget per CPU
    ([job("new", 1, learned=False)], [job("r", 1, learned=False)], 16, 4, "new"),
    ([job("new", 5, learned=False)], [job("r", 13, learned=False)], 16, 4, None),
    ([job("new", 5, learned=False)], [job("r", 12, learned=False)], 16, 4, "new"),
    ([job("new", 1, learned=False), job("old", 1, 5)], [job("r", 1, learned=False)], 16, 4, "old"),
    # ties and unknown times: first come
    ([job("x", 1, since=5), job("y", 1, since=2)], [], 16, 4, "y"),
    # an entry's own build budget (two builds on one node) decides for it
    ([dict(job("b2", 4, 100), budget=6 * GIB)], [job("r", 3, 100)], 16, 4, None),
])
def test_pick_next(waiting, running, budget_gib, cpus, picked):
    choice = policy.pick_next(waiting, running, budget_gib * GIB, cpus)
    assert (choice and choice["pid"]) == picked


def test_an_unlearned_compile_claims_its_default_at_most_the_budget_per_cpu():
    assert policy.pick_next([job("new", 5, learned=False)], [], 16 * GIB, 2)["bytes"] == 5 * GIB
    assert policy.pick_next([job("new", 5, learned=False)], [], 16 * GIB, 8)["bytes"] == 2 * GIB


def test_the_launchers_own_memory_counts():
    """Issue 35 item 5: what the waiting launchers hold (``overhead``) is not there for compiles."""
    assert policy.pick_next([job("b", 4, 10)], [job("r", 11, 100)], 16 * GIB, 4)["pid"] == "b"
    assert policy.pick_next([job("b", 4, 10)], [job("r", 11, 100)], 16 * GIB, 4, overhead=2 * GIB) is None


def test_the_longest_that_fits_only_alone_is_not_starved_by_light_arrivals():
    """Issue 35 item 3: light compiles keep arriving while a heavy one waits for the machine to drain; once the
    running ones end it starts, before any light one (all longer than what is left of the running ones)."""
    running = [dict(job("r%d" % i, 3, 100), started=0) for i in range(4)]
    waiting = [job("heavy", 14, 600, since=1)] + [job("light%d" % i, 3, 150, since=2 + i) for i in range(20)]
    now, started = 1.0, []
    while waiting and now < 10000:
        running = [r for r in running if r["started"] + r["seconds"] > now]
        pick = policy.pick_next(waiting, running, 16 * GIB, 8, now=now)
        if pick is None:
            now += 1
            continue
        waiting = [w for w in waiting if w["pid"] != pick["pid"]]
        running.append(dict(pick, started=now))
        started.append(pick["pid"])
    assert started[0] == "heavy", started


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


def test_merge_peaks_own_last_killed_never_replaces_finished_bad_dropped():
    seed = {"a.cu": {"peak_bytes": 9 * GIB, "seconds": 100}, "b.cu": {"peak_bytes": GIB, "seconds": 5},
            "bad.cu": {"peak_bytes": -1}, "c.cu": {"peak_bytes": 2 * GIB, "seconds": 9}}
    own = {"a.cu": {"peak_bytes": 8 * GIB, "seconds": 90}, "c.cu": {"peak_bytes": GIB, "seconds": 2, "killed": True}}
    merged = policy.merge_peaks(seed, own, "not a table")
    assert merged["a.cu"]["peak_bytes"] == 8 * GIB          # this node's own measurement wins
    assert merged["b.cu"]["peak_bytes"] == GIB              # what only the seed knows
    assert merged["c.cu"]["peak_bytes"] == 2 * GIB          # a killed entry below the finished peak never replaces it
    assert "bad.cu" not in merged
    # killed here holding more than a seed says it needs: the seed is wrong for this node, the kill wins (the field
    # rerun started the source the ledger recorded as killed at the seed's smaller peak, and it was killed again)
    grown = policy.merge_peaks(seed, {"b.cu": {"peak_bytes": 3 * GIB, "seconds": 2, "killed": True}})
    assert grown["b.cu"]["killed"] and grown["b.cu"]["peak_bytes"] == 3 * GIB


def test_an_oom_that_taught_the_scheduler_is_told_from_one_that_did_not():
    before = {"a.cu": {"peak_bytes": GIB, "seconds": 5}, "b.cu": {"peak_bytes": 3 * GIB, "killed": True}}
    after = {"a.cu": {"peak_bytes": 2 * GIB, "seconds": 5, "killed": True},       # killed for the first time
             "b.cu": {"peak_bytes": 3 * GIB, "killed": True},                     # again, at the same peak
             "c.cu": {"peak_bytes": GIB, "killed": True, "stopped": True}}        # a stop: nothing learned
    assert policy.learned_from_oom(before, after) == ["a.cu"]
    assert policy.learned_from_oom(after, dict(after, **{"b.cu": {"peak_bytes": 4 * GIB, "killed": True}})) == ["b.cu"]


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


# -- nvcc threads per source (issue 29 item 3) ---------------------------------------------------------------------
def multi(name, seconds, options_gib, since=0, learned=True):
    return dict(job(name, options_gib[0], seconds, learned=learned, since=since), options=[int(g * GIB) for g in options_gib])


@pytest.mark.parametrize("waiting, running, budget_gib, cpus, picked, threads", [
    # alone on an idle node with memory to spare: as many threads as its options (archs, CPUs) allow
    ([multi("m", 300, [4, 7, 10, 13])], [], 64, 32, "m", 4),
    # memory for two threads only: 2
    ([multi("m", 300, [4, 7, 10, 13])], [], 8, 32, "m", 2),
    # CPUs: 3 of 4 busy, so one thread even with memory free
    ([multi("m", 300, [4, 7, 10, 13])], [job("r", 1, 100, threads=3)], 64, 4, "m", 1),
    # other compiles waiting take the CPUs first: 4 CPUs, 2 others beside it -> 2 threads for the longest one
    ([multi("m", 300, [4, 7, 10, 13]), job("l1", 1, 200), job("l2", 1, 200)], [], 64, 4, "m", 2),
    # memory holds it to one thread once the others beside it have their share (not critical: 1300 s / 4 CPUs > 300)
    ([multi("m", 300, [4, 7, 10, 13])] + [job("l%d" % i, 2, 250) for i in range(4)], [], 9, 4, "m", 1),
    # the longest goes first and gets the spare threads (3 + the other one's 1 = the 4 CPUs)
    ([multi("long", 300, [2, 3, 4]), multi("short", 10, [2, 3, 4])], [], 64, 4, "long", 3),
    # one thread only (no options beyond 1): unchanged
    ([multi("one", 300, [4])], [], 64, 32, "one", 1),
    # longer than the rest spread over the CPUs ((1000 + 8 x 10) / 4 = 270 s): it takes its threads before the light
    # ones get theirs (up to 1000 / 270 -> 4), though they would fill the CPUs
    ([multi("long", 1000, [1, 2, 3, 4])] + [job("l%d" % i, 1, 10, since=i) for i in range(8)], [], 64, 4, "long", 4),
    # ... but not past the memory the running ones leave
    ([multi("long", 1000, [1, 2, 3, 4])] + [job("l%d" % i, 1, 10, since=i) for i in range(8)], [job("r", 60, 5)], 64, 4, "long", 3),
])
def test_pick_next_gives_threads(waiting, running, budget_gib, cpus, picked, threads):
    choice = policy.pick_next(waiting, running, budget_gib * GIB, cpus)
    assert (choice["pid"], choice["threads"]) == (picked, threads)
    assert choice["bytes"] == choice["options"][threads - 1]


MIB = 1024 ** 2


def test_thread_options_learned_unseen_and_killed():
    peaks = {"a": {"peak_bytes": 100 * MIB, "seconds": 9, "killed": False, "by_threads": {"1": 100 * MIB, "2": 150 * MIB}},
             "k": {"peak_bytes": 900 * MIB, "seconds": 9, "killed": True}}
    assert policy.thread_options(peaks, "a", 3, 3, 5 * GIB, 1.0) == [100 * MIB, 150 * MIB, 225 * MIB]
    # never seen, or killed: one thread until it has shown its peak (cold is safe)
    assert policy.thread_options(peaks, "new", 2, 3, 512 * MIB, 1.0) == [512 * MIB]
    assert policy.thread_options(peaks, "k", 2, 3, 512 * MIB, 1.0) == [900 * MIB]


def test_record_keeps_a_point_per_thread_count():
    peaks = policy.record({}, "a", 100 * MIB, 10, False, 1, threads=1)
    peaks = policy.record(peaks, "a", 180 * MIB, 6, False, 2, threads=2)
    peaks = policy.record(peaks, "a", 999 * MIB, 1, True, 3, threads=3)      # killed: no point
    assert peaks["a"]["by_threads"] == {"1": 100 * MIB, "2": 180 * MIB}
    assert threads_rule.peak_at(peaks["a"], 3, 7) == 270 * MIB


@pytest.mark.parametrize("entries, expected_gib", [
    ([], 0),
    ([job("a", 11.5)], 11.5),                                   # 10 GiB peak x 1.15
    ([job("a", 11.5), job("b", 2.3)], 10 + 2 + 1.5),           # the margin once, for the largest
    ([job("a", 11.5), job("u", 3, learned=False)], 11.5 + 3),  # an unlearned claim counts whole
])
def test_load_keeps_the_margin_once(entries, expected_gib):
    assert abs(policy.load(entries, 1.15) - expected_gib * GIB) < 1024


def test_pick_next_with_the_margin_once():
    """16 GiB: a 13.8 GiB reservation (12 GiB peak) and a 2.3 GiB one (2 GiB) need 16.1 GiB with the margin on each,
    15.8 with the margin once: the light one starts beside; with margin 1 (each reservation whole) it would not."""
    waiting, running = [job("light", 2.3, 10)], [job("heavy", 13.8, 100)]
    assert policy.pick_next(waiting, running, 16 * GIB, 4, 1.15)["pid"] == "light"
    assert policy.pick_next(waiting, running, 16 * GIB, 4) is None


def test_a_cache_hit_on_a_source_known_only_from_the_seed_is_not_learned():
    """Issue 36 finding 1: the node's first build hits a warm shared cache; the hit (15 MiB, 0.1 s) must neither be
    learned as the source's peak nor win over the fleet's seed in merge_peaks."""
    seed = {"t:fp8.cu": {"peak_bytes": 12 * GIB, "seconds": 300, "killed": False}}
    own = policy.record({}, "t:fp8.cu", 15 * 1024 ** 2, 0.1, False, 100, known_before=seed)
    assert own == {}
    assert policy.merge_peaks(seed, own)["t:fp8.cu"]["peak_bytes"] == 12 * GIB
    # known nowhere: a compile through a cache launcher in which no compiler proper ran is a hit
    assert policy.cache_hit(["ccache", "nvcc", "-c", "a.cu"], [["ccache", 9 * 1024 ** 2]], 1.5)
    assert policy.cache_hit(["/usr/bin/sccache", "nvcc", "-c", "a.cu"], [], 0.05)
    assert not policy.cache_hit(["/usr/bin/sccache", "nvcc", "-c", "a.cu"], [], 0.9)   # ended before a sample: a compile
    assert not policy.cache_hit(["ccache", "nvcc", "-c", "a.cu"], [["cicc", 2 * GIB]], 30)
    assert not policy.cache_hit(["nvcc", "-c", "a.cu"], [], 0.01)
    assert policy.record({}, "t:new.cu", 9 * 1024 ** 2, 0.0, False, 100, cache_hit=True) == {}


def test_the_fleet_merge_keeps_the_largest_point_of_each_thread_count():
    """Issue 36 finding 2: node A's entry wins on peak_bytes, but node B measured more at 1 thread; one node's small
    point must never become every node's reservation."""
    a = {"s.cu": {"peak_bytes": 700 * MIB, "seconds": 60, "by_threads": {"1": 10 * MIB, "4": 700 * MIB}}}
    b = {"s.cu": {"peak_bytes": 300 * MIB, "seconds": 60, "by_threads": {"1": 300 * MIB}}}
    merged = policy.merge_fleet_peaks(a, b)["s.cu"]
    assert merged["peak_bytes"] == 700 * MIB
    assert merged["by_threads"] == {"1": 300 * MIB, "4": 700 * MIB}
    assert policy.merge_fleet_peaks(b, a)["s.cu"]["by_threads"] == {"1": 300 * MIB, "4": 700 * MIB}


def test_a_reservation_is_never_below_the_learned_peak_before_its_phase_ends():
    """Issue 35 item 4: learned at 1,461 MiB (ru_maxrss) in a cicc phase sampled at 1,307: held at the peak until
    cicc is over, then it follows the phases down."""
    phases = [["cudafe++", 400 * MIB], ["cicc", 1307 * MIB], ["ptxas", 100 * MIB]]
    assert policy.reservation({"bytes": 0}, 900 * MIB, 1.0, phases, 1, 1461 * MIB) == 1461 * MIB
    assert policy.reservation({"bytes": 0}, 90 * MIB, 1.0, phases, 2, 1461 * MIB) == 100 * MIB


def test_the_machine_drains_for_a_source_that_fits_only_alone():
    """fp8_gemm_kernel.cu: 15.13 GiB x 1.15 over a 15.5 GiB budget, so it runs alone: it fits when the last running
    compile ends (100 s), and a 30 s compile may start before that (the answer was "never": nothing backfilled)."""
    head = dict(job("fp8", 15.13 * 1.15, 700), ceiling=15.9 * GIB)
    running = [dict(job("r", 3, 100), started=0)]
    assert policy.drained_by(head, running, 15.5 * GIB, 1.15) == 100
    assert policy.pick_next([head, job("light", 1, 30)], running, int(15.5 * GIB), 2, 1.15, now=0)["pid"] == "light"


def test_an_evicted_compile_goes_first_claiming_what_it_held_then_alone():
    evicted = dict(job("e", 3, learned=False), first=True)
    assert policy.claim(evicted, 16 * GIB, 8) == 3 * GIB          # not cut to the room per CPU
    assert policy.claim(dict(evicted, alone=True), 16 * GIB, 8) == 16 * GIB
    assert policy.pick_next([job("long", 1, 900), evicted], [], 16 * GIB, 8)["pid"] == "e"


def test_the_fleet_merge_keeps_the_median_time_of_the_nodes_that_finished():
    """Issue 35, seeded builds: each node's time is off by its own speed and load; the merged entry keeps the largest
    peak but the median time of the finished entries (a killed one's partial time is no time), so one slow or quick
    node does not reorder the fleet's longest-first."""
    nodes = [{"s.cu": {"peak_bytes": p * MIB, "seconds": s}} for p, s in ((300, 100.0), (310, 160.0), (290, 90.0))]
    killed = {"s.cu": {"peak_bytes": 400 * MIB, "seconds": 5.0, "killed": True}}
    merged = policy.merge_fleet_peaks(*(nodes + [killed]))["s.cu"]
    assert merged["peak_bytes"] == 310 * MIB and merged["seconds"] == 100.0
    assert policy.merge_fleet_peaks(*nodes[:2])["s.cu"]["seconds"] == 130.0
    assert policy.merge_fleet_peaks(nodes[0])["s.cu"] == nodes[0]["s.cu"]       # one node: its entry as it is


@pytest.mark.parametrize("waiting, cpus, bound_by_memory, picked", [
    # the CPUs bind (learned seconds x bytes / budget <= seconds x threads / CPUs): the longest first
    ([job("big", 14, 100), job("small", 1, 150)], 2, False, "small"),
    # the memory binds: a compile that needs a large share of it ranks as longer, 100 x (1 + 2 x 14 / 16) = 275 s
    # against 150 x (1 + 2 / 16) = 169 s (issue 35, seeded builds: a 14 GiB source seeded short started last)
    ([job("big", 14, 100), job("small", 1, 150)], 8, True, "big"),
    # ... but not one that is far shorter: 40 x 2.75 = 110 s against 169 s
    ([job("big", 14, 40), job("small", 1, 150)], 8, True, "small"),
    # unknown times weigh nothing: first come
    ([job("x", 14, learned=False, since=2), job("y", 1, learned=False, since=1)], 8, False, "y"),
])
def test_big_rocks_first_while_the_memory_binds(waiting, cpus, bound_by_memory, picked):
    order = policy.order_for(waiting, lambda e: 16 * GIB, cpus)
    assert (order is not policy.start_order) == bound_by_memory
    assert policy.pick_next(waiting, [], 16 * GIB, cpus)["pid"] == picked


@pytest.mark.parametrize("light_gib, light_seconds, cpus, picked", [
    # the CPUs bind: heavy (30 GiB) fits at 100 s, when r1 ends; light runs past that but fits beside heavy and r2
    (2, 600, 3, "light"),
    # it fits now but not beside heavy and r2 (30 + 30 + 8 > 64 GiB): the machine drains for heavy
    (8, 600, 3, None),
    # the memory binds (8 CPUs): no extra room, only what ends before heavy fits may start
    (2, 600, 8, None),
    (2, 50, 8, "light"),
])
def test_backfill_into_the_room_left_beside_the_longest_while_the_cpus_bind(light_gib, light_seconds, cpus, picked):
    """EASY backfill's extra room: r2 (30 GiB) still runs when heavy starts, so 4 GiB is left beside them."""
    running = [dict(job("r1", 10, 100), started=0), dict(job("r2", 30, 1000), started=0)]
    waiting = [job("heavy", 30, 700), job("light", light_gib, light_seconds)]
    choice = policy.pick_next(waiting, running, 64 * GIB, cpus, now=0)
    assert (choice and choice["pid"]) == picked


def test_still_running():
    running = [dict(job("a", 1, 100), started=0), dict(job("b", 1, 100), started=50), job("c", 1, learned=False)]
    assert [r["pid"] for r in policy.still_running(running, 100)] == ["b", "c"]
