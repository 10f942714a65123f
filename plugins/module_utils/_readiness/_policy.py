# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Readiness policy on the controller: validate it, pick the subsets it needs, judge the facts.

Everything here is pure: facts in, checks out. The action plugin does the one round trip.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.gpufleet.preflight.plugins.module_utils._human import human, parse_size_option
from ansible_collections.gpufleet.preflight.plugins.module_utils._process_match import compile_patterns
from ansible_collections.gpufleet.preflight.plugins.module_utils._values import non_finite
from ansible_collections.gpufleet.preflight.plugins.module_utils._versions import FORMS as VERSION_FORMS
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _readiness_options
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _gpu_build_checks as gpu_build
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _gpu_health_checks as gpu_health
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _toolkit_checks as toolkit
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness._checks import describe_age, option, printable, result, skipped, unknown
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


def parse_option_size(option, value):
    """A size option in bytes (``_human.parse_size_option``: binary units or a byte count), also refusing NaN/inf."""
    if non_finite(value):
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
        query = spec["query"]
        kind = ("a list" if isinstance(query, (list, tuple)) else "a dict" if isinstance(query, dict)
                else "a boolean" if isinstance(query, bool) else "a number" if isinstance(query, (int, float)) else "not text")
        raise ValueError("%s (%s): query must be a JMESPath expression as a string (quote it in YAML), got %r (%s)"
                         % (where, spec["name"], query, kind))
    if spec.get("message") is not None and not isinstance(spec["message"], str):
        raise ValueError("%s (%s): message must be a string, got %r" % (where, spec["name"], spec["message"]))
    bounds = [key for key in ("equals", "max", "min") if key in spec]
    if not bounds:
        raise ValueError("%s (%s): needs one of equals, max or min to compare the query's result with" % (where, spec["name"]))
    for key in ("max", "min"):
        if key in spec and (isinstance(spec[key], bool) or not isinstance(spec[key], (int, float))
                            or non_finite(spec[key])):
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

    Driven by the table: each action option's ``check`` in ``_readiness_options.OPTIONS`` says what is enforced.
    ``require_jmespath=False`` (the node-local health check): custom checks without the jmespath library are kept
    and reported as not applied instead of refusing the policy.
    """
    policy = dict(args)
    entries = [entry for entry in _readiness_options.OPTIONS if entry.get("action", True)]
    for entry in entries:
        value = args.get(entry["name"])
        # NaN compares false with everything (a wait that never ends, a timeout never reached); inf never ends.
        if entry["type"] == "float" and non_finite(value):
            raise ValueError("%s: must be a finite number, got %s" % (entry["name"], value))
    for entry in entries:
        if entry["name"] in args:
            policy[entry["name"]] = check_option(entry, args[entry["name"]], require_jmespath)
    return policy


def _number_message(name, rule, value):
    unit = " %s" % rule["unit"] if rule.get("unit") else ""
    why = " (%s)" % rule["why"] if rule.get("why") else ""
    if "above" in rule and value <= rule["above"]:
        return "%s: must be greater than %s%s%s, got %s" % (name, rule["above"], unit, why, value)
    if rule.get("what"):
        return "%s: %s between %s and %s, got %s" % (name, rule["what"], rule["min"], rule["max"], value)
    if "min" in rule and value < rule["min"] and rule["min"] == 0 and not unit:
        return "%s: must be 0 or more, got %s" % (name, value)
    if "above" in rule:
        return "%s: must be more than %s and at most %s%s%s, got %s" % (name, rule["above"], rule["max"], unit, why, value)
    return "%s: must be %s to %s%s%s, got %s" % (name, rule["min"], rule["max"], unit, why, value)


def _in_bounds(rule, value):
    if "above" in rule and not value > rule["above"]:
        return False
    return rule.get("min", value) <= value <= rule.get("max", value)


def _text(value):
    return str(value) if value is not None else ""


_FORMS = {
    "version": VERSION_FORMS["version"],
    "arch": VERSION_FORMS["gpu_arch"],
    "compute_capability": VERSION_FORMS["compute_capability"],
}
_FORM_WHAT = {
    "arch": "a GPU architecture like sm_120a or compute_120",
    "compute_capability": "a compute capability like 12.0 (Blackwell SM120) or 10.0 (B200)",
}


def check_option(entry, value, require_jmespath=True):
    """One option's value as the policy keeps it, or ValueError naming it; what is checked is the table's ``check``.

    ``None`` (unset) is always fine: it means the option's documented default behaviour.
    """
    name, rule = entry["name"], entry["check"]
    form = rule.get("form")
    if value is None or form in ("bool", "choices"):
        return value                    # the argument spec's type and choices bound these
    if form is None:
        if not _in_bounds(rule, value):
            raise ValueError(_number_message(name, rule, value))
        return value
    if form == "memory":
        return parse_memory_requirement(value)
    if form == "size":
        parse_option_size(name, value)
        return value
    if form in _FORMS:
        if rule.get("empty") and value == "":
            return value
        if not _FORMS[form].match(_text(value)):
            raise ValueError("%s: %r is not %s" % (name, value, rule.get("what") or _FORM_WHAT[form]))
        return value
    if form in ("path", "absolute_path"):
        if not _text(value).strip() or "\0" in _text(value):
            raise ValueError("%s: %r is not a path (leave it unset for the default)" % (name, value))
        if form == "absolute_path" and not os.path.isabs(value):
            # Relative to what? The node's login directory is no build directory anyone meant.
            raise ValueError("%s: %r is not an absolute path on the node" % (name, value))
        return value
    return _LIST_FORMS[form](name, value, require_jmespath)


def _program_names(name, values, _require_jmespath):
    for item in values:
        if not _text(item).strip() or "\0" in _text(item) or "/" in _text(item):
            raise ValueError("%s: %r is not an executable name (no path, NUL or blank)" % (name, item))
    return values


def _process_names(name, values, _require_jmespath):
    for item in values:
        if not _text(item).strip() or "\0" in _text(item):
            raise ValueError("%s: %r is not a process name or path (NUL or blank)" % (name, item))
    return values


def _xids(name, values, _require_jmespath):
    for code in values:
        if not 0 < code < 2 ** 31:
            raise ValueError("%s: %r is not an NVIDIA Xid code (a positive number such as 79)" % (name, code))
    return values


def _regexes(name, values, _require_jmespath):
    compile_patterns(values, name)
    return values


def _custom_checks(_name, values, require_jmespath):
    return [compile_custom_check(i, spec, require_jmespath) for i, spec in enumerate(values or [])]


_LIST_FORMS = {
    "program_names": _program_names,
    "process_names": _process_names,
    "xids": _xids,
    "regexes": _regexes,
    "custom_checks": _custom_checks,
}
FORMS = ("bool", "choices", "memory", "size", "path", "absolute_path") + tuple(_FORMS) + tuple(_LIST_FORMS)


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


def node_facts_args(policy):
    """node_facts' options for this policy: what the readiness action sends to the node, and what the node-local
    health check gathers with (one place, so both gather the same)."""
    return dict(
        gather_subset=subsets_for(policy),
        build_process_names=policy["build_process_names"],
        build_process_patterns=policy["build_process_patterns"],
        gpu_timeout=policy["gpu_timeout"],
        gpu_probes=gpu_probes_for(policy),
        gpu_probe_timeout=policy["gpu_probe_timeout"],
        gpu_probe_budget=policy["gpu_probe_budget"],
        dcgm_diag_timeout=policy["dcgm_diag_timeout"],
        disk_paths=[policy["build_path"]],
        kernel_events_window=policy["kernel_events_window"],
        toolchain_python=policy.get("toolchain_python") or None,
    )


def gpu_probes_for(policy):
    """The extra nvidia-smi probes the policy's checks read: none by default, so a node-local check every minute
    costs one nvidia-smi device query."""
    if "gpu" not in (policy.get("profiles") or ()):
        return []
    probes = []
    if policy.get("check_nvlink"):
        probes += ["nvlink_status", "nvlink_errors"]
    if policy.get("check_fabric") or policy.get("check_gpu_recovery"):
        probes.append("query")
    if policy.get("check_dcgm_diag"):
        probes.append("dcgm_diag")
    return probes


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
    requirement = option(policy, "min_available_memory")
    kind, value = requirement if isinstance(requirement, tuple) else parse_memory_requirement(requirement)
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
    allowed = option(policy, "max_build_processes")
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
    limit = option(policy, "max_memory_pressure")
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


def check(name, profile, function, reads, options=()):
    """One registry entry: the check's name and profile (as its results carry them), the function, the fact paths
    it reads (``subset.key.key``; ``[]`` for each element of a list) and the options it reads (through ``option``)."""
    return dict(name=name, profile=profile, function=function, reads=tuple(reads), options=tuple(options))


_GPU = ("gpus.state", "gpus.message", "gpus.devices")
_DEVICE = "gpus.devices[]."
_NAMED = tuple(_DEVICE + key for key in ("index", "name", "pci_bus_id", "serial", "uuid"))
_PROBES = ("gpus.probes",) + tuple("gpus.probes.%s.%s" % (probe, key) for probe in ("nvlink_status", "nvlink_errors", "query")
                                   for key in ("state", "message"))
_EVENTS = ("kernel_events.readable", "kernel_events.message", "kernel_events.window_seconds")
_KILL = "kernel_events.oom_kills[]."

# THE registry: every readiness check once, in the order they are reported. ``tests/unit/plugins/module_utils/
# test_check_registry.py`` runs each one with recording facts and policy: a path or option it reads that is not
# listed here, a path no collector produces on the captured fixtures, or an option without bounds fails it.
CHECKS = (
    check("available_memory", "common", check_available_memory, (
        "memory.effective.available_bytes", "memory.effective.total_bytes", "memory.effective.limited_by",
        "memory.host.total_bytes", "memory.errors"), ("min_available_memory",)),
    check("build_processes", "common", check_build_processes, (
        "build_processes.count", "build_processes.processes[].pid", "build_processes.processes[].name",
        "build_processes.processes[].orphaned", "build_processes.processes[].zombie",
        "build_processes.processes[].age_seconds"), ("max_build_processes",)),
    check("memory_pressure", "common", check_memory_pressure, (
        "memory.pressure.present", "memory.pressure.reason", "memory.pressure.some.avg10"), ("max_memory_pressure",)),
    check("gpu_count", "gpu", gpu_build.check_gpu_count, ("gpus.state", "gpus.message", "gpus.count"), ("expected_gpus",)),
    check("compute_capability", "gpu", gpu_build.check_compute_capability, _GPU + (
        "gpus.driver_version", _DEVICE + "index", _DEVICE + "name", _DEVICE + "compute_capability"), ("compute_capability",)),
    check("ecc_errors", "gpu", gpu_build.check_ecc_errors, _GPU + (
        _DEVICE + "index", _DEVICE + "name", _DEVICE + "ecc_uncorrected"), ("max_ecc_errors",)),
    check("row_remaps", "gpu", gpu_build.check_row_remaps, _GPU + (
        _DEVICE + "index", _DEVICE + "remapped_rows_pending", _DEVICE + "remapped_rows_failure")),
    check("fatal_xid", "gpu", gpu_build.check_fatal_xid, _EVENTS + (
        "kernel_events.xids[].code", "kernel_events.xids[].pci", "kernel_events.xids[].age_seconds",
        "kernel_events.xids[].message", "gpus.devices", _DEVICE + "pci_bus_id", _DEVICE + "index", _DEVICE + "name",
        _DEVICE + "serial", _DEVICE + "uuid"), ("fatal_xids", "xid_fail_actions")),
    check("gpu_compute_apps", "gpu", gpu_build.check_gpu_compute_apps, _GPU + (
        _DEVICE + "index", _DEVICE + "compute_apps", _DEVICE + "compute_apps[].name", _DEVICE + "compute_apps[].pid",
        _DEVICE + "compute_apps[].used_memory_bytes"), ("allow_gpu_compute_apps", "allowed_gpu_compute_apps")),
    check("driver_version", "gpu", gpu_build.check_driver_version, _GPU + (
        "gpus.driver_version", "toolchain.nvcc.cuda_version"), ("min_driver_version",)),
    check("pcie_link", "gpu", gpu_health.check_pcie_link, _GPU + _NAMED + tuple(_DEVICE + key for key in (
        "pcie_gen_current", "pcie_gen_max", "pcie_width_current", "pcie_width_max", "utilization_gpu",
        "clock_event_reasons", "clock_event_reasons[]")), ("min_pcie_gen", "min_pcie_width")),
    check("gpu_temperature", "gpu", gpu_health.check_gpu_temperature, _GPU + _NAMED + (_DEVICE + "temperature",),
          ("max_gpu_temperature",)),
    check("clock_events", "gpu", gpu_health.check_clock_events, _GPU + _NAMED + (
        _DEVICE + "clock_event_reasons", _DEVICE + "clock_event_reasons[]"), ("bad_clock_event_reasons",)),
    check("persistence_mode", "gpu", gpu_health.check_persistence_mode, _GPU + _NAMED + (_DEVICE + "persistence_mode",),
          ("require_persistence_mode",)),
    check("mig_mode", "gpu", gpu_health.check_mig_mode, _GPU + _NAMED + (_DEVICE + "mig_mode",), ("mig_mode",)),
    check("nvlink", "gpu", gpu_health.check_nvlink, _GPU + _NAMED + _PROBES + (_DEVICE + "nvlink", _DEVICE + "nvlink_errors"),
          ("check_nvlink", "max_nvlink_errors", "gpu_probe_timeout_fails")),
    check("fabric", "gpu", gpu_health.check_fabric, _GPU + _NAMED + _PROBES + (
        _DEVICE + "query", _DEVICE + "query.fabric_state", _DEVICE + "query.fabric_status",
        _DEVICE + "query.fabric_health_summary"), ("check_fabric", "gpu_probe_timeout_fails")),
    check("gpu_recovery", "gpu", gpu_health.check_gpu_recovery, _GPU + _NAMED + _PROBES + (
        _DEVICE + "query", _DEVICE + "query.recovery_action", _DEVICE + "query.reset_required",
        _DEVICE + "query.drain_and_reset_recommended"), ("check_gpu_recovery", "gpu_probe_timeout_fails")),
    check("dcgm_diag", "gpu", gpu_health.check_dcgm_diag, _GPU + ("gpus.probes",) + tuple(
        "gpus.probes.dcgm_diag." + key for key in ("state", "message", "tests[].test", "tests[].result", "tests[].detail")),
        ("check_dcgm_diag", "gpu_probe_timeout_fails")),
    check("nvcc_arch", "build", gpu_build.check_nvcc_arch, (
        "toolchain.nvcc.present", "toolchain.nvcc.error", "toolchain.nvcc.gpu_archs[]", "toolchain.nvcc.gpu_codes[]",
        "toolchain.nvcc.version", "toolchain.nvcc.cuda_version"), ("nvcc_arch",)),
    check("cmake_version", "build", gpu_build.check_cmake_version, (
        "toolchain.cmake.present", "toolchain.cmake.version", "toolchain.cmake.error",
        "toolchain.cmake.policy_version_minimum_needed"),
        ("cmake_min_version", "cmake_max_version", "cmake_policy_version_minimum")),
    check("numa_header", "build", gpu_build.check_numa_header, (
        "toolchain.numa.header_present", "toolchain.numa.linkable", "toolchain.numa.library_present",
        "toolchain.numa.library_path", "toolchain.numa.header_path", "toolchain.numa.package_hint"), ("require_numa",)),
    check("disk_space", "build", gpu_build.check_disk_space, (
        "disks.paths", "disks.paths.*.exists", "disks.paths.*.checked_path", "disks.paths.*.free_bytes",
        "disks.paths.*.error", "disks.paths.*.free_inodes", "disks.paths.*.mount_point", "disks.paths.*.writable",
        "disks.paths.*.read_only"), ("min_free_disk", "min_free_inodes", "build_path")),
    check("recent_oom", "build", gpu_build.check_recent_oom, _EVENTS + (
        "memory.cgroup.limit_path", "memory.cgroup.path", "memory.host_pid_namespace", "kernel_events.oom_kills",
        _KILL + "age_seconds", _KILL + "global", _KILL + "cgroup", _KILL + "oom_cgroup", _KILL + "process",
        _KILL + "pid"), ("oom_window_minutes",)),
    check("cuda_libraries", "build", toolkit.check_cuda_libraries, (
        "toolchain.cuda_libraries", "toolchain.nvcc.present") + tuple(
        "toolchain.cuda_libraries.%s.%s" % (component, key) for component in toolkit.COMPONENTS
        for key in ("present", "source")), ("require_cuda_libraries",)),
    check("torch_cuda_matches_nvcc", "build", toolkit.check_torch_cuda_matches_nvcc, (
        "toolchain.torch.present", "toolchain.torch.cuda", "toolchain.torch.version", "toolchain.nvcc.present",
        "toolchain.nvcc.cuda_version"), ("toolchain_python",)),
)


def evaluate(facts, policy, profile_checks=None):
    """All checks for these facts: every registered one (a profile's not selected: skipped, saying why), then the
    custom ones. ``profile_checks`` (functions) replaces the registry's gpu/build checks (tests of a subset)."""
    if profile_checks is None:
        registered = [entry["function"] for entry in CHECKS]
    else:
        registered = [entry["function"] for entry in CHECKS if entry["profile"] == "common"] + list(profile_checks)
    checks = []
    selected = set(option(policy, "profiles") or ())
    for function in registered:
        entry = function(facts, policy)
        if entry is None:
            continue
        if entry["profile"] != "common" and entry["profile"] not in selected:
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
