# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every benchmark shares: quick mode, medians, the machine's description, the results files.

Quick mode (``GPUFLEET_BENCH_QUICK=1``) is what the test suite runs: tiny counts, no timing target
judged, but every script still exits non-zero when something is broken (a count that disagrees, a
play that fails).  Full mode judges the targets and writes ``bench/results/<name>-<stamp>.{json,md}``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import json
import math
import os
import platform
import shlex
import signal
import statistics
import subprocess
import sys
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)
RESULTS_DIR = os.path.join(BENCH_DIR, "results")
FLEET_LIB_DIR = os.path.join(REPO_ROOT, "tests", "tools")  # fleetlib: the test fleet, shared with tests/fleet
if FLEET_LIB_DIR not in sys.path:
    sys.path.insert(0, FLEET_LIB_DIR)

QUICK = os.environ.get("GPUFLEET_BENCH_QUICK", "") not in ("", "0", "false", "no")

# The seed's one-liner, word for word (what operators ran by hand before resuming the build).
SEED_GREP = 'ps aux | grep -E "cmake|ninja|cc1plus|nvcc" | grep -v grep | wc -l'
SEED_ONE_LINER = "free -h; " + SEED_GREP


class BenchFailure(Exception):
    """Something is broken (not merely slow): the script exits 1 with this message."""


def env_int(name, full, quick):
    """An integer knob: the environment wins, else the quick or the full default."""
    raw = os.environ.get(name, "")
    if raw:
        try:
            return int(raw)
        except ValueError:
            raise BenchFailure("%s must be a whole number, got %r" % (name, raw))
    return quick if QUICK else full


def env_list(name, full, quick):
    """A list of integers (comma separated in the environment)."""
    raw = os.environ.get(name, "")
    if raw:
        try:
            return [int(part) for part in raw.split(",") if part.strip()]
        except ValueError:
            raise BenchFailure("%s must be comma-separated whole numbers, got %r" % (name, raw))
    return list(quick if QUICK else full)


def median(values):
    return statistics.median(values) if values else float("nan")


def load_average():
    return tuple(round(x, 2) for x in os.getloadavg())


def cpu_busy_seconds():
    """Machine-wide CPU seconds spent not idle since boot (from /proc/stat), to compare with wall time."""
    with open("/proc/stat") as handle:
        fields = [int(x) for x in handle.readline().split()[1:]]
    ticks = os.sysconf("SC_CLK_TCK")
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / float(ticks)


class CpuMeter:
    """CPU seconds spent by this process and everything it starts from now on (the test fleet's sshd nodes and
    their modules as well as ansible on the controller), read from a cgroup v1 cpuacct group of its own. On a machine
    as small as this one the nodes share the controller's cores, so wall time tracks this sum, and the sum moves
    far less with other load than wall time does. ``seconds()`` is None where there is no cpuacct (not root, no
    v1 hierarchy)."""

    ROOT = "/sys/fs/cgroup/cpuacct"

    def __init__(self, name="gpufleet-bench"):
        self.path = None
        group = os.path.join(self.ROOT, "%s-%d" % (name, os.getpid()))
        try:
            os.mkdir(group)
            with open(os.path.join(group, "cgroup.procs"), "w") as handle:
                handle.write(str(os.getpid()))
        except OSError:
            return
        self.path = group

    def seconds(self):
        if self.path is None:
            return None
        with open(os.path.join(self.path, "cpuacct.usage")) as handle:
            return int(handle.read()) / 1e9

    def close(self):
        """Back to the root group; the group goes once nothing else is left in it (the fleet stopped first)."""
        if self.path is None:
            return
        try:
            with open(os.path.join(self.ROOT, "cgroup.procs"), "w") as handle:
                handle.write(str(os.getpid()))
            os.rmdir(self.path)
        except OSError:
            pass
        self.path = None


def memory_total_bytes():
    with open("/proc/meminfo") as handle:
        for line in handle:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return 0


def ansible_core_version():
    try:
        from ansible.release import __version__
        return __version__
    except ImportError:
        return "unknown"


def machine():
    """The machine, for the results: cores, RAM, kernel, load now."""
    return {
        "nproc": os.cpu_count(),
        "memory_gib": round(memory_total_bytes() / 1024.0 ** 3, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "ansible_core": ansible_core_version(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "load_average": load_average(),
    }


def machine_line(info):
    return ("%(nproc)s cores, %(memory_gib)s GiB RAM, Linux %(kernel)s, Python %(python)s, ansible-core %(ansible_core)s, "
            "%(date)s, load average at start %(load)s" % dict(info, load=" ".join(str(x) for x in info["load_average"])))


def wait_for_low_load(threshold=None, max_wait=None):
    """In full mode, wait (a while) for the 1-minute load to drop below the threshold; the load seen."""
    threshold = float(os.environ.get("GPUFLEET_BENCH_MAX_LOAD", threshold or 1.5))
    max_wait = float(os.environ.get("GPUFLEET_BENCH_LOAD_WAIT", 0 if max_wait is None else max_wait))
    deadline = time.monotonic() + max_wait
    while os.getloadavg()[0] >= threshold and time.monotonic() < deadline:
        time.sleep(5)
    load = load_average()
    if load[0] >= threshold:
        print("note: load average %s is at or above %.1f: other work shares these %d cores, timings are noisy"
              % (" ".join(str(x) for x in load), threshold, os.cpu_count()), file=sys.stderr)
    return load


def timed(argv, timeout=600, env=None, cwd=REPO_ROOT, shell=False):
    """Run a command; (seconds, CompletedProcess) with stdout/stderr as text."""
    started = time.monotonic()
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd,
                          timeout=timeout, check=False, shell=shell)
    elapsed = time.monotonic() - started
    proc.stdout = proc.stdout.decode("utf-8", "replace")
    proc.stderr = proc.stderr.decode("utf-8", "replace")
    return elapsed, proc


def timed_parallel(argvs, timeout=120):
    """Start every command at once, wait for all: (seconds, [(rc, stdout, stderr)])."""
    started = time.monotonic()
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
             for argv in argvs]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=timeout)
        results.append((proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")))
    return time.monotonic() - started, results


def tail(text, lines=25):
    return "\n".join(text.splitlines()[-lines:])


def fmt_seconds(value):
    if math.isnan(value):
        return "-"
    return "%.3f" % value if value < 10 else "%.2f" % value


def fmt_ratio(value):
    return "-" if value is None or math.isnan(value) else "%.2fx" % value


def markdown_table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _column in header) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(str(cell) for cell in row) + " |")
    return "\n".join(lines)


def verdict(ok):
    return "met" if ok else "MISSED"


def command_line():
    """How to reproduce this run (the environment knobs that were set, then the script)."""
    knobs = ["%s=%s" % (k, shlex.quote(v)) for k, v in sorted(os.environ.items()) if k.startswith("GPUFLEET_BENCH_")]
    return " ".join(knobs + [".venv/bin/python", os.path.relpath(sys.argv[0], REPO_ROOT)] + sys.argv[1:])


def write_results(name, data, markdown):
    """bench/results/<name>-<stamp>.json and .md, plus <name>-latest.md; skipped in quick mode."""
    if QUICK:
        return None
    if not os.path.isdir(RESULTS_DIR):
        os.makedirs(RESULTS_DIR)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = os.path.join(RESULTS_DIR, "%s-%s" % (name, stamp))
    with open(base + ".json", "w") as handle:
        json.dump(data, handle, indent=2, sort_keys=True, default=str)
    for path in (base + ".md", os.path.join(RESULTS_DIR, "%s-latest.md" % name)):
        with open(path, "w") as handle:
            handle.write(markdown + "\n")
    return base


def report(name, title, info, table, notes, data, targets):
    """Print the markdown section (machine, command, table, notes, targets) and save it; the exit code."""
    lines = ["### %s" % title, "",
             "Machine: %s; load average at end %s." % (machine_line(info), " ".join(str(x) for x in load_average())),
             "", "Reproduce: `%s`" % command_line(), "", table, ""]
    targets = [tuple(target) + (False,) * (4 - len(target)) for target in targets]
    for label, ok, detail, always in targets:
        # Timing targets mean nothing on quick mode's tiny counts; correctness ones (always=True) always count.
        judged = verdict(ok) if always or not QUICK else "not judged in quick mode"
        lines.append("- target %s: **%s** (%s)" % (label, judged, detail))
    lines.extend("- " + note for note in notes)
    markdown = "\n".join(lines)
    print(markdown)
    data = dict(data, machine=info, load_average_end=load_average(), targets=[
        {"target": label, "met": ok, "detail": detail} for label, ok, detail, _always in targets], quick=QUICK)
    where = write_results(name, data, markdown)
    if where:
        print("\nresults: %s.{json,md}" % os.path.relpath(where, REPO_ROOT))
    return 0


def main_wrapper(main):
    """Run main(); a BenchFailure or an interrupt exits non-zero with one clear line, cleanups done by finally."""
    def _term(signum, _frame):
        raise KeyboardInterrupt("signal %d" % signum)
    signal.signal(signal.SIGTERM, _term)
    signal.signal(signal.SIGHUP, _term)
    # Ctrl-C cleans up too when started from a script's background job, where SIGINT arrives ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        sys.exit(main())
    except BenchFailure as exc:
        print("BENCH FAILED: %s" % exc, file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        print("interrupted; cleaned up", file=sys.stderr)
        sys.exit(130)
