# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a tree needs of a node (plugins/module_utils/_build/_admission_census.py): the census shipped for sgl-kernel
0.3.19 at SM120, the sources too big for a node, the smallest limit, the safe fixed -j."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _admission_census as census
from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _admission_policy as policy
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._timeline import parse_ninja_log

GIB = 1024 ** 3
MIB = 1024 ** 2


def test_too_big_counts_a_multi_arch_source_at_its_fewest_measured_threads():
    peaks = {"t:moe.cu": {"peak_bytes": 40 * GIB, "seconds": 9, "by_threads": {"1": 11 * GIB, "4": 40 * GIB}},
             "t:big.cu": {"peak_bytes": 30 * GIB, "seconds": 9, "by_threads": {"2": 30 * GIB}}}
    assert census.too_big(peaks, 12 * GIB, "t") == [("t:big.cu", 30 * GIB, False)]


def test_too_big_names_the_sources_of_this_tree_above_the_budget():
    peaks = {"t@1:fp8.cu#x": {"peak_bytes": 15 * GIB}, "t@1:small.cu": {"peak_bytes": GIB},
             "other:fp8.cu": {"peak_bytes": 20 * GIB}, "t@1:neg.cu": {"peak_bytes": -5}}
    assert census.too_big(peaks, 12 * GIB, "t@1") == [("t@1:fp8.cu#x", 15 * GIB, False)]
    assert census.too_big(peaks, 12 * GIB) == [("other:fp8.cu", 20 * GIB, False), ("t@1:fp8.cu#x", 15 * GIB, False)]


def test_an_oom_killed_source_needs_more_than_it_held_a_stopped_one_says_nothing():
    """Issue 29 item 7: killed at 11 GiB (x 1.15 margin = 12.65) under a 12 GiB budget it cannot fit alone - refused
    before the build, not killed again two minutes in; stopped at the same size it is not refused; killed at 6 GiB
    beside a neighbour it fits alone and is not refused."""
    peaks = {"t:gemm.cu": {"peak_bytes": 11 * GIB, "seconds": 90, "killed": True},
             "t:stop.cu": {"peak_bytes": 11 * GIB, "seconds": 90, "killed": True, "stopped": True},
             "t:beside.cu": {"peak_bytes": 6 * GIB, "seconds": 60, "killed": True}}
    assert census.too_big(peaks, 12 * GIB, "t", 1.15) == [("t:gemm.cu", 11 * GIB, True)]
    message = census.too_big_message(census.too_big(peaks, 12 * GIB, "t", 1.15), 12 * GIB)
    assert message == "the budget of 12.0 GiB is below what these sources need alone: t:gemm.cu (more than 11.0 GiB: OOM-killed holding that)"
    need, learned = policy.expected_bytes(peaks, "t:beside.cu", GIB, 1.15)
    assert need == int(6 * GIB * 1.15) and not learned


REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
SHIPPED = os.path.join(REPO, "roles", "sgl_kernel", "files", "census", "sgl-kernel-0.3.19-120.json")
RECORD = os.path.join(REPO, "bench", "replay_data", "sgl_kernel_sm120.json")
TREE = "sgl-kernel@0.3.19/120"


def shipped():
    with open(SHIPPED) as handle:
        return json.load(handle)


COLD_LOG = os.path.join(REPO, "bench", "replay_data", "sgl_kernel_sm120_cold.ninja_log")


def step_of(outputs, path, tail=None):
    """The ``.ninja_log`` output of a census path: the project's object, or a FetchContent one (``offline/<folder>/``:
    under its folder, or ``tail`` in mscclpp's own build, which names it from its own projects' roots)."""
    tail = tail or (path.split("/", 2)[2] if path.startswith("offline/") else path)
    offline = path.startswith("offline/")
    found = [o for o in outputs if o.endswith("/" + tail + ".o")
             and (path.split("/")[1] in o or o.startswith("mscclpp-build/") if offline else "/offline/" not in o)]
    assert len(found) == 1, (path, found)
    return found[0]


def test_the_shipped_census_is_the_measured_record():
    """Two measurements, one census: its peaks are the 2026-12-02 record's (the replay's, bench/replay_data) measured
    again on the quiet cold run of 2026-12-06 - the same to 0.01 GiB -, and its seconds are that run's compiles' own
    (its .ninja_log is kept: each object's step took at least that; the rest waited for admission or was frozen)."""
    with open(RECORD) as handle:
        record = dict((o["source"], o) for o in json.load(handle)["objects"])
    with open(COLD_LOG) as handle:
        steps = parse_ninja_log(handle.read())
    data = shipped()
    assert data["format"] == census.FORMAT and data["tree"] == TREE and len(data["sources"]) == 76
    offline = {"offline/repo-mscclpp/src/executor/execution_kernel.cu": "src/executor/execution_kernel.cu",
               "offline/repo-mscclpp/apps/nccl/src/nccl.cu": "src/nccl.cu"}   # keyed by the launcher's offline_dir
    for path, entry in data["sources"].items():
        assert abs(entry["peak_bytes"] / float(GIB) - record[offline.get(path, path)]["peak_gib"]) <= 0.011, path
        assert 0 < entry["seconds"] <= steps[step_of(steps, path, offline.get(path))] + 1.0 and entry["threads"] == 1, path
    total = sum(entry["seconds"] for entry in data["sources"].values())
    assert 0.5 * sum(steps[step_of(steps, path, offline.get(path))] for path in data["sources"]) < total, "mostly compiling"


def test_a_census_seeds_only_its_own_tree_and_never_beats_what_was_learned():
    peaks = census.census_peaks(shipped(), TREE)
    key = TREE + ":csrc/gemm/fp8_gemm_kernel.cu#1a2b3c4d"    # the launcher's key: tree, path, flags
    assert policy.known(peaks, key)["peak_bytes"] > 15 * GIB     # known from the first compile (issue 35 item 7)
    assert census.census_peaks(shipped(), TREE + "@7b9156c")     # a tree key with its commit
    assert census.census_peaks(shipped(), "sgl-kernel@0.3.20/120") == {}
    assert census.census_peaks(shipped(), "sgl-kernel@0.3.19/90,120") == {}
    assert census.census_peaks({"format": "other/9", "tree": TREE, "sources": {}}, TREE) == {}
    own = {key: {"peak_bytes": 14 * GIB, "seconds": 700.0, "killed": False}}
    assert policy.known(policy.merge_peaks(peaks, own), key)["peak_bytes"] == 14 * GIB


def test_a_tree_is_kin_to_its_other_versions_and_commits_of_the_same_archs():
    assert census.kin(TREE) == census.kin("sgl-kernel@0.3.20/120@7b9156c01234") == ("sgl-kernel", "120")
    assert census.kin("sgl-kernel@0.3.19/90,120") == ("sgl-kernel", "90,120")
    for other in (None, 5, "", "sgl-kernel", "sgl-kernel@0.3.19", "@0.3.19/120", "sgl-kernel@0.3.19/"):
        assert census.kin(other) is None, other


def test_a_version_without_a_census_takes_its_times_from_its_kin_never_its_peaks():
    """A cold build of a version the collection has no census for: the times of the same paths in another version's
    census and in what this node learned of other commits (the median where several know one), for the ETA only."""
    new = "sgl-kernel@0.3.20/120@0123456789ab"
    other_commit = {"sgl-kernel@0.3.20/120@ba9876543210:csrc/gemm/fp8_gemm_kernel.cu#1": {
        "peak_bytes": 15 * GIB, "seconds": 700.0}, "sgl-kernel@0.3.20/90:csrc/gemm/fp8_gemm_kernel.cu#1": {
        "peak_bytes": 9 * GIB, "seconds": 9000.0}, "other@0.3.20/120:csrc/gemm/fp8_gemm_kernel.cu#1": {
        "peak_bytes": 9 * GIB, "seconds": 9000.0}}
    seconds = census.similar_seconds(other_commit, [shipped(), {"format": "x"}, None, "text"], new)
    assert len(seconds) == 76, "every source of the shipped version is known by its path"
    assert seconds["csrc/gemm/fp8_gemm_kernel.cu"] == max(700.0, shipped()["sources"]["csrc/gemm/fp8_gemm_kernel.cu"]["seconds"])
    assert seconds["csrc/memory/store.cu"] == shipped()["sources"]["csrc/memory/store.cu"]["seconds"]
    assert census.similar_seconds({}, [shipped()], TREE) == {}, "the tree's own census is not its kin"
    assert census.similar_seconds({}, [shipped()], "sgl-kernel@0.3.20/90,120") == {}, "other archs: other times"
    assert census.similar_seconds(other_commit, [shipped()], "not a tree") == {}
    assert census.census_peaks(shipped(), new) == {}, "and admission takes no peak from it"


def test_the_real_tree_at_12_gib_is_refused_before_the_first_compile_with_the_smallest_limit():
    """Issue 35 "done when": the shipped census at a 12 GiB limit names each source over what one compile may hold
    alone and the smallest memory limit that builds the tree - fp8_gemm_kernel.cu's 15.13 GiB + 64 MiB."""
    ceiling = 12 * GIB - 64 * MIB
    big, smallest, message = census.refusal(census.census_peaks(shipped(), TREE), ceiling, TREE, 1.15)
    names = [policy.path_of(key) for key, _peak, _killed in big]
    assert names == ["csrc/gemm/fp8_blockwise_gemm_kernel.cu", "csrc/gemm/fp8_gemm_kernel.cu", "csrc/gemm/nvfp4_scaled_mm_kernels.cu",
                     "csrc/moe/cutlass_moe/w4a8/w4a8_grouped_mm_c3x.cu", "csrc/moe/fp8_blockwise_moe_kernel.cu"], big
    peak = shipped()["sources"]["csrc/gemm/fp8_gemm_kernel.cu"]["peak_bytes"]
    assert smallest == peak + 64 * MIB and abs(peak - 15.13 * GIB) < 0.01 * GIB
    assert "csrc/gemm/fp8_gemm_kernel.cu (15.1 GiB in the shipped census)" in message
    assert "the smallest memory limit that builds them: 15.2 GiB" in message
    assert census.refusal(census.census_peaks(shipped(), TREE), 16 * GIB - 64 * MIB, TREE, 1.15)[0] == []


def test_the_fastest_fixed_jobs_that_cannot_oom():
    """For a build without admission (MAX_JOBS, one nvcc thread): any j compiles may run together, so the j largest
    peaks must fit: 16 GiB fits only fp8_gemm alone (-j1); 64 GiB -j4 (15.1 + 14.2 + 13.8 + 13.4); 449 GiB every
    compile at once."""
    peaks = census.census_peaks(shipped(), TREE)
    assert census.safe_fixed_jobs(peaks, 16 * GIB - 512 * MIB, 2, TREE) == 1
    assert census.safe_fixed_jobs(peaks, 12 * GIB, 8, TREE) == 0
    assert census.safe_fixed_jobs(peaks, 64 * GIB - 512 * MIB, 32, TREE) == 4
    assert census.safe_fixed_jobs(peaks, 449 * GIB - 512 * MIB, 112, TREE) == 76
    assert census.safe_fixed_jobs({}, GIB, 2, TREE) is None


def test_a_census_is_made_of_what_finished_one_entry_per_path():
    """``--census`` (a fleet publishing its own): per path the finished entry with the largest peak, its time, threads
    and phases; killed, stopped, census and other trees' entries left out; bad entries dropped as peaks.json's."""
    tree = "t@1/120"
    peaks = {
        tree + ":a.cu#1": {"peak_bytes": 3 * GIB, "seconds": 90.0, "threads": 1, "phases": [["cicc", 3 * GIB]], "runs": 2, "at": 5},
        tree + ":a.cu#2": {"peak_bytes": 2 * GIB, "seconds": 60.0, "threads": 2},       # other flags, smaller: not it
        tree + ":b.cu#1": {"peak_bytes": 1 * GIB, "seconds": 10.0},
        tree + ":killed.cu#1": {"peak_bytes": 4 * GIB, "seconds": 30.0, "killed": True},
        tree + ":stopped.cu#1": {"peak_bytes": 1 * GIB, "seconds": 3.0, "stopped": True},
        tree + ":bad.cu#1": {"peak_bytes": "4GiB", "seconds": 3.0},
        "census:c.cu": {"peak_bytes": 5 * GIB, "seconds": 50.0},
        "t@2/120:d.cu#1": {"peak_bytes": 1 * GIB, "seconds": 5.0},
        "t@1/120@abc:e.cu#1": {"peak_bytes": 1 * GIB, "seconds": 5.0},
    }
    document = census.census_of(peaks, tree, "here, today")
    assert document == {"format": census.FORMAT, "tree": tree, "measured": "here, today", "sources": {
        "a.cu": {"peak_bytes": 3 * GIB, "seconds": 90.0, "threads": 1, "phases": [["cicc", 3 * GIB]]},
        "b.cu": {"peak_bytes": 1 * GIB, "seconds": 10.0}}}
    assert set(census.census_peaks(document, tree)) == {"census:a.cu", "census:b.cu"}, "it reads back as a census"
    assert census.census_of({}, tree, "x")["sources"] == {}
