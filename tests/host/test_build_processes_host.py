# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""build_processes and node_facts, run as real modules against real processes (issue 12 items 2, 10, 13, 17, 18).

Every reaping run happens inside a PID namespace of its own (``unshare --pid --fork --mount-proc``, entered
with ``nsenter``), so even a wrong answer could only touch the processes this test started. Copies of
/bin/sleep named like build tools stand in for compilers; tini, dumb-init and make are the real programs.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from conftest import run_plugin_module
from proctools import proc_stats

from ansible_collections.gpufleet.preflight.plugins.module_utils._process_match import LAUNCH_SECONDS

LONG = 600
# what ansible-playbook passes under ANSIBLE_DISPLAY_TRACEBACK=always: the module then returns the traceback of
# an exception being handled when fail_json is called
TRACEBACKS = {"_ansible_tracebacks_for": ["error", "warning", "deprecated"]}

needs_namespaces = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("nsenter") or not shutil.which("make"),
    reason="needs root, unshare, nsenter and make")


def handled_traceback(result):
    """Whether the result carries the traceback of an exception the module handled (fail_json called inside an
    ``except`` block); fail_json's own call stack, which ANSIBLE_DISPLAY_TRACEBACK=always adds, is not one."""
    text = result.get("exception") or ""
    if isinstance(text, list):
        text = "\n".join(text)
    return "Error" in text.replace("fail_json", "") or "During handling" in text or "direct cause" in text


def children_of(pid):
    """Host pids whose parent is ``pid``."""
    return [child for child, fields in proc_stats() if int(fields[1]) == pid]


def ns_pids(init_host_pid):
    """``{comm: [pid inside the namespace, ...]}`` of every process in the namespace whose init is ``init_host_pid``."""
    out = subprocess.check_output(["nsenter", "-t", str(init_host_pid), "-p", "-m", "--", "ps", "-e", "-o", "pid=,comm="],
                                  universal_newlines=True)
    procs = {}
    for line in out.splitlines():
        pid, comm = line.split(None, 1)
        if comm.strip() != "ps":  # the looker itself
            procs.setdefault(comm.strip(), []).append(int(pid))
    return procs


class Container:
    """``unshare --pid --fork --mount-proc <argv>``: pid 1 inside is argv[0]; ``init`` is its host pid."""

    def __init__(self, argv, cwd):
        self.launcher = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc"] + argv, cwd=str(cwd),
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                         start_new_session=True)
        deadline = time.monotonic() + 10
        self.init = None
        while self.init is None and time.monotonic() < deadline:
            kids = children_of(self.launcher.pid)
            self.init = kids[0] if kids else None
            time.sleep(0.05)
        assert self.init, "the namespace never started"

    def wait_for(self, names, seconds=10):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            procs = ns_pids(self.init)
            if all(name in procs for name in names):
                return procs
            time.sleep(0.1)
        pytest.fail("never saw %s in the namespace: %s" % (names, ns_pids(self.init)))

    def stop(self):
        # Killing pid 1 of a PID namespace kills everything in it.
        try:
            os.kill(self.init, signal.SIGKILL)
        except OSError:
            pass
        try:
            self.launcher.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.launcher.kill()
            self.launcher.wait()


@pytest.fixture
def tools(tmp_path):
    """Copies of /bin/sleep named ninja, cc1plus, nvcc; a Makefile whose jobs run them, one left orphaned."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("ninja", "cc1plus", "nvcc", "gpufleet-other"):
        shutil.copy2("/bin/sleep", str(bin_dir / name))
    (tmp_path / "Makefile").write_text(
        "all: a b c\n"
        "a:\n\t%(bin)s/ninja %(long)d\n"
        "b:\n\t%(bin)s/cc1plus %(long)d\n"
        # a job whose shell forks nvcc and exits at once: nvcc loses its parent (a real orphan)
        "c:\n\t( %(bin)s/nvcc %(long)d & ) ; true\n" % {"bin": bin_dir, "long": LONG})
    containers = []

    def start(*argv):
        container = Container(list(argv), tmp_path)
        containers.append(container)
        return container

    yield bin_dir, start
    for container in containers:
        container.stop()


def by_name(result):
    return dict((proc["name"], proc) for proc in result["processes"])


@needs_namespaces
def test_make_as_pid_1_its_jobs_are_a_live_build_not_orphans(tools, tmp_path):
    """docker run img make -j: every job's parent is pid 1, and pid 1 is the live make (item 2)."""
    _bin_dir, start = tools
    container = start("make", "-j3")
    procs = container.wait_for(["ninja", "cc1plus", "nvcc"])
    report, _seconds = run_plugin_module("build_processes", {}, tmp_path, inside=container.init)
    assert report["failed"] is not True if "failed" in report else True
    found = by_name(report)
    assert found["ninja"]["ppid"] == 1 and found["cc1plus"]["ppid"] == 1
    assert not found["ninja"]["orphaned"] and not found["cc1plus"]["orphaned"] and not found["nvcc"]["orphaned"]

    reaped, _seconds = run_plugin_module("build_processes", {"state": "absent", "orphaned_only": True}, tmp_path,
                                         inside=container.init)
    assert reaped["killed"] == [] and reaped["changed"] is False, reaped
    after = ns_pids(container.init)
    assert after["ninja"] == procs["ninja"] and after["cc1plus"] == procs["cc1plus"] and after["nvcc"] == procs["nvcc"]


@needs_namespaces
@pytest.mark.parametrize("init", ["tini", "dumb-init"])
def test_minimal_init_as_pid_1_spares_the_live_make_and_reaps_the_real_orphan(tools, tmp_path, init):
    """tini / dumb-init as pid 1 start make; make's jobs live under make; one compiler lost its shell (item 2)."""
    if not shutil.which(init):
        pytest.skip("%s is not installed (apt-get install %s)" % (init, init))
    _bin_dir, start = tools
    container = start(init, "--", "make", "-j3") if init == "tini" else start(init, "make", "-j3")
    procs = container.wait_for(["make", "ninja", "cc1plus", "nvcc"])
    report, _seconds = run_plugin_module("build_processes", {}, tmp_path, inside=container.init)
    found = by_name(report)
    assert found["make"]["ppid"] == 1 and not found["make"]["orphaned"]
    assert not found["ninja"]["orphaned"] and not found["cc1plus"]["orphaned"]
    assert found["nvcc"]["ppid"] == 1 and found["nvcc"]["orphaned"]

    reaped, _seconds = run_plugin_module("build_processes", {"state": "absent", "orphaned_only": True, "grace": 2}, tmp_path,
                                         inside=container.init)
    assert [item["name"] for item in reaped["killed"]] == ["nvcc"], reaped
    after = ns_pids(container.init)
    assert "nvcc" not in after
    assert after["make"] == procs["make"] and after["ninja"] == procs["ninja"] and after["cc1plus"] == procs["cc1plus"]


@needs_namespaces
def test_a_setsid_compiler_whose_shell_exited_is_an_orphan_and_init_s_command_is_not(tools, tmp_path):
    """Issue 39: ``setsid nvcc &`` from a shell that then exits leaves nvcc leading its own session under pid 1, as
    dumb-init's own command does; only the one started long after pid 1 lost its parent, and only it is reaped."""
    bin_dir, start = tools
    later = LAUNCH_SECONDS + 1
    container = start("dumb-init", "sh", "-c", "sleep %d; ( setsid %s/nvcc %d & ) ; exec %s/ninja %d"
                      % (later, bin_dir, LONG, bin_dir, LONG))
    procs = container.wait_for(["ninja", "nvcc"], seconds=later + 10)
    found = by_name(run_plugin_module("build_processes", {}, tmp_path, inside=container.init)[0])
    assert found["nvcc"]["ppid"] == 1 and found["nvcc"]["orphaned"], found
    assert found["ninja"]["ppid"] == 1 and not found["ninja"]["orphaned"], found   # dumb-init's command (exec'd sh)

    reaped, _seconds = run_plugin_module("build_processes", {"state": "absent", "orphaned_only": True, "grace": 2}, tmp_path,
                                         inside=container.init)
    assert [item["name"] for item in reaped["killed"]] == ["nvcc"], reaped
    after = ns_pids(container.init)
    assert "nvcc" not in after and after["ninja"] == procs["ninja"]


@needs_namespaces
@pytest.mark.parametrize("args, words", [
    ({"names": ["*"]}, "names: '*' would also select"),
    ({"names": ["s*"]}, "names: 's*' would also select"),
    # the container's sh (pid 1) mentions gpufleet-other in its command line: named too
    ({"names": [], "patterns": ["sleep|gpufleet"]},
     "patterns: selects processes that are not build tools: sh (pid 1), gpufleet-other (pid 2)"),
])
def test_broad_selections_are_refused_and_nothing_is_signalled(tools, tmp_path, args, words):
    """names: ['*'] would end every process; a pattern reaching non-build processes likewise (item 10)."""
    bin_dir, start = tools
    container = start("sh", "-c", "%s/gpufleet-other %d & %s/ninja %d & wait" % (bin_dir, LONG, bin_dir, LONG))
    procs = container.wait_for(["gpufleet-other", "ninja"])
    refused, _seconds = run_plugin_module("build_processes", dict(args, state="absent"), tmp_path, inside=container.init)
    assert refused.get("failed") is True and words in refused["msg"] and "allow_broad: true" in refused["msg"], refused
    assert ns_pids(container.init) == procs

    allowed, _seconds = run_plugin_module("build_processes", dict(args, state="absent", allow_broad=True, grace=1,
                                                                  names=args.get("names") if args.get("names") == [] else
                                                                  ["gpufleet-*"]),
                                          tmp_path, inside=container.init)
    assert [item["name"] for item in allowed["killed"]] == ["gpufleet-other"], allowed
    assert "ninja" in ns_pids(container.init)


@needs_namespaces
def test_reaping_never_reaches_into_another_pid_namespace_unasked(tools, tmp_path):
    """From the host, a container's build processes are visible; they are not the host's to reap (item 10)."""
    bin_dir, start = tools
    name = "gpufleet-nsr%d" % os.getpid()
    shutil.copy2("/bin/sleep", str(bin_dir / name))
    container = start("sh", "-c", "%s/%s %d & wait" % (bin_dir, name, LONG))
    container.wait_for([name[:15]])
    args = {"state": "absent", "names": [name], "grace": 1}
    kept, _seconds = run_plugin_module("build_processes", args, tmp_path)
    assert kept["killed"] == [] and [item["name"] for item in kept["remaining"]] == [name], kept
    assert "another PID namespace" in kept["remaining"][0]["reason"]
    assert name[:15] in ns_pids(container.init)

    reached, _seconds = run_plugin_module("build_processes", dict(args, allow_broad=True), tmp_path)
    assert [item["name"] for item in reached["killed"]] == [name], reached


@pytest.mark.parametrize("args, words", [
    ({"grace": float("nan")}, "grace: nan is not a finite number of seconds"),
    ({"grace": float("inf")}, "grace: inf is not a finite number of seconds"),
    ({"grace": 1e99}, "grace: 1e+99 seconds is more than the 3600 allowed"),
    ({"grace": -1}, "grace: must be 0 or more seconds, got -1.0"),
    # ansible-core's int check raised OverflowError for inf (a traceback); now named like the others
    ({"older_than": float("inf")}, "older_than: inf is not a finite number of seconds"),
    ({"user": "4294967296"}, "user: 4294967296 is not a uid (0 to 4294967294)"),
    ({"names": ["ninja\x00"]}, "names: 'ninja\\x00' holds a NUL byte, which no process name can"),
    ({"extra_names": [""]}, "extra_names: '' is not a process name"),
    ({"extra_names": ["*"]}, "extra_names: '*' would also select"),
    ({"patterns": ["x{99999999999}"]}, "patterns: 'x{99999999999}' is not a valid regular expression"),
])
def test_unbounded_grace_is_refused_before_anything_is_signalled(tmp_path, args, words):
    """grace=nan/inf/1e99 used to wait for ever on a process that ignores SIGTERM (item 13); the sweep's other
    findings for this module (tests/sweep/FINDINGS.md) alike: each refused naming its option, no traceback."""
    args = dict({"names": ["gpufleet-none-such"]}, **args)
    # as under ANSIBLE_DISPLAY_TRACEBACK=always: a fail_json called inside an except block would carry the
    # handled error's traceback (issue 18's sweep leftover)
    result, seconds = run_plugin_module("build_processes", dict(args, state="absent", **TRACEBACKS), tmp_path)
    assert result.get("failed") is True and result["msg"].startswith(words), result
    assert "Traceback" not in result.get("module_stderr", "")
    assert not handled_traceback(result), result["exception"]
    assert seconds < 30


@pytest.mark.parametrize("args, words", [
    ({"gpu_timeout": float("nan")}, "gpu_timeout: nan is not a finite number of seconds"),
    ({"gpu_timeout": float("inf")}, "gpu_timeout: inf is not a finite number of seconds"),
    ({"gpu_timeout": 1e99}, "gpu_timeout: 1e+99 seconds is more than the 600 allowed"),
    ({"disk_paths": ["build"]}, "disk_paths: 'build' is not an absolute path"),
    ({"build_process_patterns": ["x("]}, "build_process_patterns: 'x(' is not a valid regular expression"),
    ({"kernel_events_window": float("inf")}, "kernel_events_window: inf is not a finite number of seconds"),
    ({"disk_paths": ["/tmp\x00x"]}, "disk_paths: '/tmp\\x00x' holds a NUL byte"),
    ({"toolchain_python": ""}, "toolchain_python: '' is neither an absolute path nor a program name"),
])
def test_node_facts_bad_options_are_named(tmp_path, args, words):
    """NaN/inf timeouts and relative disk_paths were accepted silently (items 12, 17); a handled error carries no
    captured traceback (fail_json outside the except block, issue 18)."""
    result, _seconds = run_plugin_module("node_facts", dict(args, gather_subset=["memory", "gpus", "disks"], **TRACEBACKS),
                                         tmp_path)
    assert result.get("failed") is True and result["msg"].startswith(words), result
    assert not handled_traceback(result), result["exception"]


def test_catastrophic_pattern_is_named_not_a_hang(tmp_path):
    """(a+)+$ against a real process whose argv ends in 40 a's and a b: the scan used to hang (item 18)."""
    # one process (no shell that would fork a child and leave it behind) whose argv ends in a's
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(%d)" % LONG, "a" * 40 + "b"],
                              start_new_session=True)
    try:
        for name in ("node_facts", "build_processes"):
            option = "build_process_patterns" if name == "node_facts" else "patterns"
            args = {option: ["ninja", "(a+)+$"]}
            if name == "node_facts":
                args["gather_subset"] = ["build_processes"]
            result, seconds = run_plugin_module(name, args, tmp_path, timeout=60)
            assert result.get("failed") is True, result
            assert result["msg"].startswith("%s: '(a+)+$' did not finish matching" % option), result["msg"]
            assert seconds < 20
    finally:
        os.killpg(victim.pid, signal.SIGKILL)
        victim.wait()
