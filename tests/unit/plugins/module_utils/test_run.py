# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_run: commands with a hard timeout (never an unbounded wait), and the one way to find a program.

The D-state case (a child that outlives SIGKILL) needs a frozen cgroup: tests/host/test_gpus_wedged.py.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import time

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._run import (
    DID_NOT_EXIT,
    did_not_exit,
    find_executable,
    process_state,
    run_with_timeout,
    search_path,
)


@pytest.mark.parametrize("argv, timeout, data, expected", [
    (["sh", "-c", "echo out; echo err >&2; exit 3"], 10, None, (3, "out\n", "err\n")),
    (["cat"], 10, "fed on stdin\n", (0, "fed on stdin\n", "")),
    (["cat"], 10, None, (0, "", "")),                        # stdin is /dev/null, not the module's
    (["/nonexistent/tool"], 10, None, (127, "", "/nonexistent/tool: No such file or directory")),
])
def test_run_with_timeout_answers(argv, timeout, data, expected):
    assert run_with_timeout(argv, timeout, data=data) == expected


def test_timeout_kills_the_whole_group_quickly(tmp_path):
    marker = tmp_path / "grandchild.pid"
    started = time.monotonic()
    rc, _out, err = run_with_timeout(["sh", "-c", "sleep 60 & echo $! > %s; wait" % marker], 0.5)
    assert rc is None and "timed out after 0.5s and was killed" in err and not did_not_exit(err)
    assert time.monotonic() - started < 5
    grandchild = int(marker.read_text())
    for _attempt in range(100):
        if process_state(grandchild) in (None, "Z"):
            break
        time.sleep(0.05)
    assert process_state(grandchild) in (None, "Z")


def test_an_escaped_grandchild_holding_the_pipe_does_not_block():
    """setsid puts the grandchild outside the killed group; it keeps stdout open: bounded by kill_grace."""
    started = time.monotonic()
    rc, _out, err = run_with_timeout(["sh", "-c", "setsid sleep 30 & sleep 60"], 0.5, kill_grace=0.5)
    assert rc is None and "was killed" in err
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("stderr, stuck", [
    ("nvidia-smi: timed out after 2s and %s within 2s (pid 9, state D: uninterruptible sleep)" % DID_NOT_EXIT, True),
    ("nvidia-smi: timed out after 2s and was killed", False),
    ("", False),
    (None, False),
])
def test_did_not_exit(stderr, stuck):
    assert did_not_exit(stderr) is stuck


def test_process_state():
    assert process_state(os.getpid()) in ("R", "S")
    assert process_state(2 ** 22 + 7) is None


def _tool(directory, name, executable=True):
    directory.mkdir(exist_ok=True)
    path = directory / name
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755 if executable else 0o644)
    return str(path)


def test_find_executable_path_order_first(tmp_path):
    """PATH first, in its order, then the fallback directories: what the operator runs by hand."""
    venv, usr = tmp_path / "venv", tmp_path / "usr"
    first = _tool(venv, "cmake")
    _tool(usr, "cmake")
    dirs = search_path([str(usr)], environ={"PATH": str(venv)})
    assert dirs == [str(venv), str(usr)]
    assert find_executable("cmake", dirs) == first
    assert find_executable("cmake", search_path([str(venv)], environ={"PATH": str(usr)})) == str(usr / "cmake")


@pytest.mark.parametrize("name, found", [("tool", True), ("plain", False), ("missing", False)])
def test_find_executable_needs_an_executable_file(tmp_path, name, found):
    _tool(tmp_path / "bin", "tool")
    _tool(tmp_path / "bin", "plain", executable=False)
    result = find_executable(name, [str(tmp_path / "bin")])
    assert (result == str(tmp_path / "bin" / name)) if found else result is None


def test_find_executable_absolute_and_environ(tmp_path):
    tool = _tool(tmp_path / "bin", "tool")
    assert find_executable(tool) == tool
    assert find_executable(str(tmp_path / "bin" / "none")) is None
    assert find_executable("tool", environ={"PATH": str(tmp_path / "bin")}) == tool
    assert search_path(["/a", "/b"], environ={"PATH": "/b::/c"}) == ["/b", "/c", "/a"]


def test_side_by_side_runs_every_call_at_once_and_keeps_the_order():
    import threading
    from ansible_collections.gpufleet.preflight.plugins.module_utils._run import side_by_side
    barrier = threading.Barrier(3, timeout=5)   # passes only when all three run at the same time

    def call(value):
        barrier.wait()
        return value
    assert list(side_by_side({"b": lambda: call(2), "a": lambda: call(1), "c": lambda: call(3)}).items()) == [
        ("b", 2), ("a", 1), ("c", 3)]


def test_side_by_side_raises_the_first_error_after_every_call_ended():
    import time
    from ansible_collections.gpufleet.preflight.plugins.module_utils._run import side_by_side
    ended = []

    def slow():
        time.sleep(0.2)
        ended.append("slow")

    def broken():
        raise ValueError("gpu_probes: unknown")
    with pytest.raises(ValueError, match="gpu_probes: unknown"):
        side_by_side({"slow": slow, "broken": broken})
    assert ended == ["slow"]


def test_a_flood_of_output_is_kept_to_the_bound_and_read_to_its_end():
    """64 MiB on stdout and 1 MiB on stderr with 1 MiB kept: the command ends normally (its pipes never block it),
    each stream keeps its first MiB and says it was cut (round 4 of docs/security.md: the read was unbounded)."""
    script = "head -c 67108864 /dev/zero | tr '\\0' o; head -c 1048577 /dev/zero | tr '\\0' e >&2; exit 4"
    rc, out, err = run_with_timeout(["sh", "-c", script], 60, kept=1024 ** 2)
    assert rc == 4
    assert out == "o" * 1024 ** 2 + "\n[output cut at 1048576 bytes]"
    assert err == "e" * 1024 ** 2 + "\n[output cut at 1048576 bytes]"


def test_output_within_the_bound_is_whole_and_stdin_larger_than_a_pipe_is_fed():
    data = "x" * (1024 ** 2) + "\n"    # more than a pipe buffer: written as the child reads
    rc, out, err = run_with_timeout(["cat"], 30, data=data, kept=2 * 1024 ** 2)
    assert (rc, out, err) == (0, data, "")


def test_a_flood_until_the_timeout_keeps_what_was_read():
    started = time.monotonic()
    rc, out, err = run_with_timeout(["sh", "-c", "yes flood"], 0.5, kept=4096)
    assert rc is None and "timed out after 0.5s and was killed" in err
    assert out.startswith("flood\nflood\n") and out.endswith("[output cut at 4096 bytes]")
    assert time.monotonic() - started < 5


def test_a_child_that_closes_its_pipes_but_runs_on_is_timed_out():
    started = time.monotonic()
    rc, _out, err = run_with_timeout(["sh", "-c", "exec >&- 2>&-; sleep 30"], 0.5)
    assert rc is None and "was killed" in err and not did_not_exit(err)
    assert time.monotonic() - started < 5


def test_a_child_that_never_reads_its_stdin_does_not_hang_the_writer():
    rc, out, _err = run_with_timeout(["sh", "-c", "exec 0<&-; echo done"], 10, data="y" * (4 * 1024 ** 2))
    assert (rc, out) == (0, "done\n")
