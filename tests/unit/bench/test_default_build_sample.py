# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""bench/default_build_sample.py (issue 29 item 6): the tree's default -gencode list, the nvcc command line as CMake
writes it, the /proc sampler's parsing and the summary/model over recorded compiles. Its measurements:
docs/benchmarks.md, "The default build, measured on the real tree"."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import sys

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO, "bench"))
import default_build_sample as dbs  # noqa: E402 pylint: disable=wrong-import-position

GIB = 1 << 30


def arches(version, machine="x86_64"):
    return [arch for arch, _flag in dbs.default_gencodes(version, machine)]


def test_cuda_13_on_x86_64_is_seven_arches_in_the_cmakelists_order():
    assert arches("13.0") == ["sm_90", "sm_80", "sm_89", "sm_100a", "sm_120a", "sm_103a", "sm_90a"]
    assert dict(dbs.default_gencodes("13.0"))["sm_100a"] == "-gencode=arch=compute_100a,code=sm_100a"


@pytest.mark.parametrize("version, machine, expected", [
    ("12.8", "x86_64", ["sm_90", "sm_80", "sm_89", "sm_100a", "sm_120a", "sm_90a"]),
    ("12.4", "x86_64", ["sm_90", "sm_80", "sm_89", "sm_90a"]),
    ("13.0", "aarch64", ["sm_90", "sm_100a", "sm_120a", "sm_103a", "sm_110a", "sm_121a", "sm_90a"]),
    ("12.9", "aarch64", ["sm_90", "sm_100a", "sm_120a", "sm_101a", "sm_90a"]),
])
def test_the_arch_list_follows_the_toolkit_and_the_machine(version, machine, expected):
    assert arches(version, machine) == expected


def test_a_tree_without_those_gencodes_is_named():
    text = '"-gencode=arch=compute_90,code=sm_90"\n"-gencode=arch=compute_90a,code=sm_90a"'
    missing = dbs.gencodes_missing_from(text, dbs.default_gencodes("12.4"))
    assert missing == ["-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_89,code=sm_89"]


def test_select_keeps_the_trees_order_and_refuses_an_unknown_arch():
    gencodes = dbs.default_gencodes("13.0")
    assert [a for a, _f in dbs.select_gencodes(gencodes, ["sm_90a", "sm_80"])] == ["sm_80", "sm_90a"]
    with pytest.raises(ValueError, match="sm_75 is not in the tree's default list"):
        dbs.select_gencodes(gencodes, ["sm_75"])


def test_the_command_line_is_cmakes_for_the_target():
    includes = [("user", "/t/include"), ("system", "/torch/include")]
    gencodes = dbs.select_gencodes(dbs.default_gencodes("13.0"), ["sm_100a"])
    argv = dbs.nvcc_argv("nvcc", "/t/csrc/a.cu", "/o/a.o", includes, gencodes, 4)
    assert argv[0] == "nvcc" and argv[-6:] == ["-x", "cu", "-c", "/t/csrc/a.cu", "-o", "/o/a.o"]
    assert "-I/t/include" in argv and argv[argv.index("-isystem") + 1] == "/torch/include"
    assert "--threads=4" in argv and "--compress-mode=size" in argv and "-use_fast_math" not in argv
    assert [a for a in argv if a.startswith("-gencode")] == ["-gencode=arch=compute_100a,code=sm_100a"]
    assert "-Dcommon_ops_sm100_build_EXPORTS" in argv and "--expt-relaxed-constexpr" in argv
    sm90 = dbs.nvcc_argv("nvcc", "a.cu", "a.o", [], gencodes, 1, target="sm90", cuda_version="12.8")
    assert "-use_fast_math" in sm90 and "--compress-mode=size" not in sm90
    with pytest.raises(ValueError, match="target must be one of"):
        dbs.nvcc_argv("nvcc", "a.cu", "a.o", [], gencodes, 1, target="sm120")


def test_proc_status_and_the_tree_sum():
    status = {1: "Name:\tcicc\nVmHWM:\t 2097152 kB\nVmRSS:\t 1048576 kB\n",
              2: "Name:\tptxas\nVmHWM:\t 1024 kB\nVmRSS:\t 512 kB\n",
              3: ""}  # gone between listing and reading
    total, hwm = dbs.tree_sample([1, 2, 3], lambda pid: dbs.parse_status(status[pid]))
    assert total == GIB + 512 * 1024
    assert hwm == {1: ("cicc", 2 * GIB), 2: ("ptxas", 1024 * 1024)}
    assert dbs.peak_by_tool({1: ("cicc", 5), 2: ("cicc", 7), 3: ("ptxas", 1)}) == {"cicc": 7, "ptxas": 1}


def record(arches_, threads, peak_gib, wall, oom=False, rc=0):
    return {"source": "csrc/a.cu", "arches": arches_, "threads": threads, "peak_tree_rss": peak_gib * GIB,
            "largest_process_hwm": peak_gib * GIB, "cgroup_peak": peak_gib * GIB, "wall_s": wall, "cpu_s": wall,
            "oom_killed": oom, "rc": rc, "load_before": [1.0, 1.0, 1.0], "by_tool": {"cicc": peak_gib * GIB}}


def test_the_model_compares_threads_with_the_per_arch_peaks():
    recs = [record(["sm_90a"], 1, 3.0, 100), record(["sm_100a"], 1, 2.0, 60), record(["sm_80"], 1, 1.0, 40),
            record(["sm_90a", "sm_100a", "sm_80"], 1, 3.1, 190), record(["sm_90a", "sm_100a", "sm_80"], 2, 5.2, 110)]
    model = dbs.summarise(recs)["csrc/a.cu"]["model"]
    assert model["sum_of_arch_peaks_gib"] == 6.0 and model["max_arch_peak_gib"] == 3.0
    assert model["threads"]["1"]["over_max_arch"] == 1.03
    two = model["threads"]["2"]
    assert two["over_sum_of_top_n_arch_peaks"] == round(5.2 / 5.0, 2) and two["over_threads_x_max"] == round(5.2 / 6, 2)
    assert model["threads"]["1"]["wall_over_sum_of_arch_wall"] == 0.95


def test_an_oom_killed_arch_is_shown_and_left_out_of_the_model():
    recs = [record(["sm_90a"], 1, 20.0, 300, oom=True, rc=-9), record(["sm_100a"], 1, 2.0, 60),
            record(["sm_90a", "sm_100a"], 1, 2.5, 80)]
    sources = dbs.summarise(recs)
    assert sources["csrc/a.cu"]["model"]["arches_alone"] == 1
    assert "> limit (OOM)" in dbs.markdown(sources)
    json.dumps(sources)  # the replay data file is plain JSON
    assert dbs.summarise([record(["sm_80"], 1, 1.0, 10)])["csrc/a.cu"]["model"] is None


def test_the_replay_data_file_is_what_replay_reads(tmp_path):
    import replay  # pylint: disable=import-outside-toplevel
    recs = [dict(record(["sm_90a"], 1, 20.0, 300, oom=True, rc=-9), limit_bytes=20 * GIB),
            record(["sm_100a"], 1, 2.0, 60), record(["sm_90a", "sm_100a"], 2, 3.5, 50)]
    data = dbs.replay_data(recs, "test")
    assert [o["source"] for o in data["objects"]] == ["csrc/a.cu@sm_100a"]
    assert data["oom_killed"][0]["oom_at_gib"] == 20.0
    path = tmp_path / "sample.json"
    path.write_text(json.dumps(data))
    jobs = replay.load_record(str(path))
    assert [(j.name, j.seconds, j.peak) for j in jobs] == [("csrc/a.cu@sm_100a", 60.0, 2.0 * GIB)]


def test_cpu_splits_into_a_shared_part_and_a_part_per_arch():
    # 3 arches: shared 40 s, 20 s per arch -> alone 60 s each (180), all three at one thread 100 s
    assert dbs.cpu_split(180.0, 100.0, 3) == {"shared_s": 40.0, "per_arch_s": 20.0}
    recs = [record([a], 1, 1.0, 60) for a in ("sm_80", "sm_89", "sm_90")] + [record(["sm_80", "sm_89", "sm_90"], 1, 1.0, 100)]
    assert dbs.summarise(recs)["csrc/a.cu"]["model"]["cpu_split"] == {"shared_s": 40.0, "per_arch_s": 20.0}
