# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""guarded_build for real on this host: OOM backoff in a confined cgroup, lock, stamp, resume, bad input."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._facts._kernel_events import collect_kernel_events
from ansible_collections.gpufleet.preflight.plugins.module_utils._run import run_with_timeout
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness._gpu_build_checks import check_recent_oom
from conftest import (
    build_cgroups,
    finish_module,
    own_memory_cgroup,
    run_module,
    start_module,
    wait_for_status,
)

HUNGRY_CMD = "cmake -S . -B build -G Ninja -DHOG_MIB={mib} -DHOG_SECONDS={seconds} && cmake --build build"
STEPS = 12


def read_oom_kill(cgroup_dir):
    with open(os.path.join(cgroup_dir, "memory.oom_control")) as handle:
        return int(re.search(r"^oom_kill (\d+)", handle.read(), re.M).group(1))


def test_oom_backoff_finishes_confined(hungry):
    """jobs=8 x 150 MiB in a 400 MiB budget is OOM-killed; halving reaches a job count that fits."""
    node_cgroup = own_memory_cgroup()
    node_oom_before = read_oom_kill(node_cgroup)
    # a bystander outside the build's cgroup holding memory of its own: it must survive
    bystander = subprocess.Popen([sys.executable, "-c", "b = bytearray(64 << 20); import time; time.sleep(600)"])
    try:
        started = time.time()
        result = run_module({"cmd": HUNGRY_CMD.format(mib=150, seconds=2), "chdir": hungry, "name": "oomtest",
                             "jobs": 8, "memory_limit": "400MiB", "memory_per_thread": "150MiB"})
        elapsed = time.time() - started
        assert not result.get("failed"), result["_output"]
        attempts = result["attempts"]
        print("OOM backoff: %d attempts %s in %.1fs, peak %s per attempt %s" % (
            len(attempts), [a["jobs"] for a in attempts], elapsed, result["peak_memory_human"],
            [a["peak_memory_human"] for a in attempts]))
        assert len(attempts) >= 2
        assert attempts[0]["jobs"] == 8 and attempts[0]["oom"] and attempts[0]["oom_kills"] > 0
        assert [a["jobs"] for a in attempts] == [8 >> n for n in range(len(attempts))]
        assert attempts[-1]["rc"] == 0 and not attempts[-1]["oom"]
        assert result["final_jobs"] == attempts[-1]["jobs"] <= 2
        assert result["memory_limit_bytes"] == 400 << 20
        assert result["peak_memory_bytes"] <= 400 << 20
        assert result["env"]["CMAKE_BUILD_PARALLEL_LEVEL"] == str(result["final_jobs"])
        assert len(glob.glob(os.path.join(hungry, "build", "unit_*.o"))) == STEPS
        # confined: the kernel's OOM lines name the build's cgroup, the victims are compile steps,
        # and the node's own cgroup saw no OOM kill
        cgroup_path = result["cgroup"]["path"]
        assert "/gpufleet-build-oomtest-" in cgroup_path
        lines = [line for a in attempts for line in a["kernel_oom_lines"]]
        assert lines, "the kernel log shows the OOM kills"
        for line in lines:
            if line.startswith("oom-kill:"):
                assert "oom_memcg=%s" % cgroup_path in line and "task=hog" in line
            else:
                assert "Memory cgroup out of memory: Killed process" in line and "(hog)" in line
        assert read_oom_kill(node_cgroup) == node_oom_before
        assert bystander.poll() is None, "a process outside the build survived"
        assert build_cgroups("oomtest") == [], "the build cgroup was removed"
        # The readiness gate in front of a rerun reads the same kernel log: kills confined to the build's
        # own cgroup were handled by the backoff and must not hold the node back for oom_window_minutes.
        events = collect_kernel_events(int(time.time() - started) + 2, run_with_timeout)
        ours = [kill for kill in events["oom_kills"] if kill.get("oom_cgroup") == cgroup_path]
        assert ours, events["message"]
        node_path = node_cgroup[len("/sys/fs/cgroup/memory"):]
        verdict = check_recent_oom({"kernel_events": events, "memory": {"cgroup": {"path": node_path}}}, {})
        assert verdict["ok"] is True, verdict
        handled = re.match(r"(\d+) OOM kills? inside guarded builds' own cgroups, handled by their job backoff$", verdict["message"])
        assert handled and int(handled.group(1)) >= len(ours), verdict["message"]
    finally:
        bystander.kill()
        bystander.wait()

    again = run_module({"cmd": HUNGRY_CMD.format(mib=150, seconds=2), "chdir": hungry, "name": "oomtest",
                        "jobs": 8, "memory_limit": "400MiB", "memory_per_thread": "150MiB"})
    assert again["changed"] is False and again["up_to_date"] is True and again["attempts"] == []
    assert again["final_jobs"] == result["final_jobs"]


def test_second_build_in_the_same_dir_is_refused(hungry):
    # steps long enough that the first run is still building when the second (a fresh ansible) gets there
    args = {"cmd": HUNGRY_CMD.format(mib=10, seconds=4), "chdir": hungry, "name": "locktest", "jobs": 1,
            "memory_limit": "256MiB", "memory_per_thread": "16MiB"}
    first = start_module(args)
    try:
        status = wait_for_status(os.path.join(hungry, "build", "gpufleet-build.status.json"),
                                 lambda s: s.get("state") == "running")
        second = run_module(args)
        assert second.get("failed")
        assert "another build holds" in second["msg"] and "pid %s" % status["module_pid"] in second["msg"]
        assert second["lock_holder_pid"] == status["module_pid"] and second["lock_holder_run_id"] == status["run_id"]
    finally:
        result = finish_module(first)
    assert not result.get("failed"), result["_output"]
    assert result["attempts"][-1]["rc"] == 0


def test_killed_build_resumes_without_redoing_finished_steps(hungry):
    args = {"cmd": HUNGRY_CMD.format(mib=10, seconds=1), "chdir": hungry, "name": "midway", "jobs": 1,
            "memory_limit": "256MiB", "memory_per_thread": "16MiB", "status_interval": 0.3}
    status_path = os.path.join(hungry, "build", "gpufleet-build.status.json")
    proc = start_module(args)
    wait_for_status(status_path, lambda s: (s.get("progress") or {}).get("done", 0) >= 6)
    # kill the build as an operator's kill -9 would: everything in its cgroup
    (cgroup,) = build_cgroups("midway")
    with open(os.path.join(cgroup, "cgroup.procs")) as handle:
        for pid in handle.read().split():
            os.kill(int(pid), signal.SIGKILL)
    killed = finish_module(proc)
    assert killed.get("failed")
    assert killed["attempts"][0]["oom"] is False, "a kill from outside is not taken for an OOM"
    assert "not" in killed["attempts"][0]["why"]
    assert len(killed["attempts"]) == 1, "no backoff retry after a non-OOM kill"
    finished_before = dict((path, os.stat(path).st_mtime_ns)
                           for path in glob.glob(os.path.join(hungry, "build", "unit_*.o")))
    assert 2 <= len(finished_before) < STEPS

    resumed = run_module(args)
    assert not resumed.get("failed"), resumed["_output"]
    progress = resumed["attempts"][0]["progress"]
    assert progress["total"] == STEPS - len(finished_before), "ninja only ran the steps left"
    for path, mtime in finished_before.items():
        assert os.stat(path).st_mtime_ns == mtime, "%s was rebuilt" % path
    assert len(glob.glob(os.path.join(hungry, "build", "unit_*.o"))) == STEPS
    with open(resumed["log"]) as handle:
        last_attempt = handle.read().rsplit("=== gpufleet guarded_build: attempt", 1)[1]
    assert last_attempt.count("Compiling unit_") == STEPS - len(finished_before)


def test_failing_compile_reports_the_step_and_log_tail(tmp_path):
    project = tmp_path / "broken"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(u"cmake_minimum_required(VERSION 3.16)\nproject(broken C)\n"
                                            u"add_library(fine STATIC fine.c)\nadd_library(broken STATIC broken.c)\n")
    (project / "fine.c").write_text(u"int fine(void) { return 1; }\n")
    (project / "broken.c").write_text(u"int broken(void) { return missing_symbol; }\n")
    result = run_module({"cmd": "cmake -S . -B build -G Ninja && cmake --build build", "chdir": str(project),
                         "jobs": 1, "memory_limit": "1GiB", "memory_per_thread": "64MiB"})
    assert result.get("failed")
    assert "failing step: FAILED: CMakeFiles/broken.dir/broken.c.o" in result["msg"]
    assert any("missing_symbol" in line for line in result["log_tail"])
    assert result["failed_steps"] and result["attempts"][0]["oom"] is False
    assert "Traceback" not in result["_output"] and "exception" not in result


@pytest.mark.parametrize("args, message", [
    ({"argv": ["no-such-build-tool", "--build", "."], "jobs": 2, "memory_limit": "8GiB"},
     "the build command no-such-build-tool was not found"),
    ({"cmd": "no-such-build-tool && make", "jobs": 2, "memory_limit": "8GiB"},
     "the build command no-such-build-tool was not found"),
    ({"argv": ["cmake", "--build", "build"], "jobs": "eight", "memory_limit": "1GiB"},
     "argument 'jobs' is of type str and we were unable to convert to int"),
    # issue 12 item 17: lenient inputs are errors naming the option
    ({"argv": ["cmake"], "jobs": 1e99, "memory_limit": "1GiB"}, "jobs must be between 1 and 4096"),
    ({"argv": ["cmake"], "jobs": 2, "memory_limit": "1GiB", "chdir": ""}, "chdir: must be a path, got an empty string"),
    ({"cmd": "   ", "jobs": 2, "memory_limit": "1GiB"}, "cmd is empty"),
    ({"argv": ["cmake"], "jobs": 2, "memory_limit": "1GiB", "memory_per_thread": 0},
     "memory_per_thread must be more than 0"),
    ({"argv": ["cmake"], "memory_limit": "1GiB", "cpus": 0}, "cpus must be between 1 and 65536"),
    ({"argv": ["cmake"], "jobs": 2, "memory_limit": "1GiB", "timeout": -1}, "timeout: must be 1 or more seconds"),
    ({"argv": ["cmake"], "jobs": 2, "memory_limit": "1GiB", "status_interval": -1},
     "status_interval: must be 0.05 or more seconds, got -1"),
    ({"argv": ["cmake"], "jobs": 2, "memory_limit": "1GiB", "status_interval": "nan"},
     "status_interval: nan is not a finite number of seconds"),
    ({"argv": ["cmake"], "jobs": 2, "memory_limit": "1GiB", "confinement": "chroot"}, "confinement must be one of"),
    ({"argv": ["cmake", "--build", "build"], "jobs": 2, "memory_limit": "8GiB", "nvcc_threads": 32},
     "memory_limit 8.0Gi is below one job: 32 nvcc threads x 5.0Gi memory_per_thread = 160Gi"),
    ({"argv": ["cmake", "--build", "build"], "jobs": 2, "memory_limit": "lots"}, "'lots' is not a size"),
    ({"argv": ["cmake", "--build", "build"], "jobs": 2, "memory_limit": "8GiB", "source": "/nonexistent/src"},
     "source /nonexistent/src does not exist"),
    ({"argv": ["cmake", "--build", "build"], "jobs": 2, "memory_limit": "1GiB", "chdir": "/nonexistent/tree"},
     "chdir /nonexistent/tree does not exist"),
])
def test_bad_input_fails_before_anything_runs(hungry, args, message):
    args = dict(args)
    args.setdefault("chdir", hungry)
    result = run_module(args)
    assert result.get("failed") and message in result["msg"], result["_output"]
    assert not os.path.exists(os.path.join(hungry, "build")), "nothing ran"
    assert "Traceback" not in result["_output"]


def test_check_mode_reports_without_running(hungry):
    result = run_module({"cmd": HUNGRY_CMD.format(mib=10, seconds=1), "chdir": hungry, "jobs": 3,
                         "memory_limit": "300MiB", "memory_per_thread": "16MiB"}, check=True)
    assert result["changed"] is True and result["attempts"] == []
    assert result["msg"].startswith("would run /bin/sh -c cmake") and "jobs=3" in result["msg"]
    assert not os.path.exists(os.path.join(hungry, "build"))


def test_planned_when_jobs_and_limit_are_omitted(hungry):
    result = run_module({"cmd": HUNGRY_CMD.format(mib=10, seconds=0.1), "chdir": hungry,
                         "memory_per_thread": "64MiB", "reserve": "1GiB", "max_jobs": 2})
    assert not result.get("failed"), result["_output"]
    assert result["plan"]["jobs"] == 2 and result["plan"]["bound_by"] in ("max_jobs", "cpus")
    assert result["memory_limit_bytes"] == result["plan"]["budget_bytes"]
    assert result["final_jobs"] == 2


def test_sigterm_stops_the_build_and_removes_its_cgroup(hungry):
    args = {"cmd": HUNGRY_CMD.format(mib=10, seconds=2), "chdir": hungry, "name": "sigterm", "jobs": 1,
            "memory_limit": "256MiB", "memory_per_thread": "16MiB", "status_interval": 0.3}
    status_path = os.path.join(hungry, "build", "gpufleet-build.status.json")
    proc = start_module(args)
    status = wait_for_status(status_path, lambda s: (s.get("progress") or {}).get("done", 0) >= 3)
    (cgroup,) = build_cgroups("sigterm")
    with open(os.path.join(cgroup, "cgroup.procs")) as handle:
        build_pids = [int(pid) for pid in handle.read().split()]
    assert build_pids
    os.kill(status["module_pid"], signal.SIGTERM)
    result = finish_module(proc)
    assert result["failed"] and "stopped by SIGTERM" in result["msg"] and result["stopped"] is True
    # issue 13 item 5: the interrupted attempt keeps its record and peak memory
    (attempt,) = result["attempts"]
    assert attempt["kind"] == "interrupted" and attempt["jobs"] == 1 and attempt["peak_memory_bytes"] > 0
    assert result["peak_memory_bytes"] == attempt["peak_memory_bytes"]
    assert build_cgroups("sigterm") == [], "the cgroup is gone"
    for pid in build_pids:
        assert not os.path.exists("/proc/%d" % pid) or open("/proc/%d/stat" % pid).read().split()[2] == "Z"
    with open(status_path) as handle:
        assert '"state": "stopped"' in handle.read()
