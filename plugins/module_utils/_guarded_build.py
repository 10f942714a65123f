# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A build confined to its own memory cgroup, that backs off when it is OOM-killed.

The seed's ``-j20`` build OOM-killed a whole 449 GiB container. Here the build runs in a child
memory cgroup of the node's own cgroup with a limit equal to the planned budget, so the kernel's
OOM killer picks a compiler inside the build and never sshd. An OOM kill is recognised (the
cgroup's ``oom_kill`` counter, exit status 137, the kernel log) and the build resumes in the same
build directory (ninja keeps what it finished) with half the jobs.

Pure helpers first; the functions that touch cgroupfs, files and processes follow.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import fcntl
import glob
import hashlib
import json
import os
import re
import shlex
import signal
import subprocess
import time

from ansible_collections.gpufleet.preflight.plugins.module_utils._build_plan import (
    _positive_int,
    plan_from_facts,
)
from ansible_collections.gpufleet.preflight.plugins.module_utils._cgroupfs import (
    locate_controller,
    read_text,
)
from ansible_collections.gpufleet.preflight.plugins.module_utils._cpus import collect_cpus
from ansible_collections.gpufleet.preflight.plugins.module_utils._human import human, parse_size
from ansible_collections.gpufleet.preflight.plugins.module_utils._kernel_events import KmsgFollower, oom_lines_in_cgroup
from ansible_collections.gpufleet.preflight.plugins.module_utils._memory import (
    _read_parsed,
    collect_memory,
    parse_oom_kill_count,
)

LOCK_NAME = ".gpufleet-build.lock"
STAMP_NAME = ".gpufleet-build.stamp"
LOG_NAME = "gpufleet-build.log"
STATUS_NAME = "gpufleet-build.status.json"
CGROUP_PREFIX = "gpufleet-build-"
# the variables that carry the job count; kept out of the stamp so a backoff never makes a build stale
JOB_VARIABLES = ("CMAKE_BUILD_PARALLEL_LEVEL", "MAX_JOBS")
SHELL_WORDS = frozenset(("if", "for", "while", "until", "case", "export", "set", "cd", "exec", "env", "time",
                         "{", "(", "!", ".", "source", "test", "[", "true", "false", "echo", "eval"))
_NINJA_PROGRESS = re.compile(r"^\s*\[(\d+)/(\d+)\]", re.MULTILINE)
_SAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


class BuildError(Exception):
    """A failure the module reports with ``fail_json(msg=..., **result)``."""

    def __init__(self, message, result=None):
        super(BuildError, self).__init__(message)
        self.result = result or {}


class Interrupted(Exception):
    """The module got SIGTERM/SIGINT/SIGHUP while the build ran."""


# ---------------------------------------------------------------- pure helpers

def parse_progress(text):
    """The last ninja ``[N/M]`` in ``text`` -> ``{done, total, percent}``, or None."""
    matches = _NINJA_PROGRESS.findall(text or "")
    if not matches:
        return None
    done, total = int(matches[-1][0]), int(matches[-1][1])
    return {"done": done, "total": total, "percent": round(100.0 * done / total, 1) if total else None}


def failed_steps(text, limit=5):
    """ninja's ``FAILED: <outputs>`` lines (the last ``limit``), the step a person must look at."""
    found = [line.strip() for line in (text or "").splitlines() if line.startswith("FAILED: ")]
    return found[-limit:]


def tail_lines(text, count=40):
    lines = (text or "").splitlines()
    return lines[-count:]


def next_jobs(jobs):
    """Halve the jobs after an OOM kill; never below one."""
    return max(1, jobs // 2)


def oom_verdict(returncode, oom_kills, kernel_lines):
    """Was the attempt OOM-killed? ``(bool, why)``.

    The cgroup's counter is the witness when it can be read (a kill from outside that also ends
    in status 137 is then not taken for an OOM); without it, exit status 137 / -9 or a kernel line
    naming the build's cgroup is.
    """
    if oom_kills is not None:
        if oom_kills > 0:
            return True, "the build cgroup's oom_kill counter rose by %d" % oom_kills
        return False, "the build cgroup's oom_kill counter did not move"
    if kernel_lines:
        return True, "the kernel log shows an OOM kill in the build's cgroup"
    if returncode in (137, -9):
        return True, "exit status %s (SIGKILL), no OOM counter to confirm" % returncode
    return False, "exit status %s" % returncode


def build_environment(base_env, jobs, nvcc_threads=1, cmake_args=None, threads_variable="SGL_KERNEL_COMPILE_THREADS",
                      policy_version_minimum=None, ccache_dir=None, cuda_arch_list=None, extra=None):
    """The build's environment: ``base_env`` + ``extra`` + the variables that size and target the build.

    ``CMAKE_ARGS`` = ``cmake_args`` option, then any ``CMAKE_ARGS`` from ``extra``, then
    ``-D<threads_variable>=<nvcc_threads>``: user flags first, ours last (CMake keeps the last ``-D``).
    """
    env = dict(base_env)
    for key, value in (extra or {}).items():
        env[str(key)] = "" if value is None else str(value)
    cmake_parts = [part for part in (cmake_args, (extra or {}).get("CMAKE_ARGS")) if part]
    if threads_variable:
        cmake_parts.append("-D%s=%d" % (threads_variable, nvcc_threads))
    if cmake_parts:
        env["CMAKE_ARGS"] = " ".join(str(part) for part in cmake_parts)
    env["CMAKE_BUILD_PARALLEL_LEVEL"] = str(jobs)
    env["MAX_JOBS"] = str(jobs)
    env["NVCC_THREADS"] = str(nvcc_threads)
    if policy_version_minimum:
        env["CMAKE_POLICY_VERSION_MINIMUM"] = str(policy_version_minimum)
    if ccache_dir:
        env["CCACHE_DIR"] = str(ccache_dir)
    if cuda_arch_list:
        env["TORCH_CUDA_ARCH_LIST"] = str(cuda_arch_list)
    return env


def set_variables(env, base_env):
    """The variables the build environment adds or changes compared with ``base_env``."""
    return dict((key, value) for key, value in env.items() if base_env.get(key) != value)


def configuration_fingerprint(command, chdir, build_dir, variables, source_revision):
    """sha256 over what decides the build's output; the job count is left out on purpose."""
    config = {
        "command": command,
        "chdir": os.path.abspath(chdir),
        "build_dir": os.path.abspath(build_dir),
        "env": dict((key, value) for key, value in sorted(variables.items()) if key not in JOB_VARIABLES),
        "source": source_revision,
    }
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode("utf-8")).hexdigest(), config


def tree_fingerprint(entries):
    """sha256 over ``(relative path, size, mtime_ns)`` entries of a source tree."""
    digest = hashlib.sha256()
    for rel, size, mtime in sorted(entries):
        digest.update(("%s\0%d\0%d\n" % (rel, size, mtime)).encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def command_executable(argv=None, cmd=None):
    """The program a build command starts, to resolve before running; None when a shell construct starts it."""
    if argv:
        return argv[0]
    try:
        words = shlex.split(cmd or "")
    except ValueError:
        return None
    if not words:
        return None
    first = words[0]
    if first in SHELL_WORDS or "=" in first or first[0] in "({$`":
        return None
    return first


def cgroup_name(name, build_dir):
    """``gpufleet-build-<name>-<8 hex of the build dir>``: one cgroup per build directory."""
    digest = hashlib.sha256(os.path.abspath(build_dir).encode("utf-8")).hexdigest()[:8]
    return "%s%s-%s" % (CGROUP_PREFIX, _SAFE_NAME.sub("_", name)[:40], digest)


def oom_at_one_job_message(budget_bytes, nvcc_threads):
    return ("OOM-killed at jobs=1: the budget of %s is too small for one compile with %d nvcc thread%s; "
            "raise memory (memory_limit) or lower nvcc threads" % (
                human(budget_bytes), nvcc_threads, "" if nvcc_threads == 1 else "s"))


# ---------------------------------------------------------------- I/O: memory, source, lock, files

def read_effective_memory(root="/"):
    """The node's effective memory when node_facts did not send it: the same facts node_facts gathers."""
    return collect_memory(root=root)


def source_revision(source, run, ignore=()):
    """``{'kind': 'git', 'revision': HEAD, 'dirty': hash}`` for a git work tree, else a hash of the
    tree's file sizes and mtimes (``ignore``: names and relative paths to skip, like the build dir)."""
    rc, out, dummy = run(["git", "-C", source, "rev-parse", "HEAD"], 30)
    if rc == 0 and out.strip():
        revision = {"kind": "git", "revision": out.strip()}
        rc, status, dummy = run(["git", "-C", source, "status", "--porcelain", "--untracked-files=no"], 60)
        if rc == 0 and status.strip():
            entries = []
            for line in status.splitlines():
                rel = line[3:].split(" -> ")[-1]
                try:
                    info = os.stat(os.path.join(source, rel))
                    entries.append((rel, info.st_size, int(info.st_mtime * 1e9)))
                except OSError:
                    entries.append((rel, -1, -1))
            revision["dirty"] = tree_fingerprint(entries)
        return revision
    ignore = set(ignore)
    entries = []
    for current, dirs, files in os.walk(source):
        rel_dir = os.path.relpath(current, source)
        dirs[:] = sorted(d for d in dirs if d not in ignore and os.path.normpath(os.path.join(rel_dir, d)) not in ignore)
        for name in files:
            rel = os.path.normpath(os.path.join(rel_dir, name))
            if name in ignore or rel in ignore:
                continue
            try:
                info = os.lstat(os.path.join(current, name))
            except OSError:
                continue
            entries.append((rel, info.st_size, int(info.st_mtime * 1e9)))
    return {"kind": "tree", "revision": tree_fingerprint(entries), "files": len(entries)}


def acquire_lock(build_dir):
    """Hold ``<build_dir>/.gpufleet-build.lock`` (flock, non-blocking); BuildError naming the holder if taken."""
    path = os.path.join(build_dir, LOCK_NAME)
    handle = open(path, "a+")
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except (IOError, OSError) as exc:
        if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            handle.close()
            raise
        handle.seek(0)
        holder = handle.read().strip() or "unknown"
        handle.close()
        raise BuildError("another build holds %s (pid %s): two builds never run in one build directory at once; "
                         "wait for it or stop it" % (path, holder), {"lock": path, "lock_holder_pid": holder})
    handle.seek(0)
    handle.truncate()
    handle.write("%d\n" % os.getpid())
    handle.flush()
    return handle


def write_json_atomic(path, data):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as handle:
        json.dump(data, handle, indent=2, sort_keys=True)
        handle.write("\n")
    os.rename(tmp, path)


def read_json(path):
    try:
        with open(path) as handle:
            return json.load(handle)
    except (IOError, OSError, ValueError):
        return None


def read_log_tail(path, max_bytes=65536):
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - max_bytes))
            return handle.read().decode("utf-8", "replace")
    except (IOError, OSError):
        return ""


def find_artifacts(chdir, patterns):
    found = []
    for pattern in patterns or []:
        found.extend(glob.glob(os.path.join(chdir, pattern)))
    return sorted(set(os.path.abspath(path) for path in found))


def artifacts_present(chdir, patterns):
    return all(glob.glob(os.path.join(chdir, pattern)) for pattern in patterns or [])


# ---------------------------------------------------------------- I/O: the build's cgroup

class BuildCgroup(object):
    """A child memory cgroup of the node's own cgroup, made and removed through cgroupfs."""

    def __init__(self, parent, version, name, mountpoint):
        self.parent = parent
        self.version = version
        self.name = name
        self.mountpoint = mountpoint
        self.dir = os.path.join(parent, name)
        self.path = "/" + os.path.relpath(self.dir, mountpoint)
        self.killed_leftovers = []

    @classmethod
    def under_own(cls, name, root="/"):
        where = locate_controller("memory", root=root)
        if where["dir"] is None:
            raise BuildError("cannot confine the build: %s (set confine=false to run it unconfined)"
                             % "; ".join(where["errors"]))
        return cls(where["dir"], where["version"], name, where["mountpoint"])

    def _file(self, name):
        return os.path.join(self.dir, name)

    def _write(self, name, value):
        with open(self._file(name), "w") as handle:
            handle.write(str(value))

    def create(self, limit_bytes):
        if os.path.isdir(self.dir):
            # left by a run that was killed: we hold the build dir's lock, so whatever runs there is an orphan
            self.killed_leftovers = self.kill_all()
            self.remove()
        if self.version == 2:
            self._enable_v2_memory()
        try:
            os.mkdir(self.dir)
        except OSError as exc:
            raise BuildError("cannot create the build cgroup %s: %s (needs root or a delegated cgroup; "
                             "set confine=false to run unconfined)" % (self.dir, exc.strerror))
        try:
            if self.version == 1:
                self._write("memory.limit_in_bytes", limit_bytes)
                if os.path.exists(self._file("memory.memsw.limit_in_bytes")):
                    try:  # no swapping past the budget either
                        self._write("memory.memsw.limit_in_bytes", limit_bytes)
                    except (IOError, OSError):
                        pass
            else:
                self._write("memory.max", limit_bytes)
                if os.path.exists(self._file("memory.swap.max")):
                    self._write("memory.swap.max", 0)
        except (IOError, OSError) as exc:
            self.remove()
            raise BuildError("cannot set the memory limit of %s: %s" % (self.dir, exc.strerror or exc))

    def _enable_v2_memory(self):
        control = os.path.join(self.parent, "cgroup.subtree_control")
        text, dummy = read_text(control)
        if text is not None and "memory" in text.split():
            return
        try:
            with open(control, "w") as handle:
                handle.write("+memory")
        except (IOError, OSError) as exc:
            raise BuildError("cannot enable the memory controller for children of %s: %s (cgroup v2 refuses it "
                             "while processes sit in that cgroup itself; run from a leaf or set confine=false)"
                             % (self.parent, exc.strerror or exc))

    def join_function(self):
        """For ``preexec_fn``: move the freshly forked child into the cgroup before it execs."""
        procs = self._file("cgroup.procs")

        def join():
            with open(procs, "w") as handle:
                handle.write(str(os.getpid()))
        return join

    def pids(self):
        text, dummy = read_text(self._file("cgroup.procs"))
        return [int(line) for line in (text or "").split() if line.isdigit()]

    def _counter(self, name):
        """A byte counter of the cgroup; None when it cannot be read (``memory.peak`` is new in 5.19)."""
        return _read_parsed("/", self._file(name), int, [], None)

    def usage(self):
        return self._counter("memory.usage_in_bytes" if self.version == 1 else "memory.current")

    def peak(self):
        return self._counter("memory.max_usage_in_bytes" if self.version == 1 else "memory.peak")

    def oom_kills(self):
        text, dummy = read_text(self._file("memory.oom_control" if self.version == 1 else "memory.events"))
        return parse_oom_kill_count(text)

    def kill_all(self, wait=15.0):
        """SIGKILL everything in the cgroup and wait until it is empty; returns the pids killed."""
        killed = []
        deadline = time.time() + wait
        while time.time() < deadline:
            pids = self.pids()
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                    if pid not in killed:
                        killed.append(pid)
                except OSError:
                    pass
            time.sleep(0.1)
        return killed

    def remove(self, wait=15.0):
        """rmdir the cgroup once it is empty (retrying while dying tasks leave); returns an error or None."""
        deadline = time.time() + wait
        while True:
            try:
                os.rmdir(self.dir)
                return None
            except OSError as exc:
                if exc.errno == errno.ENOENT:
                    return None
                if time.time() > deadline:
                    return "%s: %s" % (self.dir, exc.strerror)
                if self.pids():
                    self.kill_all(wait=1.0)
                time.sleep(0.1)


# ---------------------------------------------------------------- the build

class GuardedBuild(object):
    """Runs one guarded build. ``params``: the module's options (already type-checked);
    ``run(argv, timeout) -> (rc, out, err)``; ``which(name, path) -> path or None``."""

    def __init__(self, params, run, which, base_env=None, check_mode=False, root="/"):
        self.params = params
        self.run_command = run
        self.which = which
        self.base_env = dict(os.environ if base_env is None else base_env)
        self.check_mode = check_mode
        self.root = root
        self.status = {}
        self.result = {}

    # -- validation and planning, before anything runs
    def prepare(self):
        params = self.params
        if bool(params.get("argv")) == bool(params.get("cmd")):
            raise BuildError("give exactly one of argv (a list) or cmd (a shell string)")
        self.chdir = os.path.abspath(params["chdir"])
        if not os.path.isdir(self.chdir):
            raise BuildError("chdir %s does not exist or is not a directory" % self.chdir)
        self.source = os.path.abspath(params.get("source") or self.chdir)
        if not os.path.isdir(self.source):
            raise BuildError("source %s does not exist or is not a directory" % self.source)
        build_dir = params.get("build_dir") or "build"
        self.build_dir = os.path.abspath(os.path.join(self.chdir, build_dir))
        self.name = params.get("name") or os.path.basename(self.chdir.rstrip("/")) or "build"

        try:
            self.nvcc_threads = _positive_int("nvcc_threads", params.get("nvcc_threads", 1))
            self.max_attempts = _positive_int("max_attempts", params.get("max_attempts", 4))
            jobs = _positive_int("jobs", params.get("jobs"), allow_none=True)
            per_thread = parse_size(params.get("memory_per_thread") or "5GiB")
            limit = params.get("memory_limit")
            limit = parse_size(limit) if limit not in (None, "") else None
        except ValueError as exc:
            raise BuildError(str(exc))
        self.per_job_bytes = self.nvcc_threads * per_thread

        self.plan = None
        if jobs is None or limit is None:
            memory = params.get("memory_facts") or read_effective_memory(self.root)
            cpus = params.get("cpus") or collect_cpus(root=self.root)["usable"]
            try:
                self.plan = plan_from_facts(memory, cpus, memory_per_thread=per_thread, nvcc_threads=self.nvcc_threads,
                                            reserve=params.get("reserve"), min_jobs=params.get("min_jobs") or 1,
                                            max_jobs=params.get("max_jobs"))
            except ValueError as exc:
                raise BuildError(str(exc))
        if limit is None:
            if not self.plan["fits"]:
                raise BuildError("the memory budget is below one job: %s" % self.plan["reason"], {"plan": self.plan})
            limit = self.plan["budget_bytes"]
        if limit < self.per_job_bytes:
            raise BuildError("memory_limit %s is below one job: %d nvcc thread%s x %s memory_per_thread = %s; "
                             "raise memory_limit or lower nvcc_threads / memory_per_thread" % (
                                 human(limit), self.nvcc_threads, "" if self.nvcc_threads == 1 else "s",
                                 human(per_thread), human(self.per_job_bytes)))
        self.limit_bytes = limit
        self.jobs = jobs if jobs is not None else self.plan["jobs"]

        self.env = build_environment(
            self.base_env, self.jobs, nvcc_threads=self.nvcc_threads, cmake_args=params.get("cmake_args"),
            threads_variable=params.get("threads_variable", "SGL_KERNEL_COMPILE_THREADS"),
            policy_version_minimum=params.get("cmake_policy_version_minimum"), ccache_dir=params.get("ccache_dir"),
            cuda_arch_list=params.get("cuda_arch_list"), extra=params.get("environment"))
        self.command = list(params["argv"]) if params.get("argv") else ["/bin/sh", "-c", params["cmd"]]
        program = command_executable(params.get("argv"), params.get("cmd"))
        if program is not None:
            if "/" in program:
                resolved = os.path.join(self.chdir, program)
                if not (os.path.isfile(resolved) and os.access(resolved, os.X_OK)):
                    resolved = None
            else:
                resolved = self.which(program, self.env.get("PATH", os.defpath))
            if not resolved:
                raise BuildError("the build command %s was not found (PATH=%s); install it or fix argv/cmd"
                                 % (program, self.env.get("PATH", "")))
        self.log_path = os.path.abspath(params.get("log_path") or os.path.join(self.build_dir, LOG_NAME))
        self.status_path = os.path.abspath(params.get("status_path") or os.path.join(self.build_dir, STATUS_NAME))
        self.stamp_path = os.path.join(self.build_dir, STAMP_NAME)
        self.artifact_patterns = params.get("artifacts") or []
        self.confine = params.get("confine", True)
        self.cgroup = None
        if self.confine:
            self.cgroup = BuildCgroup.under_own(cgroup_name(self.name, self.build_dir), root=self.root)

    def fingerprint(self):
        ignore = set(self.params.get("source_ignore") or [])
        for path in (self.build_dir, self.log_path, self.status_path):
            if path.startswith(self.source.rstrip("/") + "/"):
                ignore.add(os.path.relpath(path, self.source))
        self.revision = source_revision(self.source, self.run_command, ignore=ignore)
        self.variables = set_variables(self.env, self.base_env)
        digest, config = configuration_fingerprint(self.command, self.chdir, self.build_dir, self.variables,
                                                   self.revision)
        return digest, config

    def base_result(self):
        return {
            "command": self.command,
            "chdir": self.chdir,
            "build_dir": self.build_dir,
            "jobs": self.jobs,
            "nvcc_threads": self.nvcc_threads,
            "memory_limit_bytes": self.limit_bytes,
            "memory_limit_human": human(self.limit_bytes),
            "plan": self.plan,
            "env": self.variables,
            "log": self.log_path,
            "status": self.status_path,
            "stamp": self.stamp_path,
            "source_revision": self.revision,
            "cgroup": {"version": self.cgroup.version, "dir": self.cgroup.dir, "path": self.cgroup.path}
            if self.cgroup else None,
        }

    # -- status file
    def write_status(self, **changes):
        self.status.update(changes)
        self.status["updated_at"] = time.time()
        try:
            write_json_atomic(self.status_path, self.status)
        except (IOError, OSError):
            pass  # the status file is for people watching; the build does not depend on it

    # -- one attempt
    def run_attempt(self, attempt, jobs, deadline):
        self.env["CMAKE_BUILD_PARALLEL_LEVEL"] = str(jobs)
        self.env["MAX_JOBS"] = str(jobs)
        kernel = KmsgFollower()
        kernel.start()
        preexec = None
        if self.cgroup:
            self.cgroup.create(self.limit_bytes)
            preexec = self.cgroup.join_function()
        with open(self.log_path, "ab") as log:
            log.write(("\n=== gpufleet guarded_build: attempt %d, jobs=%d, memory limit %s, %s\n" % (
                attempt, jobs, human(self.limit_bytes), time.strftime("%Y-%m-%d %H:%M:%S"))).encode("utf-8"))
            log.flush()
            log_start = log.tell()
            started = time.time()
            process = None
            timed_out = False
            try:
                try:
                    process = subprocess.Popen(self.command, cwd=self.chdir, env=self.env, stdin=subprocess.DEVNULL,
                                               stdout=log, stderr=subprocess.STDOUT, close_fds=True,
                                               preexec_fn=preexec)
                except (OSError, subprocess.SubprocessError) as exc:
                    raise BuildError("could not start the build %s: %s" % (self.command, exc))
                interval = float(self.params.get("status_interval") or 2)
                peak = 0
                while True:
                    try:
                        rc = process.wait(timeout=interval)
                        break
                    except subprocess.TimeoutExpired:
                        pass
                    usage = self.cgroup.usage() if self.cgroup else None
                    peak = max(peak, usage or 0)
                    self.write_status(state="running", attempt=attempt, jobs=jobs, pid=process.pid,
                                      progress=parse_progress(read_log_tail(self.log_path, 8192)),
                                      memory_bytes=usage, memory_human=human(usage),
                                      elapsed_seconds=round(time.time() - self.started, 1))
                    if deadline and time.time() > deadline:
                        timed_out = True
                        self._stop(process)
            except BaseException:
                if process is not None and process.poll() is None:
                    self._stop(process)
                self._finish_cgroup()
                kernel.close()
                raise
        duration = time.time() - started
        # this attempt's own output (the log keeps every attempt); the last MiB is plenty for the verdict
        with open(self.log_path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(log_start, handle.tell() - (1 << 20)))
            attempt_text = handle.read().decode("utf-8", "replace")
        oom_kills = self.cgroup.oom_kills() if self.cgroup else None
        attempt_peak = (self.cgroup.peak() if self.cgroup else None) or peak or None
        messages = kernel.messages()
        kernel.close()
        self._finish_cgroup()
        kernel_lines = oom_lines_in_cgroup(messages, self.cgroup.path if self.cgroup else None)
        oom, why = oom_verdict(rc, oom_kills, kernel_lines)
        if timed_out:
            oom, why = False, "timed out after %s seconds" % self.params.get("timeout")
        return {
            "attempt": attempt,
            "jobs": jobs,
            "rc": rc,
            "oom": oom,
            "why": why,
            "oom_kills": oom_kills,
            "kernel_oom_lines": kernel_lines,
            "timed_out": timed_out,
            "duration": round(duration, 2),
            "peak_memory_bytes": attempt_peak,
            "peak_memory_human": human(attempt_peak),
            "progress": parse_progress(attempt_text),
            "failed_steps": failed_steps(attempt_text),
            "leftover_pids_killed": self.cgroup.killed_leftovers if self.cgroup else [],
        }

    def _stop(self, process):
        if self.cgroup:
            self.cgroup.kill_all()
        try:
            process.kill()
        except OSError:
            pass
        process.wait()

    def _finish_cgroup(self):
        if self.cgroup:
            self.cgroup.kill_all()
            error = self.cgroup.remove()
            if error:
                self.result.setdefault("warnings", []).append("could not remove the build cgroup: %s" % error)

    # -- the whole run
    def execute(self):
        self.prepare()
        digest, config = self.fingerprint()
        result = self.result
        result.update(self.base_result())
        result["fingerprint"] = digest
        stamp = read_json(self.stamp_path) if os.path.isdir(self.build_dir) else None
        up_to_date = bool(stamp and stamp.get("fingerprint") == digest
                          and artifacts_present(self.chdir, self.artifact_patterns)) and not self.params.get("force")
        result["up_to_date"] = up_to_date
        if up_to_date:
            result.update(changed=False, attempts=[], final_jobs=stamp.get("final_jobs"),
                          artifacts=find_artifacts(self.chdir, self.artifact_patterns),
                          peak_memory_bytes=stamp.get("peak_memory_bytes"),
                          peak_memory_human=human(stamp.get("peak_memory_bytes")),
                          duration=0.0, msg="up to date (stamp %s matches)" % self.stamp_path)
            return result
        if self.check_mode:
            result.update(changed=True, attempts=[], msg="would run %s in %s with jobs=%d under a %s memory limit"
                          % (" ".join(self.command), self.chdir, self.jobs, human(self.limit_bytes)))
            return result

        if not os.path.isdir(self.build_dir):
            os.makedirs(self.build_dir)
        for path in (self.log_path, self.status_path):
            if not os.path.isdir(os.path.dirname(path)):
                os.makedirs(os.path.dirname(path))
        lock = acquire_lock(self.build_dir)
        previous_handlers = self._trap_signals()
        try:
            return self._attempts(result, digest, config)
        finally:
            self._restore_signals(previous_handlers)
            lock.close()

    def _trap_signals(self):
        def interrupted(signum, frame):
            raise Interrupted("signal %d" % signum)
        previous = {}
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            previous[signum] = signal.signal(signum, interrupted)
        return previous

    @staticmethod
    def _restore_signals(previous):
        for signum, handler in previous.items():
            signal.signal(signum, handler)

    def _attempts(self, result, digest, config):
        self.started = time.time()
        timeout = self.params.get("timeout")
        deadline = self.started + timeout if timeout else None
        attempts = []
        result["attempts"] = attempts
        jobs = self.jobs
        self.status = {"state": "starting", "name": self.name, "log": self.log_path, "max_attempts": self.max_attempts,
                       "memory_limit_bytes": self.limit_bytes, "memory_limit_human": human(self.limit_bytes),
                       "started_at": self.started, "attempts": attempts, "module_pid": os.getpid()}
        failure = None
        try:
            for attempt in range(1, self.max_attempts + 1):
                self.write_status(state="running", attempt=attempt, jobs=jobs)
                outcome = self.run_attempt(attempt, jobs, deadline)
                attempts.append(outcome)
                if outcome["rc"] == 0:
                    break
                if outcome["timed_out"]:
                    failure = "the build timed out after %s seconds (attempt %d, jobs=%d)" % (timeout, attempt, jobs)
                    break
                if not outcome["oom"]:
                    step = outcome["failed_steps"][-1] if outcome["failed_steps"] else None
                    failure = "the build failed with exit status %s (%s)%s" % (
                        outcome["rc"], outcome["why"], "; failing step: %s" % step if step else "")
                    break
                if jobs == 1:
                    failure = oom_at_one_job_message(self.limit_bytes, self.nvcc_threads)
                    break
                if attempt == self.max_attempts:
                    failure = "OOM-killed on all %d attempts (last at jobs=%d); raise max_attempts or memory_limit, " \
                              "or start with fewer jobs" % (self.max_attempts, jobs)
                    break
                jobs = next_jobs(jobs)
                self.write_status(state="oom-backoff", jobs=jobs,
                                  message="OOM-killed at jobs=%d; resuming with jobs=%d" % (outcome["jobs"], jobs))
        except Interrupted as exc:
            failure = "the build was interrupted (%s)" % exc
        duration = round(time.time() - self.started, 2)
        peaks = [a["peak_memory_bytes"] for a in attempts if a.get("peak_memory_bytes")]
        peak = max(peaks) if peaks else None
        result.update(
            final_jobs=attempts[-1]["jobs"] if attempts else jobs,
            peak_memory_bytes=peak,
            peak_memory_human=human(peak),
            duration=duration,
            artifacts=find_artifacts(self.chdir, self.artifact_patterns),
            oom_kills=sum(a["oom_kills"] or 0 for a in attempts),
        )
        result["env"] = set_variables(self.env, self.base_env)  # with the final job count
        if failure is None:
            result.update(changed=True, msg="built in %d attempt%s, final jobs=%d" % (
                len(attempts), "" if len(attempts) == 1 else "s", result["final_jobs"]))
            self.write_status(state="succeeded", message=result["msg"], progress=attempts[-1]["progress"],
                              peak_memory_bytes=peak, duration=duration)
            write_json_atomic(self.stamp_path, {"fingerprint": digest, "config": config, "final_jobs": result["final_jobs"],
                                                "peak_memory_bytes": peak, "finished_at": time.time(),
                                                "artifacts": result["artifacts"]})
            return result
        log_text = read_log_tail(self.log_path, 1 << 20)
        result.update(changed=True, failed=True, log_tail=tail_lines(log_text, int(self.params.get("tail_lines") or 40)),
                      failed_steps=attempts[-1]["failed_steps"] if attempts else [])
        self.write_status(state="failed", message=failure, peak_memory_bytes=peak, duration=duration)
        raise BuildError(failure, result)
