# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of gpufleet.preflight.readiness: one node_facts round trip, the verdict here."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import difflib
import time

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.utils.display import Display
from ansible_collections.gpufleet.preflight.plugins.plugin_utils._action import ControllerAction
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _checks
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _policy
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _policy_validation
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _readiness_options
from ansible_collections.gpufleet.preflight.plugins.module_utils._values import first_non_finite
from ansible_collections.gpufleet.preflight.plugins.plugin_utils._report import node_failures

try:
    from ansible.errors import AnsibleValueOmittedError
    OMITTED = (AnsibleValueOmittedError,)
except ImportError:   # ansible-core < 2.19: "{{ omit }}" templates to the task vars' omit placeholder instead
    OMITTED = ()

NODE_FACTS = "gpufleet.preflight.node_facts"

# Declared once, in module_utils/_readiness/_readiness_options.py (the docs and the role follow from the same table),
# with the task's own options that are not policy (variable_prefix, ready_group).
ARGUMENT_SPEC = _readiness_options.argument_spec()
TASK_SPEC = _readiness_options.TASK_SPEC


def options_from_variables(task_args, task_vars, prefix, template):
    """The task's options, each one it leaves out taken from the variable ``<prefix><option>`` where that is set
    and not null, and the names taken so. The preflight role passes its 57 ``preflight_*`` variables this way: as
    task arguments they were 57 Jinja templates compiled in every host's worker (ansible-core keeps no compiled
    templates), 0.1 CPU-s a host."""
    args = dict(task_args)
    taken = []
    for name in ARGUMENT_SPEC:
        if name in args or prefix + name not in task_vars:
            continue
        try:
            value = template(task_vars[prefix + name])
        except OMITTED:   # "{{ omit }}": unset, as for a task argument
            continue
        if value is not None and value != task_vars.get("omit"):
            args[name] = value
            taken.append(name)
    return args, taken


# Every name a prefixed variable may have: the options, the role-only variables of the table, the role's own.
KNOWN_NAMES = frozenset(_readiness_options.BY_NAME) | frozenset(_readiness_options.ROLE_VARIABLES)


def unknown_variables(task_vars, prefix):
    """The variables named ``<prefix><name>`` whose name is no option, each with the nearest option's variable (or
    None): ``[(variable, nearest)]``, sorted. A misspelt ``preflight_min_avaliable_memory`` was ignored silently,
    the default in force (issue 39)."""
    strays = []
    for variable in task_vars:
        if not isinstance(variable, str) or not variable.startswith(prefix) or variable[len(prefix):] in KNOWN_NAMES:
            continue
        nearest = difflib.get_close_matches(variable[len(prefix):], sorted(KNOWN_NAMES), n=1, cutoff=0.6)
        strays.append((variable, prefix + nearest[0] if nearest else None))
    return sorted(strays)


def unknown_variables_message(strays, prefix, fail=False):
    """One sentence for the variables ``unknown_variables`` found: each with the nearest option, and the setting that
    makes it fail (or quiet)."""
    named = ", ".join("%s%s" % (variable, " (did you mean %s?)" % nearest if nearest else "")
                      for variable, nearest in strays)
    verb = "are no %s* options" if len(strays) > 1 else "is no %s* option"
    if fail:
        return "%s %s (%sunknown_variables=fail): correct or remove %s" % (
            named, verb % prefix, prefix, "them" if len(strays) > 1 else "it")
    return "%s %s: ignored, the default%s in force (%sunknown_variables=fail stops the run on this, =ignore is quiet)" % (
        named, verb % prefix, "s stay" if len(strays) > 1 else " stays", prefix)


def named_as_given(message, prefix, taken):
    """A refusal that starts with an option's name, naming the variable it came from instead (``<prefix><option>``)."""
    name = message.split(":", 1)[0].split("[", 1)[0].split(" ", 1)[0]
    return prefix + message if name in taken else message


def validated_options(args, prefix, taken):
    """``args`` checked against the argument spec, with defaults filled in, and its refusals ([] when every value is
    valid), an option taken from a variable named as that variable. One line each, not the whole spec that
    ansible-core's own validation failure prints."""
    spec = dict(ARGUMENT_SPEC, **TASK_SPEC)
    as_given = dict((prefix + name if name in taken else name, name) for name in spec)
    checked = ArgumentSpecValidator(dict((given, spec[name]) for given, name in as_given.items())).validate(
        dict((prefix + name if name in taken else name, value) for name, value in args.items()))
    options = dict((as_given.get(given, given), value) for given, value in checked.validated_parameters.items())
    return options, checked.error_messages


def non_finite_option(task_args):
    """The first option given NaN or infinity, which ansible-core's int conversion would raise on (OverflowError)."""
    return first_non_finite(task_args)


def node_failure_message(gathered):
    """What the node said when node_facts failed: its own msg, plus the last line of its stderr or exception
    (where a crash names its cause) and the exit code -- never a bare "node_facts failed"."""
    parts = []
    msg = str(gathered.get("msg") or "").strip()
    if msg:
        parts.append(msg)
    for key in ("module_stderr", "exception", "module_stdout"):
        lines = [line.strip() for line in str(gathered.get(key) or "").splitlines() if line.strip()]
        if lines and lines[-1] not in msg:
            parts.append("%s: %s" % (key, lines[-1]))
            break
    if gathered.get("rc") not in (None, 0):
        parts.append("rc=%s" % gathered["rc"])
    return "%s on the node failed: %s" % (NODE_FACTS, "; ".join(parts) or "it returned no message")


def unknown_check(why):
    """The one check of a node whose node_facts could not run: its verdict is unknown, and says why."""
    return _checks.unknown("readiness", "node_facts runs on the node",
                           "the check could not run on this node (%s)" % why)


# Longest text one group of failed checks keeps on the console; the checks in the result keep every word. Every
# sentence this collection writes fits (the longest, a recent OOM kill's with its cgroup path, is about 400
# characters): 300 cut the fix off the end of such a message, in a failure message said to list every failed check
# (issue 39). What is longer is node-made text (GPU names, kernel lines), cut saying so and where the rest is.
CONSOLE_MESSAGE_CHARS = 1000


def console_message(checks):
    """The verdict as the console shows it: checks failing for one cause said once, under all their names (a missing
    nvidia-smi fails six GPU checks with one sentence), each cause cut at CONSOLE_MESSAGE_CHARS (issue 27 item 4),
    saying so."""
    if not any(check.get("status") in ("failed", "unknown") for check in checks):
        return None
    parts = []
    for names, message in node_failures(dict(status="not_ready", checks=checks)):
        if len(message) > CONSOLE_MESSAGE_CHARS:
            message = "%s... [cut: %d characters in all; the reports and -v have the whole text]" % (
                message[:CONSOLE_MESSAGE_CHARS].rstrip(), len(message))
        parts.append("%s: %s" % (", ".join(names), message))
    return "not ready: " + "; ".join(parts)


# What a failed verdict keeps at the default verbosity: its short message and the names of the failed checks, not
# kilobytes of facts, policy and the same messages again (issues 20 item 3, 27 item 4). With -v (or
# fail_when_not_ready=false) the result is complete.
LEAN_KEYS = ("ready", "failed_checks", "profiles", "waited_seconds", "attempts", "checked_at", "msg", "warnings",
             "failed", "changed")


def lean_failure(result):
    """A failed verdict without facts, policy and per-check messages (msg says each cause once)."""
    return dict((key, result[key]) for key in LEAN_KEYS if key in result)


# What a node's result carries by default (issue 27 item 5): the facts the fleet reports, the Slurm and metrics
# publishers read, and the verdict fact without the checks and policy the result holds already. Ansible copies every
# result from its worker to the controller and templates it into the report: 37 KB per node with every fact, 9 KB so.
# full_facts returns them all.
DOWNSTREAM_FACTS = ("gpufleet_memory", "gpufleet_build_processes")
VERDICT_FACT_DROPS = ("checks", "policy")


def returned_facts(gathered_facts, readiness, full_facts):
    """The ansible_facts of a readiness result: every gathered fact and the whole verdict when full_facts, else the
    facts something downstream reads and the verdict without its checks and policy."""
    if full_facts:
        facts = dict(gathered_facts)
        facts["gpufleet_readiness"] = readiness
        return facts
    facts = dict((name, value) for name, value in gathered_facts.items() if name in DOWNSTREAM_FACTS)
    facts["gpufleet_readiness"] = dict((key, value) for key, value in readiness.items() if key not in VERDICT_FACT_DROPS)
    return facts


class ActionModule(ControllerAction):
    _requires_connection = True

    def act(self, result, task_vars):
        prefix = self._task.args.get("variable_prefix") or ""
        given, taken = options_from_variables(self._task.args, task_vars or {}, prefix, self._templar.template) \
            if prefix else (dict(self._task.args), [])
        bad = non_finite_option(given)
        if bad:
            raise AnsibleActionFail(named_as_given("%s: must be a finite number, got %s" % bad, prefix, taken))
        args, errors = validated_options(given, prefix, taken)
        if errors:
            raise AnsibleActionFail("%s: %s" % ("the options are not valid" if not taken else
                                                "the options (from the %s* variables) are not valid" % prefix,
                                                "; ".join(errors)))
        ready_group = args.pop("ready_group")
        args.pop("variable_prefix")
        on_unknown = args.pop("unknown_variables")
        strays = unknown_variables(task_vars or {}, prefix) if prefix and on_unknown != "ignore" else []
        if strays and on_unknown == "fail":
            raise AnsibleActionFail(unknown_variables_message(strays, prefix, fail=True))
        if strays:
            result.setdefault("warnings", []).append(unknown_variables_message(strays, prefix))
        problem = None
        try:
            policy = _policy_validation.validate_policy(args)
        except ValueError as exc:
            problem = named_as_given(str(exc), prefix, taken)
        if problem is not None:
            # raised outside the except block: the refusal names the option, no chained traceback
            raise AnsibleActionFail(problem)

        node_args = _policy.node_facts_args(policy)
        if not node_args["toolchain_python"]:
            del node_args["toolchain_python"]   # unset: the module's own default (the Python that runs it)

        started = time.monotonic()
        deadline = started + policy["wait"]
        attempts = 0
        while True:
            attempts += 1
            gathered = self._execute_module(module_name=NODE_FACTS, module_args=node_args, task_vars=task_vars)
            if gathered.get("unreachable"):
                return gathered
            if gathered.get("failed"):
                gathered["msg"] = node_failure_message(gathered)
                if args["fail_when_not_ready"]:
                    return gathered
                # The role decides after the fleet report: a node whose check could not run (a wrong
                # ansible_python_interpreter) is a verdict of its own, unknown, not a failed task that ends the play
                # before any report is written (issue 39).
                checks = [unknown_check(gathered["msg"])]
                ready, message = _policy.verdict(checks)
                break
            facts = dict((key[len("gpufleet_"):], value) for key, value in (gathered.get("ansible_facts") or {}).items())
            checks = _policy.evaluate(facts, policy)
            ready, message = _policy.verdict(checks)
            remaining = deadline - time.monotonic()
            if ready or remaining <= 0:
                break
            time.sleep(min(policy["interval"] or 1, remaining))

        waited = round(time.monotonic() - started, 1)
        waiting = ""
        if policy["wait"] and ready:
            waiting = " (ready after waiting %d s, %d check%s of the node)" % (int(waited), attempts, "" if attempts == 1 else "s")
        elif policy["wait"] and not gathered.get("failed"):
            waiting = " (still not ready after waiting %g s: %d checks of the node over %.1f s)" % (policy["wait"], attempts, waited)
        # message: every failed check in full (reports, set_stats); msg: the console's short form of it.
        short = (console_message(checks) or message) + waiting
        message += waiting
        readiness = dict(
            ready=ready,
            message=message,
            checks=checks,
            failed_checks=[c["name"] for c in checks if c["status"] in ("failed", "unknown")],
            profiles=args["profiles"],
            subsets=node_args["gather_subset"],
            waited_seconds=waited,
            attempts=attempts,
            checked_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            policy=args,
        )
        ansible_facts = returned_facts(gathered.get("ansible_facts") or {}, readiness, args["full_facts"])
        result.update(readiness)
        result.update(changed=False, ansible_facts=ansible_facts, msg=short)
        if ready and ready_group:
            # Joined from the result, as group_by does (ansible-core adds the host to a result's add_group): no task,
            # and no worker per host, of its own.
            result["add_group"] = ready_group
        if not ready and args["fail_when_not_ready"]:
            result["failed"] = True
            if Display().verbosity < 1:
                return lean_failure(result)
        return result
