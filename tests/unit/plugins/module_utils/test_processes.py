# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build-process scan on fixture /proc trees (real processes and reaping: tests/host/test_processes_host.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._facts._processes import (
    DEFAULT_NAMES,
    collect_build_processes,
    filter_selection,
    parse_stat,
    parse_status_uid,
    short_cmdline,
    split_cmdline,
    summarize,
    tree_of,
)

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "processes")
BUILD = os.path.join(FIXTURES, "build")
SELF_TREE = os.path.join(FIXTURES, "self_tree")


def scan(root=BUILD, **kwargs):
    kwargs.setdefault("clock_ticks", 100)
    kwargs.setdefault("page_size", 4096)
    return collect_build_processes(root=root, **kwargs)


def pids(facts):
    return [proc["pid"] for proc in facts["processes"]]


def by_pid(facts):
    return dict((proc["pid"], proc) for proc in facts["processes"])


# --- parsers ----------------------------------------------------------------------------------

STAT_TAIL = " 0 -1 4194304 100 0 0 0 12 3 0 0 20 0 1 0 34440 3133440 382 18446744073709551615 0 0\n"


@pytest.mark.parametrize("text, expected", [
    ("6598 (cat) R 6596 6596 2683" + STAT_TAIL,
     {"pid": 6598, "comm": "cat", "state": "R", "ppid": 6596, "start_ticks": 34440, "rss_pages": 382}),
    # comm holds spaces and parentheses: it ends at the LAST ')'
    ("42 (a) b (c)) S 7 42 42" + STAT_TAIL,
     {"pid": 42, "comm": "a) b (c)", "state": "S", "ppid": 7, "start_ticks": 34440, "rss_pages": 382}),
    ("43 () Z 1 43 43" + STAT_TAIL,
     {"pid": 43, "comm": "", "state": "Z", "ppid": 1, "start_ticks": 34440, "rss_pages": 382}),
    (b"44 (ninja) S 1 44 44" + STAT_TAIL.encode(),
     {"pid": 44, "comm": "ninja", "state": "S", "ppid": 1, "start_ticks": 34440, "rss_pages": 382}),
])
def test_parse_stat(text, expected):
    parsed = parse_stat(text)
    assert dict((key, parsed[key]) for key in expected) == expected


@pytest.mark.parametrize("text", ["", "garbage", "12 (x) S 1 2 3"])
def test_parse_stat_rejects(text):
    with pytest.raises(ValueError):
        parse_stat(text)


@pytest.mark.parametrize("text, uid", [
    ("Name:\tninja\nUid:\t1000\t1000\t1000\t1000\nGid:\t1000\n", 1000),
    ("Name:\tx\nUid:\t0\t0\t0\t0\n", 0),
    ("Name:\tx\n", None),
])
def test_parse_status_uid(text, uid):
    assert parse_status_uid(text) == uid


@pytest.mark.parametrize("data, argv", [
    (b"ninja\0-j\0008\0", ["ninja", "-j", "8"]),
    (b"sshd: root@notty", ["sshd: root@notty"]),   # rewritten title: no trailing NUL
    (b"", []),                                      # zombie or kernel thread
    (b"a b\0\0c\0", ["a b", "", "c"]),
])
def test_split_cmdline(data, argv):
    assert split_cmdline(data) == argv


# --- the scan on fixture trees ------------------------------------------------------------------

DEFAULT_HITS = [200, 210, 211, 212, 220, 229, 230, 300, 301, 400]


@pytest.mark.parametrize("kwargs, expected_pids", [
    # kernel thread "cc1" (3), vim/grep/python/less mentioning cmake/ninja (500-503), the pip
    # build (600) and the truncated g++/gcc comms (410, 411) are not build processes by default
    ({}, DEFAULT_HITS),
    ({"extra_names": ["x86_64-linux-gnu-g++-12"]}, sorted(DEFAULT_HITS + [410])),
    ({"patterns": [r"pip wheel .*sgl-kernel"]}, sorted(DEFAULT_HITS + [600])),
    ({"names": ["ld"]}, []),                       # exact: ld.gold is not ld
    ({"names": ["ld.*"]}, [230]),
    ({"names": ["cmake"]}, [400]),                 # by argv[0]: its comm is "tool (x) y)"
    ({"names": [], "patterns": [r"^ninja "]}, [200, 300]),
    ({"names": []}, []),
    ({"names": ["vim", "grep"]}, [500, 501]),
])
def test_collect_selection(kwargs, expected_pids):
    assert pids(scan(**kwargs)) == expected_pids


def test_collect_facts_shape():
    facts = scan()
    assert facts["count"] == 10
    assert facts["by_name"] == {"ninja": 2, "nvcc": 1, "cicc": 1, "ptxas": 1, "cc1plus": 2,
                                "collect2": 1, "ld.gold": 1, "cmake": 1}
    # 24 pid directories; 999 vanished before its stat was read (998 after: scanned, not counted)
    assert facts["scanned"] == 23
    assert facts["names"] == list(DEFAULT_NAMES)
    assert facts["patterns"] == []
    assert facts["errors"] == []
    rss_pages = 3000 + 2560 + 500000 + 2560 + 100000 + 2560 + 2560 + 1000 + 0 + 2560
    assert facts["total_rss_bytes"] == rss_pages * 4096
    assert facts["total_rss_human"] == "2.4Gi"


@pytest.mark.parametrize("pid, expected", [
    (200, {"name": "ninja", "ppid": 101, "user": None, "uid": 1000, "state": "S", "age_seconds": 2000,
           "rss_bytes": 3000 * 4096, "cmdline": "ninja -j 8", "orphaned": False, "zombie": False,
           "matched_by": "name"}),
    (300, {"name": "ninja", "ppid": 1, "uid": 0, "user": "root", "age_seconds": 9000, "orphaned": True,
           "zombie": False}),
    (301, {"name": "cc1plus", "ppid": 300, "state": "Z", "zombie": True, "orphaned": False,
           "cmdline": "[cc1plus]", "rss_bytes": 0}),
    (230, {"name": "ld.gold", "matched_by": "name"}),
    (400, {"name": "cmake", "comm": "tool (x) y)", "ppid": 101, "state": "S", "cmdline": "/opt/cmake-3.31/bin/cmake --build ."}),
])
def test_collect_process_fields(pid, expected):
    proc = by_pid(scan())[pid]
    if "user" in expected and expected["user"] is None:
        expected = dict(expected)
        del expected["user"]   # uid 1000 may have no name on the test host
    assert dict((key, proc[key]) for key in expected) == expected


def test_truncated_comm_is_decided_by_exe():
    procs = by_pid(scan(extra_names=["x86_64-linux-gnu-g++-12"]))
    assert procs[410]["name"] == "x86_64-linux-gnu-g++-12"
    assert procs[410]["comm"] == "x86_64-linux-gn"
    assert 411 not in procs   # same 15-character comm, but its exe is gcc-12


def test_pattern_match_is_labelled():
    proc = by_pid(scan(patterns=["sgl-kernel/$"]))[600]
    assert (proc["matched_by"], proc["name"]) == ("pattern", "python3")
    assert scan(patterns=["sgl-kernel/$"])["patterns"] == ["sgl-kernel/$"]


def test_cmdline_is_cut_to_200_characters(tmp_path):
    proc_dir = tmp_path / "proc" / "77"
    proc_dir.mkdir(parents=True)
    (tmp_path / "proc" / "uptime").write_text("100.0 100.0\n")
    (proc_dir / "stat").write_text("77 (nvcc) S 1 77 77" + STAT_TAIL)
    (proc_dir / "status").write_text("Uid:\t0\t0\t0\t0\n")
    (proc_dir / "cmdline").write_bytes(b"nvcc\0" + b"-gencode=arch=compute_120a,code=sm_120a\0" * 20)
    cmdline = scan(root=str(tmp_path))["processes"][0]["cmdline"]
    assert len(cmdline) == 200 and cmdline.startswith("nvcc -gencode") and cmdline.endswith("...")


@pytest.mark.parametrize("self_pid, expected_pids", [
    # no self: every make/ninja/cc1plus/cmake counts
    (None, [60, 62, 64, 65, 70, 71]),
    # the module (63) runs under make -> sh -> make and has started ninja -> cc1plus: none count
    (63, [70, 71]),
    (64, [70, 71]),
    (70, [60, 62, 64, 65]),
])
def test_self_tree_is_never_counted(self_pid, expected_pids):
    assert pids(scan(root=SELF_TREE, self_pid=self_pid)) == expected_pids


def test_missing_proc_is_an_error_not_a_crash(tmp_path):
    facts = scan(root=str(tmp_path))
    assert facts["count"] == 0
    assert facts["scanned"] == 0
    assert [error.split(":")[0] for error in facts["errors"]] == [str(tmp_path / "proc" / "uptime"), str(tmp_path / "proc")]


@pytest.mark.parametrize("kwargs, expected_pids", [
    ({}, DEFAULT_HITS),
    ({"orphaned_only": True}, [300]),
    ({"older_than": 5000}, [300, 301]),
    ({"older_than": 0}, DEFAULT_HITS),
    ({"uid": 1000}, [200, 210, 211, 212, 220, 229, 230, 400]),
    ({"uid": 0, "orphaned_only": True}, [300]),
])
def test_filter_selection(kwargs, expected_pids):
    selected = filter_selection(scan()["processes"], **kwargs)
    assert [proc["pid"] for proc in selected] == expected_pids


def test_filter_selection_rejects_negative_age():
    with pytest.raises(ValueError) as info:
        filter_selection([], older_than=-1)
    assert "older_than" in str(info.value)


@pytest.mark.parametrize("pid, parent_of, tree", [
    (None, {2: 1}, set()),
    (5, {5: 3, 3: 1, 1: 0, 6: 5, 7: 6, 8: 1}, {5, 3, 1, 6, 7}),   # itself, ancestors, descendants; not 8
    (5, {5: 5}, {5}),                                             # a loop in a broken tree ends
])
def test_tree_of(pid, parent_of, tree):
    assert tree_of(pid, parent_of) == tree


@pytest.mark.parametrize("argv, limit, line", [
    (["ninja", "-C", "b"], 200, "ninja -C b"),
    (["x" * 10], 8, "xxxxx..."),
    ([], 200, ""),
])
def test_short_cmdline(argv, limit, line):
    assert short_cmdline(argv, limit) == line


def test_summarize_counts_by_name():
    facts = summarize([{"name": "ninja", "rss_bytes": 1024}, {"name": "ninja", "rss_bytes": None}], ["ninja"], [], 9)
    assert (facts["count"], facts["by_name"], facts["total_rss_bytes"], facts["scanned"]) == (2, {"ninja": 2}, 1024, 9)


def long_argv_tree(tmp_path, count, argv_bytes):
    """``count`` plain processes (python3) whose command lines are ``argv_bytes`` long, and one ninja."""
    (tmp_path / "proc").mkdir(parents=True)
    (tmp_path / "proc" / "uptime").write_text("100.0 100.0\n")
    for pid in range(100, 100 + count + 1):
        proc_dir = tmp_path / "proc" / str(pid)
        proc_dir.mkdir()
        comm = "ninja" if pid == 100 + count else "python3"
        (proc_dir / "stat").write_text("%d (%s) S 1 %d %d" % (pid, comm, pid, pid) + STAT_TAIL)
        (proc_dir / "status").write_text("Uid:\t0\t0\t0\t0\n")
        (proc_dir / "cmdline").write_bytes(b"/usr/bin/python3\0" + b"x" * argv_bytes + b"\0needle\0")
    return str(tmp_path)


def test_long_command_lines_are_read_bounded(tmp_path):
    """Issue 18 finding 15: every process's whole command line was read (5,000 x 100 KB: 1.5 GiB). Per process
    only what a name or a pattern needs is read, and all of them together stay under CMDLINE_TOTAL_MAX."""
    import tracemalloc  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _processes  # pylint: disable=import-outside-toplevel
    root = long_argv_tree(tmp_path, 40, 2 * 1024 * 1024)   # 40 command lines of 2 MiB (the kernel's most)
    peaks = []
    for patterns in ([], ["needle"]):
        tracemalloc.start()  # started afresh for each scan (reset_peak is Python >= 3.9)
        try:
            facts = scan(root=root, patterns=patterns)
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
    by_name_peak, patterns_peak = peaks
    with_patterns = facts
    facts = scan(root=root)
    assert facts["count"] == 1 and facts["processes"][0]["name"] == "ninja"
    assert by_name_peak < 2 * 1024 * 1024, "a scan by name read %d bytes" % by_name_peak
    assert patterns_peak < 40 * (_processes.PATTERN_TEXT_MAX + 1) * 4 + 4 * 1024 * 1024, patterns_peak
    # "needle" sits past the first PATTERN_TEXT_MAX characters, all a pattern searches (as documented)
    assert with_patterns["count"] == 1 and not with_patterns["errors"]


def test_many_processes_share_the_total(tmp_path, monkeypatch):
    from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _processes  # pylint: disable=import-outside-toplevel
    monkeypatch.setattr(_processes, "CMDLINE_TOTAL_MAX", 64 * 1024)
    root = long_argv_tree(tmp_path, 30, 8000)
    facts = scan(root=root, patterns=["needle"])
    # 31 processes share 64 KiB: each is searched on its first 4097 bytes (argv[0] is never cut)
    assert facts["count"] == 1 and "first 4097 bytes only (31 processes share the 65536 bytes" in facts["errors"][0]
    root_short = long_argv_tree(tmp_path / "short", 3, 100)
    assert scan(root=root_short, patterns=["needle"])["count"] == 4 and not scan(root=root_short, patterns=["needle"])["errors"]
