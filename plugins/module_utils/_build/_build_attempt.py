# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One attempt of the guarded build: the log opened, the build started under its holder in its confinement, watched
(watchdog, memory samples, the timeline, the status every ``status_interval``, the deadline) until it ends or a
stop signal interrupts the wait, then ended, its cgroup removed and the attempt classified by ``_build_engine``.
Split from ``_guarded_build`` (the 500-line rule): ``GuardedBuild`` takes these methods from ``AttemptRunner``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import subprocess
import time

from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _build_engine as engine
from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _build_state as state
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._admission_setup import compiles_of_build
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._build_engine import BuildError, Interrupted
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._build_methods import SIGNAL_NAMES
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._build_process import BuildProcess, kill_marked
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._confinement import Unavailable
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._timeline import (
    ProgressFollower,
    overall_progress,
    rate_eta,
)
from ansible_collections.gpufleet.preflight.plugins.module_utils._facts._kernel_events import KmsgFollower, oom_lines_in_cgroup
from ansible_collections.gpufleet.preflight.plugins.module_utils._human import human


class AttemptRunner(object):
    """The attempt methods of ``GuardedBuild`` (they use its state: params, confinement, env, log and status)."""

    def run_attempt(self, attempt, jobs, deadline):
        self.env["CMAKE_BUILD_PARALLEL_LEVEL"] = self.env["MAX_JOBS"] = str(jobs)
        kernel = KmsgFollower(self.root)
        kernel.start()
        step = min(self.confinement.poll_seconds or self.params["status_interval"], self.params["status_interval"])
        outcome = {"attempt": attempt, "jobs": jobs, "rc": None, "timed_out": False, "interrupted": None,
                   "watchdog": None, "strategy": self.confinement.name}
        build, peak, started, next_status = None, 0, time.time(), 0.0
        try:
            with self._open_log() as log:
                try:
                    log.write(("\n=== gpufleet guarded_build: attempt %d, jobs=%d, memory limit %s, %s, %s\n" % (
                        attempt, jobs, human(self.limit_bytes), self.confinement.name,
                        time.strftime("%Y-%m-%d %H:%M:%S"))).encode("utf-8"))
                    log.flush()
                    log_start = log.tell()
                    # every line this attempt adds, not a fixed tail a ptxas flood pushes [N/M] out of; ETA learned
                    # from the previous build's .ninja_log, else from the sources' known times (admission, census)
                    follower = ProgressFollower.for_build(self.log_path, log_start, self.build_dir, jobs=jobs,
                                                          source_seconds=self.source_seconds)
                except (IOError, OSError) as exc:
                    raise BuildError("cannot write the build log %s: %s" % (self.log_path, exc.strerror or exc))
                try:
                    build = BuildProcess(self.cache.command(self.command), self.confinement, self.chdir, self.env, log,
                                         self.marker)
                except (OSError, subprocess.SubprocessError, Unavailable) as exc:
                    raise BuildError("could not start the build %s: %s" % (self.command, exc))
                located = False
                try:
                    while not self._wait(build, step):
                        if build.started and not located:
                            self.confinement.started(build.pgid)
                            located = True
                        outcome["watchdog"] = outcome["watchdog"] or self.confinement.guard(build.pgid)
                        usage = self.confinement.sample()
                        peak = max(peak, usage or 0)
                        self.timeline.observe(usage)  # the next sample is this interval's maximum
                        now = time.time()
                        if now >= next_status:
                            next_status = now + self.params["status_interval"]
                            seen = self._progress(follower.update(), now)
                            # a rise of the cgroup's peak counter since the last sample: reached in this interval
                            self.timeline.add(now - self.started, usage, jobs, attempt, peak=self.confinement.counters()[1])
                            self.write_status(state="running", attempt=attempt, jobs=jobs, build_pgid=build.pgid,
                                              progress=seen["progress"], step=seen["step"], steps_total=self.steps_total,
                                              eta_seconds=seen["eta_seconds"], eta_basis=seen["eta_basis"],
                                              compiles=compiles_of_build(self.admission, build.pgid),
                                              timeline=self.timeline.to_list(),
                                              memory_bytes=usage, memory_human=human(usage),
                                              elapsed_seconds=round(now - self.started, 1))
                        if deadline and now > deadline and not outcome["timed_out"]:
                            outcome["timed_out"] = True
                            build.kill()
                            self.confinement.stop()
                except Interrupted as exc:
                    outcome["interrupted"] = str(exc)
                    build.kill()
                    self.confinement.stop()
                if build.started and not located:  # a build that ended before the first look
                    self.confinement.started(build.pgid)
                outcome["oom_kills"], cgroup_peak = self.confinement.counters()  # the scope lives until release
                outcome["rc"] = build.release()
        finally:
            if build is not None and build.process.returncode is None:
                build.kill()
                build.release()
            # described before cleanup: a systemd scope is gone with its last process, its path with it
            cgroup = self.confinement.describe().get("cgroup")
            error = self.confinement.cleanup()
            if error:
                self.warnings.append("could not remove the build cgroup: %s" % error)
            # the holder ends what the build started; a holder killed with its session could not: the marker finds it
            kill_marked(self.marker)
            messages = kernel.messages()
            kernel.close()
        if not build.started and outcome["rc"] != 0 and not (outcome["interrupted"] or outcome["timed_out"]):
            # e.g. systemd-run refused the scope: nothing of the build ran, so no backoff can help
            raise BuildError("the build did not start in its %s confinement (%s exited with %s before running it); "
                             "see %s" % (self.confinement.name, (self.confinement.prefix_argv or ["/bin/sh"])[0],
                                         outcome["rc"], self.log_path))
        attempt_text = state.read_log_tail(self.log_path, 1 << 20, start=log_start)
        outcome["kernel_oom_lines"] = oom_lines_in_cgroup(messages, cgroup["path"]) if cgroup else []
        kind, why = engine.classify_attempt(outcome["rc"], outcome["timed_out"], outcome["interrupted"],
                                            outcome["watchdog"], outcome["oom_kills"], outcome["kernel_oom_lines"])
        attempt_peak = cgroup_peak or peak or None
        self.timeline.close_attempt(time.time() - self.started, jobs, attempt, attempt_peak)  # the line reaches it
        outcome.update(kind=kind, oom=kind == engine.OOM, why=why, duration=round(time.time() - started, 2),
                       peak_memory_bytes=attempt_peak, peak_memory_human=human(attempt_peak),
                       progress=engine.parse_progress(attempt_text), failed_steps=engine.failed_steps(attempt_text))
        self.steps_total = overall_progress(outcome["progress"], self.steps_total)[1]   # a short attempt counts too
        return outcome

    def _progress(self, seen, now):
        """The follower's state counted over the whole build: steps across attempts and resumed runs, and one ETA
        (the learned per-step times of the last build's .ninja_log, else this run's rate over every attempt),
        smoothed over minutes (``EtaSmoother``), with its basis."""
        progress, self.steps_total = overall_progress(seen["progress"], self.steps_total)
        if progress and self.run_counted is None:
            self.run_counted = (progress["done"], now)
        raw, basis = seen["eta_seconds"], "learned"
        if raw is None and progress:
            raw, basis = rate_eta(progress["done"], progress["total"], (self.run_counted[0], now - self.run_counted[1])), "rate"
        eta = self.eta.update(raw, basis, now)
        return dict(seen, progress=progress, eta_seconds=eta, eta_basis=self.eta.basis if eta is not None else None)

    def _wait(self, build, step):
        """``build.wait(step)``, the one place a stop signal interrupts (then Interrupted); a signal that came while
        anything else ran is acted on here, once that finished."""
        if self.stop_signal is not None:
            raise Interrupted(SIGNAL_NAMES.get(self.stop_signal, "signal %d" % self.stop_signal))
        self._interruptible = True
        try:
            return build.wait(step)
        finally:
            self._interruptible = False

    def _open_log(self):
        try:
            return state.open_log(self.log_path)
        except state.StateError as exc:
            raise BuildError("cannot open the build log: %s" % exc)
