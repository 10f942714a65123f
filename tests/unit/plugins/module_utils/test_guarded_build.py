# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._guarded_build import (
    BuildError,
    acquire_lock,
    build_environment,
    cgroup_name,
    command_executable,
    configuration_fingerprint,
    failed_steps,
    next_jobs,
    oom_at_one_job_message,
    oom_verdict,
    parse_progress,
    set_variables,
    source_revision,
)
from ansible_collections.gpufleet.preflight.plugins.module_utils._kernel_events import (
    kmsg_message as parse_kmsg_record,
    oom_lines_in_cgroup as oom_lines_for,
)
from ansible_collections.gpufleet.preflight.plugins.module_utils._memory import parse_oom_kill_count

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "guarded_build")
BUILD_CGROUP = "/process_api/node1/gpufleet-build-hungrytest-2e9490f7"


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


@pytest.mark.parametrize("jobs, halved", [(8, 4), (5, 2), (2, 1), (1, 1)])
def test_next_jobs(jobs, halved):
    assert next_jobs(jobs) == halved


@pytest.mark.parametrize("text, count", [
    ("oom_kill_disable 0\nunder_oom 0\noom_kill 6\n", 6),            # v1 memory.oom_control
    ("low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\noom_group_kill 0\n", 2),  # v2 memory.events
    ("oom_kill_disable 0\nunder_oom 0\n", None),                      # v1 before 4.13
    (None, None),
])
def test_parse_oom_kill_count(text, count):
    assert parse_oom_kill_count(text) == count


def test_kernel_lines_keep_only_the_build_cgroups_kills():
    messages = [parse_kmsg_record(line) for line in fixture("kmsg_records.txt").splitlines()]
    lines = oom_lines_for(messages, BUILD_CGROUP)
    assert len(lines) == 6
    assert all("gpufleet-oomtest-manual" not in line for line in lines)   # another cgroup's OOM is not ours
    assert lines[1].startswith("Memory cgroup out of memory: Killed process 13006 (hog)")
    assert oom_lines_for(messages, "/other/cgroup") == []


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


def test_build_environment_appends_threads_after_user_cmake_args():
    base = {"PATH": "/usr/bin", "MAX_JOBS": "64"}
    env = build_environment(base, 2, nvcc_threads=4, cmake_args="-DFOO=1",
                            policy_version_minimum="3.5", ccache_dir="/cache", cuda_arch_list="12.0a",
                            extra={"CMAKE_ARGS": "-DBAR=2", "HTTP_PROXY": None, "N": 3})
    assert env["CMAKE_ARGS"] == "-DFOO=1 -DBAR=2 -DSGL_KERNEL_COMPILE_THREADS=4"
    assert (env["CMAKE_BUILD_PARALLEL_LEVEL"], env["MAX_JOBS"], env["NVCC_THREADS"]) == ("2", "2", "4")
    assert env["CMAKE_POLICY_VERSION_MINIMUM"] == "3.5" and env["CCACHE_DIR"] == "/cache"
    assert env["TORCH_CUDA_ARCH_LIST"] == "12.0a" and env["HTTP_PROXY"] == "" and env["N"] == "3"
    assert base["MAX_JOBS"] == "64", "the caller's environment is not modified"
    assert "CMAKE_ARGS" not in build_environment(base, 1, threads_variable="")
    assert set(set_variables(env, base)) >= {"MAX_JOBS", "CMAKE_ARGS"} and "PATH" not in set_variables(env, base)


def test_fingerprint_ignores_the_job_count_but_not_the_threads():
    def digest(jobs, threads):
        env = build_environment({}, jobs, nvcc_threads=threads)
        return configuration_fingerprint(["make"], "/src", "/src/build", env, {"kind": "git", "revision": "abc"})[0]
    assert digest(8, 1) == digest(2, 1)
    assert digest(8, 1) != digest(8, 32)


@pytest.mark.parametrize("argv, cmd, program", [
    (["cmake", "--build", "."], None, "cmake"),
    (None, "cmake -S . -B build && cmake --build build", "cmake"),
    (None, "CC=gcc make -j2", None),
    (None, "cd sub && make", None),
    (None, "'unbalanced", None),
    (None, "./build.sh --fast", "./build.sh"),
])
def test_command_executable(argv, cmd, program):
    assert command_executable(argv, cmd) == program


def test_cgroup_name_is_per_build_dir_and_safe():
    first = cgroup_name("sgl kernel/x", "/srv/a/build")
    assert first.startswith("gpufleet-build-sgl_kernel_x-") and "/" not in first
    assert first != cgroup_name("sgl kernel/x", "/srv/b/build")


def test_oom_at_one_job_message():
    assert oom_at_one_job_message(400 << 20, 1) == (
        "OOM-killed at jobs=1: the budget of 400Mi is too small for one compile with 1 nvcc thread; "
        "raise memory (memory_limit) or lower nvcc threads")


def test_lock_refuses_a_second_holder_naming_the_pid(tmp_path):
    held = acquire_lock(str(tmp_path))
    try:
        with pytest.raises(BuildError) as err:
            acquire_lock(str(tmp_path))
        assert "(pid %d)" % os.getpid() in str(err.value)
        assert err.value.result["lock_holder_pid"] == str(os.getpid())
    finally:
        held.close()
    acquire_lock(str(tmp_path)).close()  # free again once released


def _no_git(argv, timeout):
    return 128, "", "fatal: not a git repository"


def test_tree_revision_follows_sources_not_build_outputs(tmp_path):
    (tmp_path / "a.cu").write_text(u"x")
    (tmp_path / "build").mkdir()
    first = source_revision(str(tmp_path), _no_git, ignore=["build"])
    (tmp_path / "build" / "a.o").write_text(u"object")
    assert source_revision(str(tmp_path), _no_git, ignore=["build"]) == first
    (tmp_path / "a.cu").write_text(u"changed source")
    changed = source_revision(str(tmp_path), _no_git, ignore=["build"])
    assert changed["kind"] == "tree" and changed["revision"] != first["revision"]


def test_git_revision_uses_head_and_dirty_files(tmp_path):
    (tmp_path / "k.cu").write_text(u"x")

    def fake_git(argv, timeout):
        if "rev-parse" in argv:
            return 0, "0123abcd\n", ""
        return 0, " M k.cu\n", ""
    revision = source_revision(str(tmp_path), fake_git)
    assert revision["kind"] == "git" and revision["revision"] == "0123abcd" and "dirty" in revision
