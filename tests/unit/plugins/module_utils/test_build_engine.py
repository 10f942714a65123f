# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_build_engine: the pure decisions of the guarded build, from tables."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._build._build_engine import (
    DONE,
    FAIL,
    RETRY,
    build_environment,
    classify_attempt,
    command_executable,
    decide_next,
    failed_steps,
    next_jobs,
    oom_at_one_job_message,
    oom_verdict,
    parse_progress,
    set_variables,
    shown_variables,
)

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "guarded_build")


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


@pytest.mark.parametrize("text, progress", [
    (fixture("ninja_oom_attempt.log"), {"done": 10, "total": 14, "percent": 71.4}),  # killed steps count as run
    ("[1/3] cc a.c\n[2/3] cc b.c\n", {"done": 2, "total": 3, "percent": 66.7}),
    ("  [15/1200] Building CUDA object x.cu.o\n", {"done": 15, "total": 1200, "percent": 1.2}),
    ("-- Configuring done\n", None),
    ("", None),
    ("array[1/2] in a compiler message\n", None),   # only a line that starts with [N/M]
])
def test_parse_progress(text, progress):
    assert parse_progress(text) == progress


def test_failed_steps_from_a_real_oom_attempt():
    steps = failed_steps(fixture("ninja_oom_attempt.log"))
    assert steps[0] == "FAILED: unit_2.o /srv/hungry/build/unit_2.o"  # the last five of the six kills
    assert len(steps) == 5 and all(step.startswith("FAILED: unit_") for step in steps)
    assert failed_steps("[1/1] ok\n") == []


def test_failed_step_of_a_build_through_pip():
    """The real tree's build through the role (pip wheel -v): pip indents ninja's lines; ninja >= 1.12 adds the code."""
    assert failed_steps(fixture("pip_ninja_failed_attempt.log")) == [
        "FAILED: [code=1] CMakeFiles/common_ops_sm100_build.dir/work/field/offline/repo-fast-hadamard-transform/csrc/"
        "fast_hadamard_transform.cpp.o"]


@pytest.mark.parametrize("jobs, halved", [(8, 4), (5, 2), (2, 1), (1, 1)])
def test_next_jobs(jobs, halved):
    assert next_jobs(jobs) == halved


@pytest.mark.parametrize("rc, kills, lines, oom, why", [
    (1, 6, [], True, "oom_kill counter rose by 6"),          # ninja exits 1 when a step is killed
    (-9, 0, [], False, "did not move"),                      # a kill -9 from outside is not an OOM
    (137, None, [], True, "exit status 137"),                # unconfined: the exit status is all we have
    (2, None, ["oom-kill:... x"], True, "kernel log"),
    (2, None, [], False, "exit status 2"),
    (0, 0, [], False, "did not move"),
])
def test_oom_verdict(rc, kills, lines, oom, why):
    verdict, reason = oom_verdict(rc, kills, lines)
    assert verdict is oom and why in reason


# How an attempt ended -> its kind. Our own SIGKILL (timeout, signal) ends in 137 like an OOM kill: never an OOM.
@pytest.mark.parametrize("args, kind, why", [
    (dict(returncode=0), "ok", "exit status 0"),
    (dict(returncode=1, oom_kills=3), "oom", "rose by 3"),
    (dict(returncode=137), "oom", "exit status 137"),                          # unconfined
    (dict(returncode=137, timed_out=True), "timeout", "timeout"),              # we killed it at the deadline
    (dict(returncode=1, timed_out=True, oom_kills=2), "timeout", "timeout"),   # an OOM during the kill is moot
    (dict(returncode=137, interrupted="signal 15"), "interrupted", "signal 15"),
    (dict(returncode=137, watchdog="the watchdog stopped the build: 40Mi left"), "oom", "watchdog"),
    (dict(returncode=2), "failed", "exit status 2"),
    (dict(returncode=-9, oom_kills=0), "failed", "did not move"),              # kill -9 from outside
])
def test_classify_attempt(args, kind, why):
    got_kind, got_why = classify_attempt(**args)
    assert got_kind == kind and why in got_why


# (kind, attempt, max_attempts, jobs) -> (action, jobs, message part): the retry rules.
@pytest.mark.parametrize("kind, attempt, max_attempts, jobs, action, next_jobs_, message", [
    ("ok", 1, 4, 8, DONE, 8, None),
    ("oom", 1, 4, 8, RETRY, 4, "resuming with jobs=4"),
    ("oom", 3, 4, 2, RETRY, 1, "resuming with jobs=1"),
    ("oom", 4, 4, 8, FAIL, 8, "OOM-killed on all 4 attempts (last at jobs=8)"),   # the last attempt
    ("oom", 1, 1, 8, FAIL, 8, "OOM-killed on all 1 attempts"),
    ("oom", 2, 4, 1, FAIL, 1, "OOM-killed at jobs=1: the budget of 400Mi"),        # one job left
    ("timeout", 1, 4, 8, FAIL, 8, "timed out after 60 seconds (attempt 1, jobs=8)"),
    ("failed", 1, 4, 8, FAIL, 8, "the build failed (exit status 2); failing step: FAILED: a.o"),
    ("interrupted", 2, 4, 4, FAIL, 4, "the build was interrupted (signal 15)"),
])
def test_decide_next(kind, attempt, max_attempts, jobs, action, next_jobs_, message):
    why = {"failed": "exit status 2", "interrupted": "signal 15"}.get(kind, "oom_kill counter rose by 3")
    got = decide_next(kind, attempt, max_attempts, jobs, why=why, failed_step="FAILED: a.o", timeout=60,
                      budget_bytes=400 << 20, nvcc_threads=1)
    assert got[0] == action and got[1] == next_jobs_
    assert (got[2] is None) if message is None else (message in got[2]), got


def test_decide_next_walks_down_to_all_attempts_oom_killed():
    """Four OOMs in a row from -j16: 16, 8, 4, 2 and then the failure naming all four attempts."""
    jobs, seen = 16, []
    for attempt in range(1, 5):
        seen.append(jobs)
        action, jobs, message = decide_next("oom", attempt, 4, jobs, why="counter")
    assert seen == [16, 8, 4, 2] and action == FAIL
    assert message.startswith("OOM-killed on all 4 attempts (last at jobs=2)")


def test_oom_at_one_job_message_never_says_lower_threads_at_one_thread():
    """Issue 29 item 7: the field rerun's final message said "lower nvcc threads" at one thread."""
    assert oom_at_one_job_message(400 << 20, 1) == (
        "OOM-killed at jobs=1: the budget of 400Mi is too small for one compile with 1 nvcc thread; "
        "raise memory (memory_limit): it already ran with one nvcc thread, the fewest there are")
    assert oom_at_one_job_message(400 << 20, 4).endswith("with 4 nvcc threads; raise memory (memory_limit) or lower nvcc threads")


def test_an_oom_the_scheduler_learned_from_keeps_the_jobs_one_it_did_not_halves_them():
    """Issue 29 item 7: one OOM pinned the field rerun at one job. With admission, an OOM that taught the launchers a
    source's larger need retries at the same jobs (the scheduler admits less); one that taught nothing (the same
    source killed again at the same peak) or a build without admission (learned None) halves them, the last resort."""
    action, jobs, message = decide_next("oom", 1, 4, 8, why="counter", learned=["t:es_fp8_blockwise.cu"])
    assert (action, jobs) == (RETRY, 8) and "learned what t:es_fp8_blockwise.cu held when killed" in message
    assert decide_next("oom", 2, 4, 1, why="counter", learned=["a.cu"])[:2] == (RETRY, 1)
    action, jobs, message = decide_next("oom", 2, 4, 8, why="counter", learned=[])
    assert (action, jobs) == (RETRY, 4) and "learned nothing new" in message
    assert decide_next("oom", 1, 4, 8, why="counter")[:2] == (RETRY, 4)
    assert decide_next("oom", 4, 4, 8, why="counter", learned=["a.cu"])[0] == FAIL


def test_build_environment_appends_threads_after_user_cmake_args():
    base = {"PATH": "/usr/bin", "MAX_JOBS": "64"}
    env = build_environment(base, 2, 4, "-DFOO=1", "SGL_KERNEL_COMPILE_THREADS", "3.5", "/cache", "12.0a",
                            {"CMAKE_ARGS": "-DBAR=2", "HTTP_PROXY": None, "N": 3})
    assert env["CMAKE_ARGS"] == "-DFOO=1 -DBAR=2 -DSGL_KERNEL_COMPILE_THREADS=4"
    assert (env["CMAKE_BUILD_PARALLEL_LEVEL"], env["MAX_JOBS"], env["NVCC_THREADS"]) == ("2", "2", "4")
    assert env["CMAKE_POLICY_VERSION_MINIMUM"] == "3.5" and env["CCACHE_DIR"] == "/cache"
    assert env["TORCH_CUDA_ARCH_LIST"] == "12.0a" and env["HTTP_PROXY"] == "" and env["N"] == "3"
    assert base["MAX_JOBS"] == "64", "the caller's environment is not modified"
    assert "CMAKE_ARGS" not in build_environment(base, 1, 1, None, "", None, None, None, {})
    assert set(set_variables(env, base)) >= {"MAX_JOBS", "CMAKE_ARGS"} and "PATH" not in set_variables(env, base)


def test_shown_variables_hide_what_the_user_set():
    shown = shown_variables({"MAX_JOBS": "2", "PIP_INDEX_URL": "https://u:tok@x/simple"}, {"PIP_INDEX_URL"})
    assert shown == {"MAX_JOBS": "2", "PIP_INDEX_URL": "********"}


@pytest.mark.parametrize("argv, cmd, program", [
    (["cmake", "--build", "."], None, "cmake"),
    (None, "cmake -S . -B build && cmake --build build", "cmake"),
    (None, "CC=gcc make -j2", None),
    (None, "cd sub && make", None),
    (None, "'unbalanced", None),
    (None, "./build.sh --fast", "./build.sh"),
    # finding 4: shell builtins first (the shell runs them; they are no program on PATH)
    (None, "ulimit -n 4096 && make", None),
    (None, "umask 022; make", None),
    (None, ": && make", None),
    (None, "trap 'rm -f x' EXIT; make", None),
])
def test_command_executable(argv, cmd, program):
    assert command_executable(argv, cmd) == program
