# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_process_match: build process or not, orphan or not, too broad to reap, and the bounded pattern search."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import time

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._process_match import (
    DEFAULT_NAMES,
    NameMatcher,
    basename,
    broad_names,
    classify_process,
    compile_patterns,
    is_orphan,
    non_build_selected,
    parse_worker_output,
    refuse_broad,
    search_patterns,
    service_cgroup,
)

DEFAULT = NameMatcher(DEFAULT_NAMES)
GXX = NameMatcher(list(DEFAULT_NAMES) + ["x86_64-linux-gnu-g++-12"])


@pytest.mark.parametrize("names, name, matches", [
    (DEFAULT_NAMES, "ld.gold", True),
    (DEFAULT_NAMES, "ld.lld", True),
    (DEFAULT_NAMES, "ld", True),
    (DEFAULT_NAMES, "lld", False),
    (DEFAULT_NAMES, "cudafe++", True),
    (DEFAULT_NAMES, "cmake-gui", False),
    (DEFAULT_NAMES, "vim", False),
    (["ld"], "ld.gold", False),
    (["cc1*"], "cc1plus", True),
])
def test_name_matcher(names, name, matches):
    assert NameMatcher(names)(name) is matches


@pytest.mark.parametrize("build, values, message", [
    (NameMatcher, ["/usr/bin/ninja"], "names: '/usr/bin/ninja' holds '/'"),
    (NameMatcher, ["ninja\x00"], "names: 'ninja\\x00' holds a NUL byte"),
    (NameMatcher, [""], "names: '' is not a process name"),
    (compile_patterns, ["ninja("], "patterns: 'ninja(' is not a valid regular expression: missing ), unterminated subpattern"),
    (compile_patterns, ["x{99999999999}"], "patterns: 'x{99999999999}' is not a valid regular expression"),  # OverflowError in re
    (compile_patterns, [""], "patterns: '' is not a regular expression"),
], ids=["name-with-slash", "name-with-nul", "empty-name", "bad-pattern", "overflowing-pattern", "empty-pattern"])
def test_bad_names_and_patterns_are_refused_by_their_option(build, values, message):
    with pytest.raises(ValueError) as info:
        build(values)
    assert message in str(info.value)


@pytest.mark.parametrize("path, name", [
    ("/usr/bin/ninja", "ninja"),
    ("/usr/bin/ninja (deleted)", "ninja"),
    ("ninja", "ninja"),
    ("/opt/cmake/bin/cmake/", "cmake"),
])
def test_basename(path, name):
    assert basename(path) == name


# (comm, matcher, exe basename, argv, pattern hit) -> (matched_by, name)
CLASSIFY = [
    # a whole comm decides alone, before anything else is read
    ("ninja", DEFAULT, None, None, False, ("name", "ninja")),
    ("cc1plus", DEFAULT, None, None, False, ("name", "cc1plus")),
    ("ld.gold", DEFAULT, None, None, False, ("name", "ld.gold")),
    # a word in the command line is never a name: vim CMakeLists.txt, grep cmake, python build_cmake.py
    ("vim", DEFAULT, None, ["vim", "CMakeLists.txt"], False, (None, None)),
    ("grep", DEFAULT, None, ["grep", "cmake"], False, (None, None)),
    ("python3", DEFAULT, None, ["python3", "build_cmake.py"], False, (None, None)),
    # comm renamed by the program (cmake's is "tool (x) y)"): argv[0] decides
    ("tool (x) y)", DEFAULT, None, ["/opt/cmake-3.31/bin/cmake", "--build", "."], False, ("name", "cmake")),
    # 15 characters: maybe cut by the kernel; the exe link decides
    ("x86_64-linux-gn", GXX, None, None, False, (None, None)),            # not read yet: undecided
    ("x86_64-linux-gn", GXX, "x86_64-linux-gnu-g++-12", ["x86_64-linux-gnu-g++-12"], False,
     ("name", "x86_64-linux-gnu-g++-12")),
    ("x86_64-linux-gn", GXX, "x86_64-linux-gnu-gcc-12", ["x86_64-linux-gnu-gcc-12"], False, (None, None)),
    # nothing but the cut comm (a zombie: empty argv, no exe): the comm stands for the name it starts
    ("x86_64-linux-gn", GXX, None, [], False, ("name", "x86_64-linux-gn")),
    ("x86_64-linux-gn", DEFAULT, None, [], False, (None, None)),
    # a pattern hit is labelled as such, under the comm
    ("python3", DEFAULT, None, ["python3", "-m", "pip", "wheel", "."], True, ("pattern", "python3")),
    ("ninja", DEFAULT, None, ["ninja"], True, ("name", "ninja")),           # a name wins over a pattern
    ("", DEFAULT, None, [], False, (None, None)),
]


@pytest.mark.parametrize("comm, matcher, exe_name, argv, pattern_hit, expected", CLASSIFY)
def test_classify_process(comm, matcher, exe_name, argv, pattern_hit, expected):
    assert classify_process(comm, matcher, exe_name, argv, pattern_hit) == expected


def _p(pid, ppid, pgrp, session):
    return {"pid": pid, "ppid": ppid, "pgrp": pgrp, "session": session}


SYSTEMD = dict(_p(1, 0, 1, 1), build_tool=False)
SSHD_INIT = dict(_p(1, 0, 1, 1), build_tool=False)
MAKE_INIT = dict(_p(1, 0, 1, 1), build_tool=True)
TINI = dict(_p(1, 0, 1, 1), build_tool=False)

ORPHANS = [
    # a job of an ssh login that ended: its session leader (the shell, pid 250) is gone
    ("ninja left by a closed ssh session", _p(300, 1, 250, 250), SSHD_INIT, True),
    ("nohup make & in an interactive shell, shell gone", _p(400, 1, 400, 250), SYSTEMD, True),
    ("child of a live make", _p(301, 300, 250, 250), SSHD_INIT, False),
    ("pid 1 itself", _p(1, 0, 1, 1), SYSTEMD, False),
    # docker run img make -j: make is pid 1, its jobs are its children
    ("job of make as pid 1", _p(7, 1, 1, 1), MAKE_INIT, False),
    ("cc1plus re-parented to make as pid 1", _p(9, 1, 1, 1), MAKE_INIT, False),
    # docker run --init / tini -- make: tini starts make as a process group leader in its own session
    ("make started by tini", _p(7, 1, 7, 1), TINI, False),
    ("compiler re-parented to tini after its sh died", _p(12, 1, 7, 1), TINI, True),
    # dumb-init and systemd start their command / service in a new session
    ("command of dumb-init", _p(7, 1, 7, 7), TINI, False),
    ("systemd-run service", _p(5000, 1, 5000, 5000), SYSTEMD, False),
    # pid 1 unreadable: only the process's own evidence counts
    ("orphan, init unknown", _p(300, 1, 250, 250), None, True),
    ("session leader, init unknown", _p(300, 1, 300, 300), None, False),
]


def _started(proc, ticks):
    return dict(proc, start_ticks=ticks)


# (what, proc, init, the process's service_cgroup, orphan); 100 clock ticks a second, init started at tick 1000
SESSION_LEADERS = [
    ("command of dumb-init, started with it", _started(_p(7, 1, 7, 7), 1003), _started(TINI, 1000), None, False),
    ("setsid nvcc whose shell exited, a minute after init", _started(_p(90, 1, 90, 90), 7000), _started(TINI, 1000), None, True),
    ("setsid nvcc in an ssh login's scope", _started(_p(90, 1, 90, 90), 1001), _started(SYSTEMD, 1000), "login", True),
    ("systemd service started an hour after boot", _started(_p(5000, 1, 5000, 5000), 360000), _started(SYSTEMD, 1000),
     "service", False),
    ("start time unknown: no evidence, spared", _p(90, 1, 90, 90), _started(TINI, 1000), None, False),
]


@pytest.mark.parametrize("what, proc, init, orphan", ORPHANS, ids=[row[0] for row in ORPHANS])
def test_is_orphan(what, proc, init, orphan):
    assert is_orphan(proc, init) is orphan


@pytest.mark.parametrize("what, proc, init, cgroup, orphan", SESSION_LEADERS, ids=[row[0] for row in SESSION_LEADERS])
def test_a_session_leader_is_an_orphan_only_on_evidence(what, proc, init, cgroup, orphan):
    assert is_orphan(proc, init, cgroup, clock_ticks=100) is orphan


@pytest.mark.parametrize("text, unit", [
    ("0::/system.slice/slurmd.service\n", "service"),
    ("0::/system.slice/run-u7.service\n", "service"),           # systemd-run
    ("0::/user.slice/user-0.slice/session-3.scope\n", "login"),
    ("0::/user.slice/user-1000.slice/user@1000.service/app.slice/x.service\n", None),
    ("12:memory:/docker/abc\n1:name=systemd:/user.slice/user-0.slice/session-9.scope\n0::/\n", "login"),
    ("0::/\n", None),
    ("", None),
    ("garbage", None),
])
def test_service_cgroup(text, unit):
    assert service_cgroup(text) == unit


@pytest.mark.parametrize("names, broad", [
    (list(DEFAULT_NAMES), []),
    (["mold", "ninja"], []),
    (["*"], ["*"]),
    (["s*"], ["s*"]),
    (["python*", "ninja"], ["python*"]),
    (["sshd"], ["sshd"]),
    (["?ash"], ["?ash"]),
    (["[a-z]*"], ["[a-z]*"]),
])
def test_broad_names(names, broad):
    assert [name for name, _hits in broad_names(names)] == broad


def test_broad_names_say_what_they_would_hit():
    hits = dict(broad_names(["*"]))["*"]
    assert "sshd" in hits and "systemd" in hits and "bash" in hits


def _sel(pid, comm, cmdline, matched_by):
    return {"pid": pid, "comm": comm, "cmdline": cmdline, "matched_by": matched_by}


@pytest.mark.parametrize("selection, build_names, chosen", [
    ([_sel(1, "ninja", "ninja -C b", "name")], DEFAULT_NAMES, []),
    ([_sel(2, "ninja", "ninja -C b", "pattern")], DEFAULT_NAMES, []),          # a pattern that found a build tool
    ([_sel(3, "python3", "python3 -m pip wheel .", "pattern")], DEFAULT_NAMES, [3]),
    ([_sel(4, "bash", "bash -c x", "pattern"), _sel(5, "sshd", "sshd: root", "pattern")], DEFAULT_NAMES, [4, 5]),
    ([_sel(6, "tool (x) y)", "/opt/cmake/bin/cmake --build .", "pattern")], DEFAULT_NAMES, []),  # argv[0] counts
    ([_sel(7, "python3", "python3 x", "pattern")], ["python3"], []),           # named on purpose
])
def test_non_build_selected(selection, build_names, chosen):
    assert [proc["pid"] for proc in non_build_selected(selection, build_names)] == chosen


@pytest.mark.parametrize("names, selection, words", [
    (list(DEFAULT_NAMES), [_sel(1, "ninja", "ninja", "name")], None),
    (["*"], [], "names: '*' would also select"),
    (["ninja"], [_sel(3, "python3", "python3 -m pip wheel .", "pattern")],
     "patterns: selects processes that are not build tools: python3 (pid 3)"),
])
def test_refuse_broad(names, selection, words):
    refusal = refuse_broad(names, selection, list(DEFAULT_NAMES) + names)
    if words is None:
        assert refusal is None
    else:
        assert words in refusal and "allow_broad: true" in refusal


@pytest.mark.parametrize("text, count, expected", [
    ("P 0\nM 0 1,3\nP 1\nM 1 \n", 2, ({1, 3}, None)),
    ("P 0\nM 0 \nP 1\n", 2, (set(), 1)),            # pattern 1 started and never finished
    ("P 0\nM 0 2\n", 2, ({2}, 1)),                 # killed between patterns: the next is named
    ("", 1, (set(), 0)),
])
def test_parse_worker_output(text, count, expected):
    assert parse_worker_output(text, count) == expected


def test_search_patterns_finds_lines():
    lines = ["ninja -C build", "pip wheel /srv/build/sgl-kernel", "vim CMakeLists.txt"]
    assert search_patterns(compile_patterns([r"sgl-kernel$", r"^ninja "]), lines) == {0, 1}
    assert search_patterns([], lines) == set()


def test_catastrophic_pattern_is_named_not_a_hang():
    """(a+)+$ against 'aaaa...b' backtracks 2**n times; the scan must stop at its budget and name the pattern."""
    lines = ["ninja -C build", "a" * 40 + "b"]
    started = time.monotonic()
    with pytest.raises(ValueError) as info:
        search_patterns(compile_patterns([r"ninja", r"(a+)+$"], "build_process_patterns"), lines,
                        "build_process_patterns", budget=1.0)
    assert time.monotonic() - started < 6
    message = str(info.value)
    assert message.startswith("build_process_patterns: '(a+)+$' did not finish matching 2 command lines")
    assert "within 1.0s" in message


def test_compile_patterns_names_the_option():
    with pytest.raises(ValueError) as info:
        compile_patterns(["ok", "bad("], "build_process_patterns")
    assert str(info.value).startswith("build_process_patterns: 'bad(' is not a valid regular expression")
    assert [regex.pattern for regex in compile_patterns(["a", re.escape("b+")])] == ["a", "b\\+"]
