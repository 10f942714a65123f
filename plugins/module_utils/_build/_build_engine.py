# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The guarded build's decisions, pure: what an attempt's end means and what comes next.

``classify_attempt`` turns how an attempt ended (exit status, timeout, signal to the module, the
watchdog, OOM counters, kernel lines) into one kind; ``decide_next`` turns that kind into the next
step (done, retry with fewer jobs, fail with a message). Both are tested from tables, so a change to
the retry rules shows up as a red test rather than as a node OOM-killed in production.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import shlex

from ansible_collections.gpufleet.preflight.plugins.module_utils._human import human

# the variables that carry the job count; kept out of the stamp so a backoff never makes a build stale
JOB_VARIABLES = ("CMAKE_BUILD_PARALLEL_LEVEL", "MAX_JOBS")
# shell keywords and builtins (POSIX sh, dash, bash): a command starting with one is the shell's, not a program
SHELL_WORDS = frozenset((
    "if", "for", "while", "until", "case", "export", "set", "cd", "exec", "env", "time", "{", "(", "!", ".",
    "source", "test", "[", "[[", "true", "false", "echo", "eval", ":", "ulimit", "umask", "unset", "readonly",
    "local", "trap", "wait", "read", "shift", "printf", "pwd", "alias", "unalias", "type", "command", "hash",
    "getopts", "kill", "return", "exit", "break", "continue", "times", "declare", "typeset", "let", "builtin"))
_NINJA_PROGRESS = re.compile(r"^\s*\[(\d+)/(\d+)\]", re.MULTILINE)

# kinds of attempt ends
OK, OOM, TIMEOUT, FAILED, INTERRUPTED = "ok", "oom", "timeout", "failed", "interrupted"
# next steps
DONE, RETRY, FAIL = "done", "retry", "fail"


class BuildError(Exception):
    """A failure the module reports with ``fail_json(msg=..., **result)``."""

    def __init__(self, message, result=None):
        super(BuildError, self).__init__(message)
        self.result = result or {}


class Interrupted(Exception):
    """The module got SIGTERM/SIGINT/SIGHUP while the build ran."""


def parse_progress(text):
    """The last ninja ``[N/M]`` in ``text`` -> ``{done, total, percent}``, or None."""
    matches = _NINJA_PROGRESS.findall(text or "")
    if not matches:
        return None
    done, total = int(matches[-1][0]), int(matches[-1][1])
    return {"done": done, "total": total, "percent": round(100.0 * done / total, 1) if total else None}


def failed_steps(text, limit=5):
    """ninja's ``FAILED: <outputs>`` lines (the last ``limit``), the step a person must look at - also where pip
    indents the build backend's output (``pip wheel -v``: two spaces)."""
    found = [line.strip() for line in (text or "").splitlines() if line.lstrip().startswith("FAILED: ")]
    return found[-limit:]


def tail_lines(text, count):
    lines = (text or "").splitlines()
    return lines[-count:] if count > 0 else []


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


def classify_attempt(returncode, timed_out=False, interrupted=None, watchdog=None, oom_kills=None,
                     kernel_lines=()):
    """How an attempt ended -> ``(kind, why)``, kind one of ok, oom, timeout, failed, interrupted.

    Our own stops come first: a build we SIGKILLed for the timeout or a signal ends in status -9 /
    137 like an OOM kill, and must not be retried as one. A watchdog stop is an OOM the kernel did
    not have to make.
    """
    if interrupted:
        return INTERRUPTED, str(interrupted)
    if timed_out:
        return TIMEOUT, "stopped at the timeout"
    if watchdog:
        return OOM, watchdog
    if returncode == 0:
        return OK, "exit status 0"
    oom, why = oom_verdict(returncode, oom_kills, kernel_lines)
    return (OOM if oom else FAILED), why


def decide_next(kind, attempt, max_attempts, jobs, why="", failed_step=None, timeout=None,
                budget_bytes=None, nvcc_threads=1, learned=None):
    """After attempt ``attempt`` (of ``max_attempts``) ran with ``jobs`` and ended as ``kind``:
    ``(DONE, jobs, None)``, ``(RETRY, jobs, message)`` or ``(FAIL, jobs, message)``.

    ``learned``: with admission, the sources whose need the launchers learned from this attempt's OOM (killed for
    the first time, or again holding more). Then the scheduler admits less - the same jobs again; halving ninja's
    ``-j`` (which pinned the real tree's rerun at one job, 9-11 GiB of 12 idle) is the last resort, for an OOM that
    taught nothing (the same source killed again at the same peak) or a build without admission."""
    if kind == OK:
        return DONE, jobs, None
    if kind == INTERRUPTED:
        return FAIL, jobs, "the build was interrupted (%s)" % why
    if kind == TIMEOUT:
        return FAIL, jobs, "the build timed out after %s seconds (attempt %d, jobs=%d)" % (timeout, attempt, jobs)
    if kind != OOM:
        return FAIL, jobs, "the build failed (%s)%s" % (why, "; failing step: %s" % failed_step if failed_step else "")
    if jobs == 1 and not learned:
        return FAIL, jobs, oom_at_one_job_message(budget_bytes, nvcc_threads)
    if attempt >= max_attempts:
        return FAIL, jobs, ("OOM-killed on all %d attempts (last at jobs=%d); raise max_attempts or memory_limit, "
                            "or start with fewer jobs" % (max_attempts, jobs))
    if learned:
        names = ", ".join(learned[:3]) + (" and %d more" % (len(learned) - 3) if len(learned) > 3 else "")
        return RETRY, jobs, ("OOM-killed at jobs=%d (%s); the scheduler learned what %s held when killed and admits it "
                             "only where that fits: resuming with jobs=%d" % (jobs, why, names, jobs))
    fewer = next_jobs(jobs)
    return RETRY, fewer, "OOM-killed at jobs=%d (%s)%s; resuming with jobs=%d" % (
        jobs, why, "" if learned is None else ", and the scheduler learned nothing new from it", fewer)


def oom_at_one_job_message(budget_bytes, nvcc_threads):
    """One compile alone does not fit: more memory, or - only when there are threads to take away - fewer of them."""
    advice = "raise memory (memory_limit) or lower nvcc threads" if nvcc_threads > 1 else (
        "raise memory (memory_limit): it already ran with one nvcc thread, the fewest there are")
    return "OOM-killed at jobs=1: the budget of %s is too small for one compile with %d nvcc thread%s; %s" % (
        human(budget_bytes), nvcc_threads, "" if nvcc_threads == 1 else "s", advice)


def build_environment(base_env, jobs, nvcc_threads, cmake_args, threads_variable, policy_version_minimum,
                      ccache_dir, cuda_arch_list, extra):
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


def shown_variables(variables, secret_names):
    """The build's variables for the result: values of ``secret_names`` (what the user's ``environment``
    set, which may hold tokens) replaced by ``********``; the sizing variables stay readable."""
    return dict((key, "********" if key in secret_names else value) for key, value in variables.items())


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
