# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""bench/replay.py, the replay simulator (issue 29 item 5): the real tree's record, the lower bound, .ninja_log and
peaks.json parsing, and the model (processor sharing, memory growth, the OOM killer's victim, the back-off) on builds
small enough to work out by hand. Its check against real builds: bench/replay_standin.py (docs/benchmarks.md)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO, "bench"))
import replay  # noqa: E402 pylint: disable=wrong-import-position

GIB = replay.GIB


def job(name, seconds, peak_gib, order=0, cpu=1.0):
    return replay.Job(name, seconds, peak_gib * GIB, order, cpu)


def test_the_real_trees_record_is_the_documented_table():
    jobs = replay.load_record(replay.DEFAULT_RECORD)
    assert len(jobs) == 76
    assert sum(j.seconds for j in jobs) == 12161
    assert round(sum(j.peak for j in jobs) / GIB, 1) == 261.5
    longest = max(jobs, key=lambda j: j.seconds)
    assert longest.name == "csrc/gemm/marlin/gptq_marlin.cu" and longest.seconds == 929
    # ninja's order is the manifest's: sgl-kernel's SOURCES list is alphabetical
    assert [j.name for j in sorted(jobs, key=lambda j: j.order)] == sorted(j.name for j in jobs)


def test_lower_bound_names_what_binds():
    jobs = replay.load_record(replay.DEFAULT_RECORD)
    assert replay.lower_bound(jobs, 2, 16 * GIB - replay.RESERVE) == (12161 / 2.0, "cpu")
    bound, binding = replay.lower_bound(jobs, 32, 64 * GIB - replay.RESERVE, replay.MARGIN)
    assert binding == "memory" and round(bound) == 1223     # FACTS.md's memory-area bound at the launcher's margin
    assert replay.lower_bound(jobs, 112, 449 * GIB - replay.RESERVE) == (929, "longest")


def test_ninja_log_last_build_of_each_output_wins():
    text = "# ninja log v5\n0\t1500\t0\ta.o\tx\n10\t3010\t0\tb.o\ty\n# a resumed build appends\n5000\t5400\t0\ta.o\tz\n"
    assert replay.parse_ninja_log(text) == {"a.o": 0.4, "b.o": 3.0}


@pytest.mark.parametrize("text, message", [
    ("0\t1\t0\ta.o\n", "first line must be '# ninja log vN'"),
    ("# ninja log v6\n0\t1\n", "line 2: expected start, end, mtime, output"),
    ("# ninja log v6\n0\tlate\t0\ta.o\tx\n", "line 2: start and end must be milliseconds"),
])
def test_ninja_log_errors_name_what_to_fix(text, message):
    with pytest.raises(replay.ReplayError, match=message):
        replay.parse_ninja_log(text)


def test_jobs_from_a_build_match_peaks_to_objects():
    log = {"CMakeFiles/mixed.dir/src/a_heavy_1.c.o": 3.2, "CMakeFiles/mixed.dir/src/b_light_01.c.o": 1.6, "libmixed.a": 0.1}
    peaks = {"src/b_light_01.c": {"peak_bytes": 50 * 1024 ** 2}, "src/a_heavy_1.c": {"peak_bytes": 310 * 1024 ** 2}}
    jobs = replay.jobs_from_build(log, peaks)
    assert [(j.name, j.seconds, j.order) for j in jobs] == [("src/a_heavy_1.c", 3.2, 0), ("src/b_light_01.c", 1.6, 1)]
    with pytest.raises(replay.ReplayError, match="'src/gone.c': no .ninja_log output ends with 'src/gone.c.o'"):
        replay.jobs_from_build(log, {"src/gone.c": {"peak_bytes": 1}})


def test_processor_sharing_slows_every_running_compile():
    # three 6 s compiles on 2 cores at -j3: each progresses at 2/3, all end at 9 s
    jobs = [job(n, 6, 1, i) for i, n in enumerate("abc")]
    result = replay.Sim(jobs, 2, 64, replay.Fixed(3), {}).run()
    assert result["makespan"] == pytest.approx(9.0) and result["oom_kills"] == 0
    # a compile that needs half a core (it waits on I/O) does not slow the others until the cores are full
    halves = [job(n, 6, 1, i, cpu=0.5) for i, n in enumerate("abcd")]
    assert replay.Sim(halves, 2, 64, replay.Fixed(4), {}).run()["makespan"] == pytest.approx(6.0)


def test_oom_kills_the_largest_then_guarded_build_halves_jobs():
    # a (10 s, 10 GiB) and b (10 s, 8 GiB) grow over their first 5 s: 3.6 GiB/s together pass 16 GiB at 4.44 s;
    # the OOM killer takes a (8.9 GiB then, the larger), ninja drains b (ends at 10 s), the resumed -j1 reruns a
    jobs = [job("a", 10, 10, 0), job("b", 10, 8, 1)]
    sim = replay.Sim(jobs, 2, 16, replay.Fixed(2), {})
    result = sim.run()
    assert result["oom_kills"] == 1 and result["final_jobs"] == 1
    assert result["makespan"] == pytest.approx(20.0)
    oom = [t for t in sim.trace if t[1] == "oom"]
    assert oom == [(pytest.approx(16 / 3.6), "oom", "a")]


def test_a_source_too_big_for_the_node_fails_the_replay():
    result = replay.Sim([job("huge", 10, 20)], 2, 16, replay.Fixed(1), {}).run()
    assert result["failed"] == "huge killed %d times" % replay.MAX_KILLS and result["makespan"] == float("inf")


def test_longest_fit_starts_the_longest_fitting_compile_first():
    # 2 cores, 16 GiB: the heavy long one first, a light one beside it; the other heavy waits (two do not fit)
    jobs = [job("a_light", 5, 1, 0), job("b_heavy_short", 4, 8, 1), job("c_heavy_long", 20, 8, 2), job("d_light", 6, 1, 3)]
    sim = replay.Sim(jobs, 2, 16, replay.LongestFit(), replay.knowledge(jobs, "warm"))
    result = sim.run()
    starts = [(round(t, 3), name) for t, kind, name in sim.trace if kind == "start"]
    assert starts[:2] == [(0, "c_heavy_long"), (0, "d_light")]
    assert starts[2] == (6, "a_light")
    assert result["oom_kills"] == 0 and result["makespan"] == pytest.approx(24.0)   # b after c: 20 + 4


def test_first_come_head_blocks_a_waiting_ninja_slot():
    # ninja -j2 on 2 cores: the heavy head waits for the running heavy one and holds the second ninja slot
    jobs = [job("a_heavy", 10, 8, 0), job("b_heavy", 10, 8, 1), job("c_light", 10, 1, 2)]
    sim = replay.Sim(jobs, 2, 16, replay.FirstCome(), replay.knowledge(jobs, "warm"))
    result = sim.run()
    assert result["oom_kills"] == 0 and result["makespan"] == pytest.approx(20.0)
    assert [n for t, k, n in sim.trace if k == "start" and t == 0] == ["a_heavy"]


def test_cold_unknown_sources_explore_alone_and_never_oom():
    jobs = [job("a", 10, 9, 0), job("b", 10, 9, 1), job("c", 10, 1, 2)]
    result = replay.Sim(jobs, 2, 16, replay.LongestFit(), {}).run()
    assert result["oom_kills"] == 0
    at_default = replay.Sim(jobs, 2, 16, replay.LongestFit("default"), {}).run()
    assert at_default["oom_kills"] >= 1     # two unknown 9 GiB sources admitted at the 5 GiB default
    # the first unknown runs alone; the next reserves as much as the heaviest seen (a's 9 GiB x margin): one at a time
    sim = replay.Sim(jobs, 2, 16, replay.LongestFit("heaviest"), {})
    assert sim.run()["oom_kills"] == 0
    assert [(t, n) for t, k, n in sim.trace if k == "start"] == [(0, "a"), (10, "b"), (20, "c")]


def test_the_issues_targets_on_the_real_tree():
    """Longest-fit with the peaks known (warm) or seeded: 0 OOM kills on every shape and, warm, within 1.15x of the
    bound of a launcher that reserves peak x margin (the numbers: docs/benchmarks.md, Replay simulator)."""
    jobs = replay.load_record(replay.DEFAULT_RECORD)
    for cores, mem_gib in replay.SHAPES:
        bound = replay.lower_bound(jobs, cores, mem_gib * GIB - replay.RESERVE, replay.MARGIN)[0]
        for kind in ("warm", "seeded"):
            result = replay.replay(jobs, cores, mem_gib, replay.LongestFit(), kind)
            assert result["oom_kills"] == 0, (cores, mem_gib, kind)
            if kind == "warm":   # 1.150 at 2 cores / 16 GiB (6,995 s against 6,080)
                assert result["makespan"] / bound < 1.151, (cores, mem_gib, result)


def test_bad_shapes_and_records_are_named(tmp_path):
    with pytest.raises(replay.ReplayError, match="--shapes: give CORESxGIB"):
        replay.parse_shapes("2/16")
    bad = tmp_path / "record.json"
    bad.write_text('{"objects": [{"source": "a.cu"}]}')
    with pytest.raises(replay.ReplayError, match="needs source, seconds and peak_gib"):
        replay.load_record(str(bad))
    assert replay.main(["--record", str(tmp_path / "none.json")]) == 2


def test_a_build_directorys_record_replays_from_the_command_line(tmp_path, capsys):
    # a .ninja_log as CMake + ninja 1.11 write it (v5; a link step the peaks do not name), and the launcher's peaks.json
    log = tmp_path / ".ninja_log"
    log.write_text("# ninja log v5\n2\t3012\t0\tCMakeFiles/mixed.dir/src/a_heavy_1.c.o\tab\n"
                   "3013\t4530\t0\tCMakeFiles/mixed.dir/src/b_light_01.c.o\tcd\n4531\t4560\t0\tlibmixed.a\tef\n")
    peaks = tmp_path / "peaks.json"
    peaks.write_text('{"src/a_heavy_1.c": {"peak_bytes": 324009984, "seconds": 3.0}, '
                     '"src/b_light_01.c": {"peak_bytes": 51380224, "seconds": 1.5}}')
    assert replay.main(["--ninja-log", str(log), "--peaks", str(peaks), "--shapes", "2x1", "--orders", "0",
                        "--no-results"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("2 compiles, 5 CPU-s, longest 3 s")
    assert "| **2 cores / 1 GiB** | lower bound (longest" in out and "| fixed -j2 | 3 s |" in out
    assert replay.main(["--ninja-log", str(log)]) == 2
    assert "--ninja-log needs --peaks" in capsys.readouterr().err


def test_a_replay_that_never_ends_says_so():
    jobs = [job("a", 10, 1, 0), job("b", 10, 1, 1)]
    with pytest.raises(replay.ReplayError, match="no end after 3 events"):
        replay.Sim(jobs, 1, 16, replay.Fixed(1), {}).run(max_events=3)
