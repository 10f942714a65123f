# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One attempt of the guarded build: the log opened, the build started under its holder in its confinement, watched
(watchdog, memory samples, the timeline, the status every ``status_interval``, the deadline) until it ends or a
stop signal interrupts the wait, then ended, its cgroup removed and the attempt classified by ``_build_engine``.
``Attempt`` gets exactly what one attempt needs and returns its outcome (a dict); ``GuardedBuild`` makes one per
attempt and interprets the outcome. Neither reads the other's attributes: the status, the progress and the stop
signal stay with ``GuardedBuild``, reached through the ``report``, ``wait`` and ``warn`` callbacks.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import subprocess
import time

from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _build_engine as engine
from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _build_state as state
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._build_engine import BuildError, Interrupted
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._build_process import BuildProcess, kill_marked
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._confinement import Unavailable
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._timeline import ProgressFollower
from ansible_collections.gpufleet.preflight.plugins.module_utils._facts._kernel_events import KmsgFollower, oom_lines_in_cgroup
from ansible_collections.gpufleet.preflight.plugins.module_utils._human import human


class Attempt(object):
    """One attempt. ``command``: the build's command as the user gave it (for messages); ``argv``: what runs (the
    compiler cache's wrapper in front); ``env`` already carries this attempt's job count. Callbacks:
    ``wait(build, step) -> ended`` (the one interruptible wait; raises Interrupted), ``observe(usage)`` (every
    sample), ``report(attempt, jobs, pgid, seen, usage, now)`` (every ``status_interval``: the follower's state),
    ``warn(text)``."""

    def __init__(self, number, jobs, deadline, command, argv, chdir, env, marker, confinement, log_path, build_dir,
                 limit_bytes, source_seconds, status_interval, root, wait, observe, report, warn):
        self.number, self.jobs, self.deadline = number, jobs, deadline
        self.command, self.argv, self.chdir, self.env, self.marker = command, argv, chdir, env, marker
        self.confinement, self.log_path, self.build_dir = confinement, log_path, build_dir
        self.limit_bytes, self.source_seconds = limit_bytes, source_seconds
        self.status_interval, self.root = status_interval, root
        self.wait, self.observe, self.report, self.warn = wait, observe, report, warn

    def run(self):
        """The attempt's outcome: rc, kind (``_build_engine.classify_attempt``), peak memory, progress, failed steps."""
        attempt, jobs, confinement = self.number, self.jobs, self.confinement
        kernel = KmsgFollower(self.root)
        kernel.start()
        step = min(confinement.poll_seconds or self.status_interval, self.status_interval)
        outcome = {"attempt": attempt, "jobs": jobs, "rc": None, "timed_out": False, "interrupted": None,
                   "watchdog": None, "strategy": confinement.name}
        build, peak, started, next_status = None, 0, time.time(), 0.0
        try:
            with self._open_log() as log:
                follower, log_start = self._start_log(log)
                try:
                    build = BuildProcess(self.argv, confinement, self.chdir, self.env, log, self.marker)
                except (OSError, subprocess.SubprocessError, Unavailable) as exc:
                    raise BuildError("could not start the build %s: %s" % (self.command, exc))
                located = False
                try:
                    while not self.wait(build, step):
                        if build.started and not located:
                            confinement.started(build.pgid)
                            located = True
                        outcome["watchdog"] = outcome["watchdog"] or confinement.guard(build.pgid)
                        usage = confinement.sample()
                        peak = max(peak, usage or 0)
                        self.observe(usage)  # the next sample is this interval's maximum
                        now = time.time()
                        if now >= next_status:
                            next_status = now + self.status_interval
                            self.report(attempt, jobs, build.pgid, follower.update(), usage, now)
                        if self.deadline and now > self.deadline and not outcome["timed_out"]:
                            outcome["timed_out"] = True
                            build.kill()
                            confinement.stop()
                except Interrupted as exc:
                    outcome["interrupted"] = str(exc)
                    build.kill()
                    confinement.stop()
                if build.started and not located:  # a build that ended before the first look
                    confinement.started(build.pgid)
                outcome["oom_kills"], cgroup_peak = confinement.counters()  # the scope lives until release
                outcome["rc"] = build.release()
        finally:
            if build is not None and build.process.returncode is None:
                build.kill()
                build.release()
            # described before cleanup: a systemd scope is gone with its last process, its path with it
            cgroup = confinement.describe().get("cgroup")
            error = confinement.cleanup()
            if error:
                self.warn("could not remove the build cgroup: %s" % error)
            # the holder ends what the build started; a holder killed with its session could not: the marker finds it
            kill_marked(self.marker)
            messages = kernel.messages()
            kernel.close()
        if not build.started and outcome["rc"] != 0 and not (outcome["interrupted"] or outcome["timed_out"]):
            # e.g. systemd-run refused the scope: nothing of the build ran, so no backoff can help
            raise BuildError("the build did not start in its %s confinement (%s exited with %s before running it); "
                             "see %s" % (confinement.name, (confinement.prefix_argv or ["/bin/sh"])[0],
                                         outcome["rc"], self.log_path))
        outcome["kernel_oom_lines"] = oom_lines_in_cgroup(messages, cgroup["path"]) if cgroup else []
        return classified(outcome, state.read_log_tail(self.log_path, 1 << 20, start=log_start),
                          cgroup_peak or peak or None, started)

    def _start_log(self, log):
        """The attempt's header in the log; the progress follower from where this attempt starts."""
        try:
            log.write(("\n=== gpufleet guarded_build: attempt %d, jobs=%d, memory limit %s, %s, %s\n" % (
                self.number, self.jobs, human(self.limit_bytes), self.confinement.name,
                time.strftime("%Y-%m-%d %H:%M:%S"))).encode("utf-8"))
            log.flush()
            log_start = log.tell()
            # every line this attempt adds, not a fixed tail a ptxas flood pushes [N/M] out of; ETA learned
            # from the previous build's .ninja_log, else from the sources' known times (admission, census)
            return ProgressFollower.for_build(self.log_path, log_start, self.build_dir, jobs=self.jobs,
                                              source_seconds=self.source_seconds), log_start
        except (IOError, OSError) as exc:
            raise BuildError("cannot write the build log %s: %s" % (self.log_path, exc.strerror or exc))

    def _open_log(self):
        try:
            return state.open_log(self.log_path)
        except state.StateError as exc:
            raise BuildError("cannot open the build log: %s" % exc)


def classified(outcome, attempt_text, attempt_peak, started):
    """``outcome`` completed: its kind and why, duration, peak and what the attempt's log says of progress and failures."""
    kind, why = engine.classify_attempt(outcome["rc"], outcome["timed_out"], outcome["interrupted"],
                                        outcome["watchdog"], outcome["oom_kills"], outcome["kernel_oom_lines"])
    outcome.update(kind=kind, oom=kind == engine.OOM, why=why, duration=round(time.time() - started, 2),
                   peak_memory_bytes=attempt_peak, peak_memory_human=human(attempt_peak),
                   progress=engine.parse_progress(attempt_text), failed_steps=engine.failed_steps(attempt_text))
    return outcome
