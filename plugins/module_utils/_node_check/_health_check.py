# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node-local health check: the readiness checks of the controller, on the node, with no Ansible run.

Installed by the ``gpufleet.preflight.health_check`` role as one zip application (this file, the collectors and the
policy code it imports) plus a JSON config holding the policy the role rendered from the readiness option table.
It gathers the same facts (``_node_facts``), evaluates the same checks (``_policy``) and says the same messages.

Modes (``--mode``; default ``slurm`` when slurmd runs it, which sets ``SLURMD_NODENAME``, else ``check``):

- ``slurm``: as Slurm's HealthCheckProgram -- drains / resumes its own node by the rules of ``_slurm``;
- ``check``: from cron or a systemd timer -- Slurm too when the config enables it;
- ``npd``: a node-problem-detector custom plugin -- no Slurm, first line at most 80 characters.

Every mode writes the node_exporter textfile when the config names a directory, and exits 0 ready, 1 not ready,
2 unknown (facts that could not be gathered, a hung nvidia-smi, a config it cannot read, a previous run still
running, the deadline passed). One deadline bounds the whole run, one run at a time per node, and no child
outlives it (``_hc_runtime``). In ``npd`` mode stdout is the one line node-problem-detector keeps as the
condition's message (the details go to stderr), so the message changes only when the verdict does.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import io
import json
import os
import sys
import time

from ansible_collections.gpufleet.preflight.plugins.module_utils._node_check import _hc_runtime, _log_bundle, _prolog
from ansible_collections.gpufleet.preflight.plugins.module_utils._node_check import _remediate, _remediation
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _metrics
from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _node_facts
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _gpu_health_checks
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _policy
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _policy_validation
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _readiness_options
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _slurm
from ansible_collections.gpufleet.preflight.plugins.module_utils import _probe_cache
from ansible_collections.gpufleet.preflight.plugins.module_utils._run import find_executable, search_path

DEFAULT_CONFIG = "/etc/gpufleet-preflight/health_check.json"
MODES = ("slurm", "check", "npd") + _prolog.JOB_MODES
READY, NOT_READY, UNKNOWN = 0, 1, 2
NPD_LINE = 80
# Under slurmd the environment has no PATH: the usual places, then where Slurm and NVIDIA install.
SYSTEM_DIRS = ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin", "/opt/slurm/bin"]
CONFIG_KEYS = ("policy", "slurm", "metrics_dir", "metrics_file", "deadline_seconds", "bundle_dir", "remediation")
PROBE_CACHE_NAME = "health-check-probes.json"  # in the state dir, beside the lock: version probes by binary identity
SLURM_KEYS = ("enabled", "node_name", "reason_prefix", "state_dir", "slurm_conf", "resume")


def parse_args(argv, environ):
    """``(mode, config path, verbose, check mode)``; ValueError naming the argument. ``--check``: the remediation
    ladder says what it would do and does nothing."""
    mode = "slurm" if environ.get("SLURMD_NODENAME") else "check"
    config = environ.get("GPUFLEET_HEALTH_CHECK_CONFIG") or DEFAULT_CONFIG
    verbose = check_mode = False
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg in ("--mode", "--config") and not args:
            raise ValueError("%s needs a value" % arg)
        if arg == "--mode":
            mode = args.pop(0)
            if mode not in MODES:
                raise ValueError("--mode must be one of %s, got %r" % (", ".join(MODES), mode))
        elif arg == "--config":
            config = args.pop(0)
        elif arg in ("-v", "--verbose"):
            verbose = True
        elif arg == "--check":
            check_mode = True
        else:
            raise ValueError("unknown argument %r (usage: [--mode slurm|check|npd|prolog|epilog] [--config PATH] [-v] "
                             "[--check])" % arg)
    return mode, config, verbose, check_mode


def load_config(path):
    """The config the role installed, checked: dict(policy (complete), slurm, metrics_dir, metrics_file)."""
    try:
        with open(path) as handle:
            data = json.load(handle)
    except (IOError, OSError) as exc:
        raise ValueError("config %s: %s" % (path, exc.strerror or exc))
    except ValueError as exc:
        raise ValueError("config %s: not JSON: %s" % (path, exc))
    if not isinstance(data, dict):
        raise ValueError("config %s: must be a JSON object" % path)
    unknown = sorted(set(data) - set(CONFIG_KEYS))
    if unknown:
        raise ValueError("config %s: unknown keys %s" % (path, ", ".join(unknown)))
    policy = _readiness_options.defaults()
    given = data.get("policy") or {}
    unknown = sorted(set(given) - set(policy))
    if unknown:
        raise ValueError("config %s: policy: unknown options %s" % (path, ", ".join(unknown)))
    policy.update(given)
    slurm = dict(enabled=False, node_name=None, reason_prefix=_slurm.DEFAULT_PREFIX, state_dir=_slurm.DEFAULT_STATE_DIR,
                 slurm_conf=None, resume=True)
    unknown = sorted(set(data.get("slurm") or {}) - set(SLURM_KEYS))
    if unknown:
        raise ValueError("config %s: slurm: unknown keys %s" % (path, ", ".join(unknown)))
    slurm.update(data.get("slurm") or {})
    _slurm.validate_prefix(slurm["reason_prefix"])
    if slurm["node_name"] is not None:
        _slurm.validate_node_name(slurm["node_name"], "config %s: slurm: node_name" % path)
    if not isinstance(slurm["resume"], bool):
        raise ValueError("config %s: slurm: resume must be true or false" % path)
    deadline = data.get("deadline_seconds", _hc_runtime.DEFAULT_DEADLINE)
    try:
        _hc_runtime.check_fit(deadline, 0, False, False)
    except ValueError as exc:
        raise ValueError("config %s: %s" % (path, exc))
    remediation = _remediation.validate(data.get("remediation"), "config %s: remediation" % path)
    return dict(policy=policy, slurm=slurm, metrics_dir=data.get("metrics_dir"), deadline_seconds=deadline,
                bundle_dir=data.get("bundle_dir"), remediation=remediation,
                metrics_file=data.get("metrics_file") or _metrics.default_file("health_check"))


def node_options(policy):
    """node_facts' options for this policy, as the readiness action asks for them."""
    return _node_facts.validate_options(_policy.node_facts_args(policy), _node_facts.SUBSETS)


def exit_code(ready, checks):
    if ready:
        return READY
    statuses = set(check["status"] for check in checks)
    return NOT_READY if "failed" in statuses else UNKNOWN


def first_line(ready, checks, message, limit=NPD_LINE):
    """One line of at most ``limit`` characters: what node-problem-detector shows as the condition's message."""
    if ready:
        line = message
    else:
        failed = [c for c in checks if c["status"] in ("failed", "unknown")]
        # the word agrees with the exit code: "unknown" (2) when no check failed, only some could not tell
        verdict = "not ready" if exit_code(ready, checks) == NOT_READY else "unknown"
        line = "%s: %s" % (verdict, ", ".join(c["name"] for c in failed))
        if len(failed) == 1:
            one = failed[0]
            line += ": " + (_slurm.cause(one["message"]) if one["status"] == "unknown" else _slurm.short_message(one["message"]))
    line = _slurm.clean_text(line)
    return line if len(line) <= limit else line[:limit - 3] + "..."


def shown(check, verbose):
    """Whether a check gets its own line: failed and unknown ones always, and one skipped because its probe did not
    answer (a ready node still says which probe hung); every other one not ok when verbose."""
    if check["status"] in ("failed", "unknown"):
        return True
    if check["status"] == "skipped" and str(check.get("message", "")).startswith(_gpu_health_checks.NOT_COUNTED):
        return True
    return verbose and check["status"] != "ok"


def evaluate(config, run):
    """Gather and judge: dict(ready, checks, message, facts, duration_seconds, checked_at_epoch)."""
    started = time.monotonic()
    policy = _policy_validation.validate_policy(config["policy"], require_jmespath=False)
    facts = _node_facts.gather(node_options(policy), run)
    facts = dict((key[len("gpufleet_"):], value) for key, value in facts.items())
    checks = _policy.evaluate(facts, policy)
    ready, message = _policy.verdict(checks)
    return dict(ready=ready, checks=checks, message=message, facts=facts, checked_at_epoch=time.time(),
                duration_seconds=round(time.monotonic() - started, 3))


def slurm_runner(config, deadline):
    """``(run(argv) -> (rc, out, err), find(name))`` for the Slurm calls: each bounded by the run's time left."""
    environ = dict(os.environ)
    if config["slurm"].get("slurm_conf"):
        environ["SLURM_CONF"] = config["slurm"]["slurm_conf"]
    dirs = search_path(SYSTEM_DIRS)
    slurm_run = _hc_runtime.bounded_run(_SlurmClock(deadline))

    def run(argv):
        rc, out, err = slurm_run(argv, _hc_runtime.SLURM_CALL_SECONDS, env=environ)
        return (124 if rc is None else rc), out, err
    return run, lambda name: find_executable(name, dirs)


def act_in_slurm(config, verdict, node_name, deadline, at_start=False):
    """Drain or resume through ``_slurm``, each call bounded by the run's time left; none without time left.
    ``at_start``: slurmd runs us (mode slurm): a node it has not registered yet is drained too (``_slurm.registering``)."""
    slurm = config["slurm"]
    run, find = slurm_runner(config, deadline)
    if deadline.left() < 2:
        return dict(message="%s: Slurm not called: the run's %s s deadline leaves %.1f s" % (
            node_name, deadline.seconds, max(deadline.left(), 0)), error="no time left")
    failed = [c for c in verdict["checks"] if c["status"] in ("failed", "unknown")]
    return _slurm.apply(node_name, verdict["ready"], failed, run, find,
                        prefix=slurm["reason_prefix"], state_dir=slurm["state_dir"], resume=slurm["resume"],
                        limits=drain_limits(config["policy"]), at_start=at_start)


def drain_limits(policy):
    """The drain circuit breaker's limits from the policy (``_readiness_options``: drain_cap_*)."""
    return dict(max_nodes=policy.get("drain_cap_nodes"), percent=policy.get("drain_cap_percent"),
                window=policy.get("drain_cap_window"))


class _SlurmClock(object):
    """The deadline as the Slurm calls see it: their share is the time left to the end, not to the facts' end."""

    def __init__(self, deadline):
        self.deadline = deadline
        self.seconds = deadline.seconds

    def facts_left(self):
        return self.deadline.left()


def keep_bundle(directory, node, verdict):
    """The remediation ladder's first step: a log bundle kept on the node (``_log_bundle``); its message."""
    try:
        items = _log_bundle.contents(node, verdict["ready"], verdict["checks"], verdict.get("facts"),
                                     verdict["checked_at_epoch"])
        return _log_bundle.write(directory, node, items, when=verdict["checked_at_epoch"])["message"]
    except (IOError, OSError) as exc:
        return "not written: %s: %s" % (directory, exc)


def remediate(config, verdict, node, deadline, slurm_on, check_mode):
    """The remediation ladder (``_remediation`` decides, ``_remediate`` acts) within the run's time left."""
    slurm_run, find = slurm_runner(config, deadline)
    smi = find("nvidia-smi")
    ctx = dict(run=_hc_runtime.bounded_run(_SlurmClock(deadline)), slurm_run=slurm_run, find=find, smi=smi,
               slurm_on=slurm_on, check_mode=check_mode, log=_to_syslog)
    return _remediate.run_ladder(config["remediation"], verdict, node, ctx, config["slurm"]["state_dir"])


def _to_syslog(message):
    """The breaker's hold, an escalation and an unwritable metrics file in the system log too (slurmd keeps no output
    of a HealthCheckProgram)."""
    try:
        import syslog  # pylint: disable=import-outside-toplevel  # POSIX only, and only when there is something to say
        syslog.openlog("gpufleet-health-check")
        syslog.syslog(syslog.LOG_WARNING, _slurm.clean_text(message))
    except (ImportError, OSError):
        pass


def node_name(config, environ):
    return config["slurm"]["node_name"] or environ.get("SLURMD_NODENAME") or os.uname()[1].split(".")[0]


def _say(out):
    """Write one line now, safely from a signal handler (os.write on a real stream, no buffered reentry)."""
    def say(line):
        try:
            os.write(out.fileno(), (line + "\n").encode("utf-8", "replace"))
        except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
            out.write(line + "\n")
    return say


def main(argv=None, environ=None, out=None, err=None, as_program=None):
    """The program: returns the exit code (0 ready, 1 not ready, 2 unknown).

    ``as_program`` (default: when ``argv`` is None, as the zip's ``__main__`` calls it): lead a process group and
    install the deadline's alarm and the signal handlers -- never inside a caller's own process (a test)."""
    as_program = argv is None if as_program is None else as_program
    argv = sys.argv[1:] if argv is None else argv
    environ = os.environ if environ is None else environ
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    if "PATH" not in environ:
        os.environ["PATH"] = os.pathsep.join(SYSTEM_DIRS)  # slurmd gives none; the collectors look on PATH
    try:
        return _main(argv, environ, out, err, as_program)
    finally:
        _hc_runtime.stop_alarm()


def _main(argv, environ, out, err, as_program):
    problem = None
    job = "--mode" in argv and argv[argv.index("--mode") + 1:][:1] in (["prolog"], ["epilog"])
    try:
        mode, config_path, verbose, check_mode = parse_args(argv, environ)
        config = load_config(config_path)
        if job:  # Slurm's Prolog/Epilog: the fast subset within the job launch's budget (_prolog)
            config = _prolog.for_job(config)
        node = node_name(config, environ)
        slurm_on = mode == "slurm" or job or (mode == "check" and config["slurm"]["enabled"])
        deadline = _hc_runtime.Deadline(config["deadline_seconds"], slurm_on,
                                        reserve=_prolog.SLURM_RESERVE if job else _hc_runtime.SLURM_RESERVE_SECONDS)
        if as_program:
            _hc_runtime.become_group_leader()
        lock, busy = _hc_runtime.take_lock(_hc_runtime.lock_path(config["slurm"]["state_dir"], node))
        if lock is None:
            # Still running, or a lock that cannot be taken (a FIFO or symlink planted there, an unwritable state
            # dir): either way this run might act in Slurm beside another, so it does nothing and says why.
            problem = busy if "still running" in busy else "%s: the check did not run (two runs could act in Slurm at once)" % busy
        else:
            if as_program:
                _hc_runtime.install_stop(deadline, _say(out))
            probes = _probe_cache.CachedRun(_hc_runtime.bounded_run(deadline),
                                            os.path.join(config["slurm"]["state_dir"], PROBE_CACHE_NAME))
            verdict = evaluate(config, probes)
            probes.save()  # the run that holds the lock owns the cache file
    except ValueError as exc:
        problem = str(exc)
    if problem is not None:
        out.write("unknown: %s\n" % _slurm.clean_text(problem)[:NPD_LINE - 9])
        err.write("gpufleet-health-check: %s\n" % problem)
        return 0 if job else UNKNOWN  # a job-time run that could not check never stops the job (_prolog)
    code = exit_code(verdict["ready"], verdict["checks"])
    lines = [first_line(verdict["ready"], verdict["checks"], verdict["message"])]
    for check in verdict["checks"]:
        if shown(check, verbose):
            lines.append("%s %s: %s" % (check["status"], check["name"], check["message"]))
    if busy:
        lines.append("lock: not taken (%s); ran anyway" % busy)
    if slurm_on:
        outcome = act_in_slurm(config, verdict, node, deadline, at_start=mode == "slurm")
        lines.append("slurm: %s" % outcome["message"])
        verdict["drain_held_back"] = bool(outcome.get("held_back"))
        if outcome.get("held_back"):
            _to_syslog(outcome["message"])
        if job:
            code = _prolog.exit_code(outcome)
    if config.get("bundle_dir") and not verdict["ready"]:
        lines.append("bundle: %s" % keep_bundle(config["bundle_dir"], node, verdict))
    if config["remediation"]["enabled"] and not verdict["ready"] and not job:  # after the bundle: the state as found
        lines.extend(remediate(config, verdict, node, deadline, slurm_on, check_mode))
    if config["metrics_dir"]:
        problem = None
        try:
            _metrics.write_atomic(config["metrics_dir"], _metrics.render(verdict, "health_check"), config["metrics_file"])
        except (ValueError, IOError, OSError) as exc:
            problem = str(exc)
        if problem:   # the directory went away since install: said where a person looks, not only under -v
            lines.append("metrics: not written: %s" % problem)
            _to_syslog("metrics not written to %s: %s" % (config["metrics_dir"], problem))
    _hc_runtime.stop_alarm()
    if lock is not None:
        os.close(lock)
    lines.append("took %.2f s" % deadline.elapsed())
    if mode == "npd":
        # node-problem-detector keeps stdout as the condition's message: one line that changes only with the verdict.
        out.write(lines[0] + "\n")
        err.write("\n".join(lines[1:]) + "\n")
    else:
        out.write("\n".join(lines) + "\n")
    return code
