# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The guarded build: options checked, the job count planned, the build run attempt after attempt in its
confinement (``_confinement``, ``_build_watchdog``), its state kept on disk (``_build_state``), every
"what next" decided by the pure ``_build_engine``.

The seed's ``-j20`` build OOM-killed a whole 449 GiB container. Here an OOM kill (or a watchdog stop)
ends an attempt; the build resumes in the same build directory (ninja keeps what it finished) with half
the jobs.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import binascii
import os
import signal
import time

from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _build_engine as engine
from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _build_state as state
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._build_attempt import Attempt
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._build_engine import BuildError, Interrupted
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._build_methods import (
    METHODS,
    SIGNAL_NAMES,
    auto_order,
    choose,
    strategy_names,
)
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._build_options import check_options, check_size
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._build_plan import (
    default_reserve,
    measured_memory_per_thread,
    memory_from_facts,
    plan_from_facts,
)
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._build_process import (
    MARKER_VARIABLE,
    dead_runs_marker,
    kill_marked,
    marker_value,
    owner_alive,
    process_start_time,
)
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._admission_setup import (
    admission_of_file,
    admission_settings,
    compiles_of_build,
    node_peaks,
    refused_sources,
    source_seconds,
    with_admission,
)
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._admission_policy import learned_from_oom
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._compiler_cache import BuildCache
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._confinement import Unavailable, cgroup_name
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._timeline import EtaSmoother, Timeline, build_progress, overall_progress
from ansible_collections.gpufleet.preflight.plugins.module_utils._facts._cpus import collect_cpus
from ansible_collections.gpufleet.preflight.plugins.module_utils._facts._memory import collect_memory
from ansible_collections.gpufleet.preflight.plugins.module_utils._human import human

# the confinement registry lives in _build_methods (the 500-line rule); its names stay importable from here
__all__ = ["BuildError", "GuardedBuild", "Interrupted", "METHODS", "SIGNAL_NAMES", "auto_order", "choose",
           "strategy_names"]


def new_run_id():
    """A run's id: time, pid and random bits, unique per run on a node."""
    return "%s-%d-%s" % (time.strftime("%Y%m%dT%H%M%S"), os.getpid(), binascii.hexlify(os.urandom(4)).decode("ascii"))


# ---------------------------------------------------------------- the build

class GuardedBuild(object):
    """One guarded build. ``params``: the module's options, type-checked and with their defaults (the argument
    spec is their one home); ``run(argv, timeout) -> (rc, out, err)``; ``find(name, env) -> path or None``."""

    def __init__(self, params, run, find, base_env=None, check_mode=False, root="/"):
        self.params = params
        self.run_command = run
        self.find = find
        self.base_env = dict(os.environ if base_env is None else base_env)
        self.check_mode = check_mode
        self.root = root
        self.status = {}
        self.result = {}
        self.warnings = []
        self.confinement = None
        self.lock = None
        self.stop_signal = None     # the first SIGTERM/SIGINT/SIGHUP; later ones change nothing
        self._interruptible = False  # only a wait for the build may be interrupted by the signal itself
        self.run_id = params.get("run_id") or new_run_id()
        self.module_start_time = process_start_time(os.getpid()) or 0
        self.marker = marker_value(self.run_id, os.getpid(), self.module_start_time)
        self.steps_total, self.run_counted, self.eta = None, None, EtaSmoother()   # progress of the whole build
        self.source_seconds = {}

    # -- validation and planning, before anything runs
    def prepare(self):
        try:
            self._check_options()
        except ValueError as exc:
            raise BuildError(str(exc))
        params = self.params
        self.locate()
        self.source = os.path.abspath(params["source"] or self.chdir)
        self._plan()
        self.env = self.build_env()
        program = engine.command_executable(params["argv"], params["cmd"])
        if program is not None:
            resolved = self.find(program if "/" not in program or os.path.isabs(program)
                                 else os.path.join(self.chdir, program), self.env)
            if not resolved:
                raise BuildError("the build command %s was not found (PATH=%s); install it or fix argv/cmd"
                                 % (program, self.env.get("PATH", "")))
        self.strategy = params["confinement"]
        if params["confine"] is False:  # the deprecated switch: false meant no cgroup
            self.strategy = "none"

    def locate(self):
        """The build's directories and state files from the options (``state: present`` and ``stopped`` alike)."""
        params = self.params
        self.chdir = os.path.abspath(params["chdir"])
        self.build_dir = os.path.abspath(os.path.join(self.chdir, params["build_dir"]))
        self.name = params["name"] or os.path.basename(self.chdir.rstrip("/")) or "build"
        self.log_path = os.path.abspath(params["log_path"] or os.path.join(self.build_dir, state.LOG_NAME))
        self.status_path = os.path.abspath(params["status_path"] or os.path.join(self.build_dir, state.STATUS_NAME))
        self.stamp_path = os.path.join(self.build_dir, state.STAMP_NAME)

    def build_env(self):
        """The build's environment and CMake arguments: the one seam where what sizes, targets and launches the
        build is added (job counts, nvcc threads, CMAKE_ARGS, cache and launcher variables) and the run's marker."""
        params = self.params
        env = engine.build_environment(
            self.base_env, self.jobs, params["nvcc_threads"], params["cmake_args"], params["threads_variable"],
            params["cmake_policy_version_minimum"], params["ccache_dir"], params["cuda_arch_list"],
            params["environment"])
        env[MARKER_VARIABLE] = self.marker.split("=", 1)[1]  # every process of the build carries it
        with_admission(env, params.get("admission"), self.build_dir, self.source)   # before the cache's launcher
        # what the launchers read: refused sources before each attempt, what an OOM taught them after it, the sources'
        # known times for the ETA, the compiles the ledger holds - also of a launcher the caller put in (the role's)
        if params.get("admission") is not None and params.get("admission_config"):
            raise BuildError("admission and admission_config: give the settings of one launcher, not two")
        try:
            self.admission = admission_of_file(params["admission_config"]) if params.get("admission_config") else (
                None if params.get("admission") is None else admission_settings(params["admission"], self.build_dir, self.source))
        except ValueError as exc:
            raise BuildError(str(exc))
        self._compiler_cache(env)
        return env

    def _compiler_cache(self, env):
        """ccache in depend mode or sccache, in ``env`` and its CMAKE_ARGS (_compiler_cache; issue 22)."""
        common = os.path.commonpath([self.source, self.build_dir])
        self.cache = BuildCache(self.params, common if common != "/" else self.source, self.build_dir,
                                self.run_command, self.find)
        failure = None
        try:
            self.cache.prepare(env, check_size("compiler_cache_max_size", self.params["compiler_cache_max_size"]))
        except ValueError as exc:
            failure = str(exc)
        if failure:
            raise BuildError(failure)
        self.warnings.extend(self.cache.warnings)

    def _check_options(self):
        checked = check_options(self.params)
        self.command, self.per_thread = checked["command"], checked["per_thread"]
        self.limit, self.reserve = checked["limit"], checked["reserve"]
        self.nvcc_threads = self.params["nvcc_threads"]
        self.per_job_bytes = self.nvcc_threads * self.per_thread

    def _plan(self):
        params = self.params
        jobs, limit = params["jobs"], self.limit
        self.plan = None
        memory = params["memory_facts"]
        if memory is None:
            memory = collect_memory(root=self.root)
        try:
            total = memory_from_facts(memory)[1]
        except ValueError as exc:
            if params["memory_facts"] is not None:
                raise BuildError("memory_facts: %s" % exc)
            total = None  # this node's own facts lack a figure: plan only where jobs or memory_limit need it
        if jobs is None or limit is None:
            cpus = params["cpus"] or collect_cpus(root=self.root)["usable"]
            try:
                self.plan = plan_from_facts(memory, cpus, memory_per_thread=self.per_thread,
                                            nvcc_threads=self.nvcc_threads, reserve=self.reserve,
                                            min_jobs=params["min_jobs"], max_jobs=params["max_jobs"])
            except ValueError as exc:
                raise BuildError("memory_facts/cpus: %s" % exc)
        if limit is None:
            if not self.plan["fits"]:
                raise BuildError("the memory budget is below one job: %s" % self.plan["reason"], {"plan": self.plan})
            limit = self.plan["budget_bytes"]
        elif total and limit > total:
            raise BuildError("memory_limit %s is above the node's memory (%s): a cgroup that large would not stop the "
                             "build before the node runs out; give at most %s, or omit it to plan" % (
                                 human(limit), human(total), human(total)))
        if limit < self.per_job_bytes:
            raise BuildError("memory_limit %s is below one job: %d nvcc thread%s x %s memory_per_thread = %s; "
                             "raise memory_limit or lower nvcc_threads / memory_per_thread" % (
                                 human(limit), self.nvcc_threads, "" if self.nvcc_threads == 1 else "s",
                                 human(self.per_thread), human(self.per_job_bytes)))
        self.limit_bytes = limit
        self.jobs = jobs if jobs is not None else self.plan["jobs"]
        # the watchdog's floor: the memory the planner keeps free
        self.floor_bytes = self.reserve if self.reserve is not None else (
            self.plan["reserve_bytes"] if self.plan else default_reserve(total or limit))

    def fingerprint(self):
        ignore = set(self.params["source_ignore"])
        for path in (self.build_dir, self.log_path, self.status_path):
            if path.startswith(self.source.rstrip("/") + "/"):
                ignore.add(os.path.relpath(path, self.source))
        try:
            self.revision = state.source_revision(self.source, self.run_command, self.find("git", self.env), ignore)
        except state.StateError as exc:
            raise BuildError(str(exc))
        self.toolchain = state.toolchain_identity(self.env, self.run_command, self.find)
        self.variables = engine.set_variables(self.env, self.base_env)
        return state.configuration_fingerprint(self.command, self.chdir, self.build_dir, self.variables,
                                               self.revision, self.toolchain, engine.JOB_VARIABLES + (MARKER_VARIABLE,))

    def shown_env(self):
        secret = set(str(key) for key in self.params["environment"]) | set(self.cache.SECRET_NAMES)
        variables = engine.set_variables(self.env, self.base_env)
        variables.pop(MARKER_VARIABLE, None)
        return engine.shown_variables(variables, secret)

    def base_result(self):
        return {
            "command": self.command, "chdir": self.chdir, "build_dir": self.build_dir, "jobs": self.jobs,
            "nvcc_threads": self.nvcc_threads, "memory_limit_bytes": self.limit_bytes,
            "memory_limit_human": human(self.limit_bytes), "plan": self.plan, "env": self.shown_env(),
            "log": self.log_path, "status": self.status_path, "stamp": self.stamp_path, "run_id": self.run_id,
            "status_path": self.status_path, "stamp_path": self.stamp_path,
            "source_revision": self.revision, "toolchain": self.toolchain, "cgroup": None,
            "confinement": {"requested": self.strategy}, "compiler_cache": self.cache.plan(),
        }

    # -- status file
    def write_status(self, **changes):
        self.status.update(changes)
        if getattr(self, "timeline", None) is not None:  # every write carries the timeline (an attempt's closing peak)
            self.status["timeline"] = self.timeline.to_list()
        self.status["updated_at"] = time.time()
        try:
            state.write_json_atomic(self.status_path, self.status)
        except state.StateError as exc:
            if changes.get("state") in ("failed", "succeeded", "stopped"):
                # a status left at "running" would lie: better none than a stale one
                try:
                    os.unlink(self.status_path)
                except OSError:
                    pass
            if "status file" not in " ".join(self.warnings):
                self.warnings.append("could not write the status file: %s" % exc)

    # -- the whole run
    def execute(self):
        self.prepare()
        digest, config = self.fingerprint()
        result = self.result
        result.update(self.base_result())
        result["fingerprint"] = digest
        stamp = None
        if os.path.isdir(self.build_dir):
            stamp, problem = state.read_json_object(self.stamp_path, "stamp")
            if problem:
                self.warnings.append(problem + " (the build runs)")
        up_to_date = bool(stamp and stamp.get("fingerprint") == digest
                          and state.artifacts_present(self.chdir, self.params["artifacts"])) and not self.params["force"]
        result["up_to_date"] = up_to_date
        if up_to_date:
            result.update(changed=False, attempts=[], final_jobs=stamp.get("final_jobs"),
                          artifacts=state.find_artifacts(self.chdir, self.params["artifacts"]),
                          peak_memory_bytes=stamp.get("peak_memory_bytes"),
                          peak_memory_human=human(stamp.get("peak_memory_bytes")),
                          duration=0.0, msg="up to date (stamp %s matches)" % self.stamp_path)
            return result
        if self.check_mode:
            result.update(changed=True, attempts=[], msg="would run %s in %s with jobs=%d under a %s memory limit"
                          % (" ".join(self.command), self.chdir, self.jobs, human(self.limit_bytes)))
            return result
        self._take_lock()
        previous_handlers = self._trap_signals()
        try:
            self._start_status()
            try:
                self.confinement, skipped = choose(
                    self.strategy, cgroup_name(self.name, self.build_dir), self.limit_bytes, self.floor_bytes,
                    lambda name: self.find(name, {"PATH": self.base_env.get("PATH", os.defpath) + ":/usr/bin:/bin"}),
                    self.run_command, self.root)
            except Unavailable as exc:
                self.write_status(state="failed", message=str(exc))
                raise BuildError(str(exc))
            result["confinement"] = dict(self.confinement.describe(), requested=self.strategy, skipped=skipped,
                                         notes=self.confinement.notes)
            result["cgroup"] = result["confinement"]["cgroup"]
            return self._attempts(result, digest, config)
        finally:
            # once stopping, the rest of a burst stays ignored to the end: the default action restored here would let
            # the next SIGTERM kill the module before it releases the lock and reports "stopped"
            self._restore_signals(previous_handlers if self.stop_signal is None
                                  else dict.fromkeys(previous_handlers, signal.SIG_IGN))
            self.lock.release()

    def _take_lock(self):
        """The build's identity: the lock in the registry (module pid and start time, run id), refused naming its
        holder while that one lives."""
        try:
            for option, path in (("build_dir", self.build_dir), ("log_path", os.path.dirname(self.log_path)),
                                 ("status_path", os.path.dirname(self.status_path))):
                state.make_directory(path, option)
                state.check_directory(path, option)
            self.lock = state.BuildLock(self.build_dir).acquire({
                "module_pid": os.getpid(), "module_start_time": self.module_start_time, "run_id": self.run_id,
                "status_path": self.status_path, "name": self.name})
        except state.StateError as exc:
            raise BuildError(str(exc), exc.details)
        # a live owner this lock does not show still names itself in the status: refused too, never built beside
        previous, dummy = state.read_json_object(self.status_path, "status file")
        refusal = state.live_other_status(previous, owner_alive, os.getpid(), self.build_dir, self.status_path)
        if refusal:
            self.lock.release()
            raise BuildError(refusal)

    def _start_status(self):
        """First thing under the lock, before anything slow: the status names this run, so a watcher never reads
        the previous run's as its own. A previous run's status still saying "running" is abandoned: its leftovers
        (processes carrying its marker) are ended."""
        previous, problem = state.read_json_object(self.status_path, "status file")
        if problem:
            self.warnings.append(problem + " (replaced by this run's)")
        self.started = time.time()
        # the steps of the whole build: a resume of a run that did not finish counts on from its total
        carried = (previous or {}).get("steps_total") if isinstance(previous, dict) else None
        self.steps_total = carried if isinstance(carried, int) and not isinstance(carried, bool) and carried > 0 \
            and previous.get("state") != "succeeded" else None
        self.run_counted, self.eta = None, EtaSmoother()
        self.status = {"state": "starting", "name": self.name, "log": self.log_path, "build_dir": self.build_dir,
                       "run_id": self.run_id, "module_pid": os.getpid(), "module_start_time": self.module_start_time,
                       "build_marker": self.marker, "max_attempts": self.params["max_attempts"],
                       "memory_limit_bytes": self.limit_bytes, "memory_limit_human": human(self.limit_bytes),
                       "started_at": self.started, "attempts": [], "confinement": None}
        self.write_status()
        stale = state.stale_status(previous, owner_alive)
        if stale:
            self.result["stale_status"] = stale
            if dead_runs_marker(previous.get("build_marker")):
                kill_marked(previous["build_marker"])

    def _trap_signals(self):
        def stop(signum, frame):
            if self.stop_signal is not None:
                return  # a burst: the first one is being acted on, to the end
            self.stop_signal = signum
            if self._interruptible:
                raise Interrupted(SIGNAL_NAMES.get(signum, "signal %d" % signum))
        previous = {}
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            previous[signum] = signal.signal(signum, stop)
        return previous

    @staticmethod
    def _restore_signals(previous):
        for signum, handler in previous.items():
            signal.signal(signum, handler)

    # -- one attempt: an ``Attempt`` (_build_attempt) given what it needs; its outcome read back here
    def run_attempt(self, attempt, jobs, deadline):
        self.env["CMAKE_BUILD_PARALLEL_LEVEL"] = self.env["MAX_JOBS"] = str(jobs)
        outcome = Attempt(
            attempt, jobs, deadline, self.command, self.cache.command(self.command), self.chdir, self.env, self.marker,
            self.confinement, self.log_path, self.build_dir, self.limit_bytes, self.source_seconds,
            self.params["status_interval"], self.root, wait=self._wait, observe=self.timeline.observe,
            report=self._report_running, warn=self.warnings.append).run()
        # the timeline's line reaches the attempt's peak; a short attempt's steps count too
        self.timeline.close_attempt(time.time() - self.started, jobs, attempt, outcome["peak_memory_bytes"])
        self.steps_total = overall_progress(outcome["progress"], self.steps_total)[1]
        return outcome

    def _report_running(self, attempt, jobs, pgid, seen, usage, now):
        """The status of a running attempt, every ``status_interval``."""
        seen, self.steps_total, self.run_counted = build_progress(seen, now, self.steps_total, self.run_counted, self.eta)
        # a rise of the cgroup's peak counter since the last sample: reached in this interval
        self.timeline.add(now - self.started, usage, jobs, attempt, peak=self.confinement.counters()[1])
        self.write_status(state="running", attempt=attempt, jobs=jobs, build_pgid=pgid,
                          progress=seen["progress"], step=seen["step"], steps_total=self.steps_total,
                          eta_seconds=seen["eta_seconds"], eta_basis=seen["eta_basis"],
                          compiles=compiles_of_build(self.admission, pgid), timeline=self.timeline.to_list(),
                          memory_bytes=usage, memory_human=human(usage), elapsed_seconds=round(now - self.started, 1))

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

    def _attempts(self, result, digest, config):
        params = self.params
        deadline = self.started + params["timeout"] if params["timeout"] else None
        attempts = []
        result["attempts"] = attempts
        jobs = self.jobs
        self.status.update(attempts=attempts, confinement=self.confinement.name)
        self.timeline = Timeline()  # memory and jobs over time, bounded (issue 14)
        self.cache.begin()
        failure = None
        try:
            for attempt in range(1, params["max_attempts"] + 1):
                if self.stop_signal is not None:
                    failure = "stopped"
                    break
                failure = refused_sources(self.admission, self.limit_bytes)   # known before it runs: not run
                if failure:
                    break
                self.write_status(state="running", attempt=attempt, jobs=jobs)
                before = node_peaks(self.admission)
                self.source_seconds = source_seconds(self.admission)   # the ETA's weights while no .ninja_log has any
                try:
                    outcome = self.run_attempt(attempt, jobs, deadline)
                except Interrupted as exc:  # between two attempts
                    failure = "the build was interrupted (%s)" % exc
                    break
                attempts.append(outcome)
                if self.admission:   # the sources the launchers learned a larger need of from this attempt's OOM
                    outcome["admission_learned"] = learned_from_oom(before, node_peaks(self.admission))
                step = outcome["failed_steps"][-1] if outcome["failed_steps"] else None
                action, jobs, message = engine.decide_next(
                    outcome["kind"], attempt, params["max_attempts"], jobs, why=outcome["why"], failed_step=step,
                    timeout=params["timeout"], budget_bytes=self.limit_bytes, nvcc_threads=self.nvcc_threads,
                    learned=outcome.get("admission_learned"))
                if action == engine.DONE:
                    break
                if action == engine.FAIL:
                    failure = message
                    break
                self.write_status(state="oom-backoff", jobs=jobs, message=message)
        except BuildError as exc:
            failure = str(exc)
        if self.stop_signal is not None and failure is not None:
            name = SIGNAL_NAMES.get(self.stop_signal, "signal %d" % self.stop_signal)
            failure = ("stopped by %s: the build and everything it started were ended, its cgroup removed and its "
                       "lock released; a rerun resumes where it stopped" % name)
            result["stopped"] = True
        return self._finish(result, attempts, jobs, failure, digest, config)

    def _finish(self, result, attempts, jobs, failure, digest, config):
        duration = round(time.time() - self.started, 2)
        result["compiler_cache"] = self.status["compiler_cache"] = self.cache.finish()
        if attempts:  # a scope per attempt: the result names the last one that ran
            result["confinement"].update(self.confinement.describe())
            result["cgroup"] = result["confinement"]["cgroup"]
        peaks = [a["peak_memory_bytes"] for a in attempts if a.get("peak_memory_bytes")]
        peak = max(peaks) if peaks else None
        result.update(
            final_jobs=attempts[-1]["jobs"] if attempts else jobs, peak_memory_bytes=peak,
            peak_memory_human=human(peak), duration=duration,
            artifacts=state.find_artifacts(self.chdir, self.params["artifacts"]),
            oom_kills=sum(a.get("oom_kills") or 0 for a in attempts), env=self.shown_env())
        if failure is None:
            result.update(changed=True, msg="built in %d attempt%s, final jobs=%d" % (
                len(attempts), "" if len(attempts) == 1 else "s", result["final_jobs"]))
            self.write_status(state="succeeded", message=result["msg"], eta_seconds=0.0,
                              progress=overall_progress(attempts[-1]["progress"], self.steps_total)[0],
                              peak_memory_bytes=peak, duration=duration)
            try:
                state.write_json_atomic(self.stamp_path, {
                    "fingerprint": digest, "config": config, "final_jobs": result["final_jobs"],
                    "peak_memory_bytes": peak, "finished_at": time.time(), "artifacts": result["artifacts"],
                    # what one nvcc thread took here: the next plan on this node starts from it (build_jobs)
                    "measured": {"memory_per_thread_bytes": measured_memory_per_thread(attempts, self.nvcc_threads),
                                 "nvcc_threads": self.nvcc_threads, "jobs": result["final_jobs"]}})
            except state.StateError as exc:
                self.warnings.append("built, but the stamp could not be written (the next run builds again): %s" % exc)
            return result
        log_text = state.read_log_tail(self.log_path, 1 << 20)
        result.update(changed=bool(attempts), log_tail=engine.tail_lines(log_text, self.params["tail_lines"]),
                      failed_steps=attempts[-1]["failed_steps"] if attempts else [])
        self.write_status(state="stopped" if result.get("stopped") else "failed", message=failure,
                          peak_memory_bytes=peak, duration=duration)
        raise BuildError(failure, result)
