# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Readiness policy on the controller: validate it, pick the subsets it needs, judge the facts.

Everything here is pure: facts in, checks out. The action plugin does the one round trip.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import os
import re

from ansible_collections.gpufleet.preflight.plugins.module_utils._human import human, parse_size_option
from ansible_collections.gpufleet.preflight.plugins.module_utils._process_match import compile_patterns
from ansible_collections.gpufleet.preflight.plugins.module_utils import _readiness_options
from ansible_collections.gpufleet.preflight.plugins.module_utils._checks import printable, result, skipped, unknown
from ansible_collections.gpufleet.preflight.plugins.module_utils._constants import SUBSETS as NODE_SUBSETS


def load_jmespath():
    """``(jmespath module, None)``, or ``(None, why)`` where the library is absent.

    Imported only when a policy has custom checks: the node-local health check runs on plain Python (stdlib only)
    and reports custom checks as not applied there instead of failing.
    """
    try:
        import jmespath  # pylint: disable=import-outside-toplevel
    except ImportError as exc:
        return None, "the jmespath Python library is not installed (%s): pip install jmespath" % exc
    return jmespath, None

PROFILES = ("build", "gpu")
COMMON_SUBSETS = ("memory", "build_processes")
PROFILE_SUBSETS = {
    "build": ("toolchain", "disks", "kernel_events"),
    "gpu": ("gpus", "kernel_events"),
}
CUSTOM_CHECK_KEYS = ("name", "query", "equals", "max", "min", "message")

_VERSION = re.compile(r"[0-9]+(\.[0-9]+){0,3}\Z")
_COMPUTE_CAPABILITY = re.compile(r"[0-9]+\.[0-9]+\Z")
_ARCH = re.compile(r"(sm|compute)_[0-9]+[af]?\Z")
# Bounded waits: a day is longer than any node takes to settle; 1e99 s would hold the play for ever.
MAX_WAIT_SECONDS = 86400


def parse_option_size(option, value):
    """A size option in bytes (``_human.parse_size_option``: binary units or a byte count), also refusing NaN/inf."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("%s: %r is not a size" % (option, value))
    return parse_size_option(option, value)


# ---------------------------------------------------------------- validation


def parse_memory_requirement(value):
    """``'64GiB'`` -> ``('absolute', bytes)``; ``'0.8'`` or ``0.8`` -> ``('fraction', 0.8)``.

    A bare number at most 1 is a fraction of the effective total; anything else must be a size.
    """
    text = str(value).strip()
    try:
        number = float(text)
    except ValueError:
        number = None
    if number is not None and (0 < number <= 1):
        return ("fraction", number)
    if number is not None and (number < 0 or "." in text):
        raise ValueError(
            "min_available_memory: %r is neither a size like 64GiB nor a fraction of the effective total in (0, 1]" % (value,))
    return ("absolute", parse_option_size("min_available_memory", value))


def compile_custom_check(index, spec, require_jmespath=True):
    """Validate one JMESPath check; returns it with the compiled expression under ``compiled``.

    Without the jmespath library: a ValueError when ``require_jmespath`` (the controller), else the check is kept
    with ``compiled`` None and ``not_applied`` saying why (the node-local health check reports it as not applied).
    """
    where = "custom_checks[%d]" % index
    if not isinstance(spec, dict):
        raise ValueError("%s: must be a dict with name, query and one of equals/max/min, got %r" % (where, spec))
    extra = sorted(str(key) for key in set(spec) - set(CUSTOM_CHECK_KEYS))
    if extra:
        raise ValueError("%s: unknown key%s %s; allowed: %s" % (where, "s" if len(extra) > 1 else "", ", ".join(extra), ", ".join(CUSTOM_CHECK_KEYS)))
    if not spec.get("name") or not spec.get("query"):
        raise ValueError("%s: needs a name and a query" % where)
    if not isinstance(spec["name"], str) or not spec["name"].strip():
        raise ValueError("%s: name must be a non-empty string, got %r" % (where, spec["name"]))
    if not isinstance(spec["query"], str):
        raise ValueError("%s (%s): query must be a JMESPath expression as a string (quote it in YAML), got %r (%s)"
                         % (where, spec["name"], spec["query"], type(spec["query"]).__name__))
    if spec.get("message") is not None and not isinstance(spec["message"], str):
        raise ValueError("%s (%s): message must be a string, got %r" % (where, spec["name"], spec["message"]))
    bounds = [key for key in ("equals", "max", "min") if key in spec]
    if not bounds:
        raise ValueError("%s (%s): needs one of equals, max or min to compare the query's result with" % (where, spec["name"]))
    for key in ("max", "min"):
        if key in spec and (isinstance(spec[key], bool) or not isinstance(spec[key], (int, float))
                            or not math.isfinite(spec[key])):
            raise ValueError("%s (%s): %s must be a finite number, got %r" % (where, spec["name"], key, spec[key]))
    checked = dict(spec)
    jmespath, missing = load_jmespath()
    if jmespath is None:
        if require_jmespath:
            raise ValueError("%s (%s): custom checks need the jmespath Python library on the controller: %s" % (where, spec["name"], missing))
        checked.update(compiled=None, not_applied=missing, subsets=[])
        return checked
    failed = None
    try:
        compiled = jmespath.compile(spec["query"])
    except jmespath.exceptions.JMESPathError as exc:
        failed = str(exc)
    if failed is not None:
        raise ValueError("%s (%s): the JMESPath query %r does not parse: %s" % (where, spec["name"], spec["query"], failed))
    checked["compiled"] = compiled
    checked["subsets"] = custom_check_subsets(index, checked)
    return checked


def validate_policy(args, require_jmespath=True):
    """Return the policy with sizes parsed and expressions compiled; ValueError naming the option.

    ``require_jmespath=False`` (the node-local health check): custom checks without the jmespath library are kept
    and reported as not applied instead of refusing the policy.
    """
    policy = dict(args)
    for name in _readiness_options.names_of_type("float"):
        # NaN compares false with everything (a wait that never ends, a timeout never reached); inf never ends.
        if args.get(name) is not None and not math.isfinite(args[name]):
            raise ValueError("%s: must be a finite number, got %s" % (name, args[name]))
    policy["min_available_memory"] = parse_memory_requirement(args["min_available_memory"])
    if args["max_build_processes"] < 0:
        raise ValueError("max_build_processes: must be 0 or more, got %s" % args["max_build_processes"])
    pressure = args.get("max_memory_pressure")
    if pressure is not None and not 0 <= pressure <= 100:
        raise ValueError("max_memory_pressure: a PSI percentage between 0 and 100, got %s" % pressure)
    compile_patterns(args.get("build_process_patterns"), "build_process_patterns")
    if args.get("gpu_timeout") is not None and args["gpu_timeout"] <= 0:
        raise ValueError("gpu_timeout: must be greater than 0 seconds (a hung driver needs a deadline), got %s" % args["gpu_timeout"])
    if args.get("compute_capability") is not None and not _COMPUTE_CAPABILITY.match(str(args["compute_capability"])):
        raise ValueError("compute_capability: %r is not a compute capability like 12.0 (Blackwell SM120) or 10.0 (B200)"
                         % (args["compute_capability"],))
    for name in ("expected_gpus", "min_free_inodes", "oom_window_minutes", "kernel_events_window", "max_ecc_errors"):
        if args.get(name) is not None and args[name] < 0:
            raise ValueError("%s: must be 0 or more, got %s" % (name, args[name]))
    if args.get("min_free_disk") is not None:
        parse_option_size("min_free_disk", args["min_free_disk"])
    if args.get("build_path") is not None and not os.path.isabs(args["build_path"]):
        # Relative to what? The node's login directory is no build directory anyone meant.
        raise ValueError("build_path: %r is not an absolute path on the node" % (args["build_path"],))
    for name in ("wait", "interval"):
        if args.get(name) is not None and not 0 <= args[name] <= MAX_WAIT_SECONDS:
            raise ValueError("%s: must be 0 to %d seconds, got %s" % (name, MAX_WAIT_SECONDS, args[name]))
    check_written_forms(args)
    policy["custom_checks"] = [compile_custom_check(i, spec, require_jmespath)
                              for i, spec in enumerate(args.get("custom_checks") or [])]
    return policy


def check_written_forms(args):
    """Strings that must look like what they name: a typo is refused by name, never compared as written.

    ``None`` (unset) is always fine: it means the option's documented default behaviour.
    """
    forms = (
        ("min_driver_version", _VERSION, "a driver version like 570.86.15 (unset: derived from nvcc)"),
        ("cmake_min_version", _VERSION, "a version like 3.18"),
        ("cmake_max_version", _VERSION, "a version like 4.2 (unset: no limit)"),
        ("nvcc_arch", _ARCH, "a GPU architecture like sm_120a or compute_120"),
    )
    for name, form, what in forms:
        value = args.get(name)
        if value is not None and not form.match(str(value)):
            raise ValueError("%s: %r is not %s" % (name, value, what))
    minimum = args.get("cmake_policy_version_minimum")
    if minimum and not _VERSION.match(str(minimum)):
        raise ValueError("cmake_policy_version_minimum: %r is not a version like 3.5 (empty: not set)" % (minimum,))
    for name in ("build_path", "toolchain_python"):
        value = args.get(name)
        if value is not None and (not str(value).strip() or "\0" in str(value)):
            raise ValueError("%s: %r is not a path (leave it unset for the default)" % (name, value))
    for name in args.get("build_process_names") or []:
        if not str(name).strip() or "\0" in str(name) or "/" in str(name):
            raise ValueError("build_process_names: %r is not an executable name (no path, NUL or blank)" % (name,))
    for code in args.get("fatal_xids") or []:
        if not 0 < code < 2 ** 31:
            raise ValueError("fatal_xids: %r is not an NVIDIA Xid code (a positive number such as 79)" % (code,))
    for name in args.get("allowed_gpu_compute_apps") or []:
        if not str(name).strip() or "\0" in str(name):
            raise ValueError("allowed_gpu_compute_apps: %r is not a process name or path (NUL or blank)" % (name,))


_FROM_CHILDREN = ("function_expression", "or_expression", "and_expression", "not_expression", "comparator",
                  "multi_select_list", "multi_select_dict", "key_val_pair")
_FROM_LEFT = ("subexpression", "index_expression", "pipe", "projection", "value_projection", "filter_projection", "flatten")


def root_fields(node):
    """The top-level fact names a parsed JMESPath expression reads, or None when it reads the whole (``@``, ``*``).

    Only the left side of a path, pipe or projection is evaluated against the facts themselves; the right side
    and filter conditions see its elements, and ``&expr`` arguments see list items. A shape not known here
    also answers None, so the caller gathers everything rather than too little.
    """
    kind = node.get("type")
    children = [child for child in node.get("children") or [] if isinstance(child, dict)]
    if kind == "field":
        return {node["value"]}
    if kind in ("literal", "expref", "index", "slice"):
        return set()
    if kind in _FROM_LEFT:
        return root_fields(children[0]) if children else set()
    if kind in _FROM_CHILDREN:
        found = set()
        for child in children:
            names = root_fields(child)
            if names is None:
                return None
            found |= names
        return found
    return None


def custom_check_subsets(index, spec):
    """The node_facts subsets one compiled custom check needs; ``['all']`` when its expression reads the whole."""
    names = root_fields(spec["compiled"].parsed)
    if names is None:
        return ["all"]
    unknown_names = sorted(names - set(NODE_SUBSETS))
    if unknown_names:
        raise ValueError("custom_checks[%d] (%s): the query %r reads %s, which node_facts does not gather; the facts are %s"
                         % (index, spec["name"], spec["query"], ", ".join(unknown_names), ", ".join(NODE_SUBSETS)))
    return sorted(names)


def subsets_for(policy):
    """The node_facts subsets this policy reads, so the node gathers nothing it does not need."""
    wanted = list(COMMON_SUBSETS)
    for profile in policy.get("profiles") or ():
        wanted.extend(PROFILE_SUBSETS[profile])
    for spec in policy.get("custom_checks") or ():
        wanted.extend(spec["subsets"])
    if "all" in wanted:
        return ["all"]
    seen = []
    for name in wanted:
        if name not in seen:
            seen.append(name)
    return seen


# ---------------------------------------------------------------- checks


def describe_age(seconds):
    """``7380`` -> ``2h 03m``; short ages in seconds or minutes."""
    seconds = int(seconds or 0)
    if seconds < 60:
        return "%ds" % seconds
    if seconds < 3600:
        return "%dm %02ds" % (seconds // 60, seconds % 60)
    if seconds < 86400:
        return "%dh %02dm" % (seconds // 3600, seconds % 3600 // 60)
    return "%dd %02dh" % (seconds // 86400, seconds % 86400 // 3600)


def describe_processes(processes):
    """``ninja (pid 115, orphaned, 2h 03m), cc1plus x2`` -- one entry per name, in order of appearance."""
    groups = []
    by_name = {}
    for proc in processes:
        name = printable(proc["name"])  # a process may be named with escapes that colour the console
        if name not in by_name:
            by_name[name] = []
            groups.append(name)
        by_name[name].append(proc)
    parts = []
    for name in groups:
        procs = by_name[name]
        if len(procs) > 1:
            flags = []
            orphans = sum(1 for p in procs if p.get("orphaned"))
            zombies = sum(1 for p in procs if p.get("zombie"))
            if orphans:
                flags.append("%d orphaned" % orphans)
            if zombies:
                flags.append("%d zombie" % zombies)
            parts.append("%s x%d%s" % (name, len(procs), " (%s)" % ", ".join(flags) if flags else ""))
            continue
        proc = procs[0]
        details = ["pid %s" % proc["pid"]]
        if proc.get("orphaned"):
            details.append("orphaned")
        if proc.get("zombie"):
            details.append("zombie")
        details.append(describe_age(proc.get("age_seconds")))
        parts.append("%s (%s)" % (name, ", ".join(details)))
    return ", ".join(parts)


def check_available_memory(facts, policy):
    name = "available_memory"
    memory = facts.get("memory")
    kind, value = policy["min_available_memory"]
    if not memory or not memory.get("effective"):
        return unknown(name, value, "memory facts were not gathered")
    effective = memory["effective"]
    available = effective.get("available_bytes")
    total = effective.get("total_bytes")
    if available is None or total is None:
        return unknown(name, value, "effective memory could not be read: %s" % "; ".join(memory.get("errors") or ["no reason given"]))
    required = int(total * value) if kind == "fraction" else value
    expected = ">= %s" % human(required) + (" (%d%% of %s effective total)" % (value * 100, human(total)) if kind == "fraction" else "")
    ok = available >= required
    limit_note = ""
    if effective.get("limited_by") == "cgroup":
        host_total = (memory.get("host") or {}).get("total_bytes")
        limit_note = " (capped by the memory cgroup at %s total; free shows the host's %s)" % (human(total), human(host_total))
    message = (
        "effective available memory %s is below the %s required%s: stop what holds memory, raise the container's limit, "
        "or lower preflight_min_available_memory" % (human(available), human(required), limit_note)
    )
    return result(name, ok, human(available), expected, "" if ok else message)


def check_build_processes(facts, policy):
    name = "build_processes"
    procs = facts.get("build_processes")
    allowed = policy["max_build_processes"]
    if not procs or "count" not in procs:
        return unknown(name, "<= %d" % allowed, "build-process facts were not gathered")
    count = procs["count"]
    ok = count <= allowed
    message = "" if ok else build_processes_message(count, procs.get("processes") or [])
    return result(name, ok, count, "<= %d" % allowed, message)


def build_processes_message(count, processes):
    """What to do about running build processes; a container's init (pid 1) cannot be reaped, only restarted."""
    message = "%d build process%s still running: %s" % (count, "" if count == 1 else "es", describe_processes(processes))
    inits = [proc for proc in processes if proc.get("pid") == 1]
    if inits and len(inits) == len(processes):
        return message + ("; pid 1 is this node's (container's) init, which playbooks/reap.yml cannot end: it counts as "
                          "long as the container runs; restart the container with another entry point, or raise "
                          "preflight_max_build_processes")
    if inits:
        return message + ("; wait for them, or end them with playbooks/reap.yml (not pid 1, this container's init, "
                          "which counts as long as the container runs)")
    return message + "; wait for them, or end them with playbooks/reap.yml"


def check_memory_pressure(facts, policy):
    name = "memory_pressure"
    limit = policy.get("max_memory_pressure")
    if limit is None:
        return None
    pressure = (facts.get("memory") or {}).get("pressure") or {}
    if not pressure.get("present"):
        return skipped(name, "no /proc/pressure/memory on this kernel (%s)" % (pressure.get("reason") or "PSI absent"))
    avg10 = ((pressure.get("some") or {}).get("avg10"))
    if avg10 is None:
        return unknown(name, "<= %s%%" % limit, "PSI 'some avg10' missing from /proc/pressure/memory")
    ok = avg10 <= limit
    message = "" if ok else (
        "memory pressure is %.2f%% (tasks stalled on memory over the last 10 s), above %s%%: the node is reclaiming; "
        "wait or free memory before building" % (avg10, limit))
    return result(name, ok, avg10, "<= %s%%" % limit, message)


def custom_check_passes(spec, observed):
    """equals compares any value; max and min only numbers (a string or list never passes them)."""
    if "equals" in spec:
        return observed == spec["equals"]
    if isinstance(observed, bool) or not isinstance(observed, (int, float)):
        return False
    return observed <= spec["max"] if "max" in spec else observed >= spec["min"]


def check_custom(spec, facts):
    name = spec["name"]
    if "equals" in spec:
        expected = "== %r" % (spec["equals"],)
    elif "max" in spec:
        expected = "<= %s" % spec["max"]
    else:
        expected = ">= %s" % spec["min"]
    if spec.get("compiled") is None:
        return skipped(name, spec.get("not_applied") or "the JMESPath query was not compiled", "custom")
    jmespath = load_jmespath()[0]
    failed = None
    try:
        observed = spec["compiled"].search(facts)
    except jmespath.exceptions.JMESPathError as exc:
        failed = str(exc)
    if failed is not None:
        return unknown(name, expected, "JMESPath %r failed on the facts: %s" % (spec["query"], failed), "custom")
    if observed is None:
        return unknown(name, expected, "JMESPath %r selected nothing in the gathered facts" % spec["query"], "custom")
    ok = custom_check_passes(spec, observed)
    message = "" if ok else (spec.get("message") or "%s: %r is %r, expected %s" % (name, spec["query"], observed, expected))
    return result(name, ok, observed, expected, message, "custom")


COMMON_CHECKS = (check_available_memory, check_build_processes, check_memory_pressure)


def evaluate(facts, policy, profile_checks=()):
    """All checks for these facts: common ones, each profile's (or why it was not applied), custom ones.

    ``profile_checks`` are functions ``(facts, policy)`` that carry their own profile name.
    """
    checks = []
    for check in COMMON_CHECKS:
        entry = check(facts, policy)
        if entry is not None:
            checks.append(entry)
    selected = set(policy.get("profiles") or ())
    for check in profile_checks:
        entry = check(facts, policy)
        if entry is None:
            continue
        if entry["profile"] not in selected:
            entry = skipped(entry["name"], "profile %s not selected (preflight_profiles: %s)"
                            % (entry["profile"], ", ".join(sorted(selected)) or "none"), entry["profile"])
        checks.append(entry)
    for spec in policy.get("custom_checks") or ():
        checks.append(check_custom(spec, facts))
    return checks


def verdict(checks):
    """``(ready, message)``: the message names every failed check, one sentence each."""
    failed = [c for c in checks if c["status"] in ("failed", "unknown")]
    if not failed:
        applied = sum(1 for c in checks if c["status"] == "ok")
        return True, "ready: %d check%s passed" % (applied, "" if applied == 1 else "s")
    return False, "not ready: " + "; ".join("%s: %s" % (c["name"], c["message"]) for c in failed)
