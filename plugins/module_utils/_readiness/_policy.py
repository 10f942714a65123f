# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Readiness policy on the controller: the subsets a policy needs, the checks (``CHECKS``: the one registry), the verdict.

Everything here is pure: facts in, checks out. The action plugin does the one round trip; the policy it judges with
was validated by ``_policy_validation``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.gpufleet.preflight.plugins.module_utils._constants import ACTIVE_RESULT_FILES
from ansible_collections.gpufleet.preflight.plugins.module_utils._human import human
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _gpu_build_checks as gpu_build
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _gpu_health_checks as gpu_health
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _toolkit_checks as toolkit
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _hardware_checks as hardware
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _node_checks as node
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness._checks import describe_age, option, printable, result, skipped, unknown
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness._policy_validation import load_jmespath, parse_memory_requirement


PROFILES = ("build", "gpu", "node")
COMMON_SUBSETS = ("memory", "build_processes")
PROFILE_SUBSETS = {
    "build": ("toolchain", "disks", "kernel_events"),
    "gpu": ("gpus", "kernel_events"),
    "node": ("node", "disks"),
}


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
        dcgm_result_path=policy.get("dcgm_result_path") if policy.get("dcgm_result_max_age") and "gpu" in profiles(policy) else None,
        bandwidth_result_paths=bandwidth_result_paths(policy),
        disk_paths=disk_paths(policy),
        service_names=list(policy.get("required_services") or []) if "node" in profiles(policy) else [],
        ib_counters=bool(policy.get("check_ib_counters")) and "node" in profiles(policy),
        node_hardware=hardware_parts(policy),
        kernel_events_window=policy["kernel_events_window"],
        toolchain_python=policy.get("toolchain_python") or None,
    )


def hardware_parts(policy):
    """The node hardware parts the policy's checks read (none by default: the node-local check's cost stays)."""
    if "node" not in profiles(policy):
        return []
    return [part for part, option in (("d_state", "check_d_state"), ("cpu_governor", "expected_cpu_governor"),
                                      ("nvme", "check_nvme"), ("ipmi_sel", "check_ipmi_sel"), ("sensors", "check_sensors"))
            if policy.get(option) not in (None, False, "any")]


def profiles(policy):
    return policy.get("profiles") or ()


def disk_paths(policy):
    """The build path, and with the node profile the mounts and scratch paths it checks: one statvfs each."""
    paths = [policy["build_path"]]
    if "node" in profiles(policy):
        paths.extend(path for path in list(policy.get("required_mounts") or []) + list(policy.get("scratch_paths") or [])
                     if path not in paths)
    return paths


def bandwidth_result_paths(policy):
    """{test: the file its kept result is read from} the bandwidth_result check wants; {} when it is off."""
    if not policy.get("bandwidth_result_max_age") or "gpu" not in profiles(policy):
        return {}
    return dict((test, os.path.join(policy["bandwidth_result_dir"], ACTIVE_RESULT_FILES[test]))
                for test in policy["bandwidth_result_tests"])


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
    checked = result(name, ok, human(available), expected, "" if ok else message)
    checked["required_bytes"] = required  # the number the fleet's memory chart draws (the report never re-parses it)
    return checked


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


# How a user ends stray build processes: the collection's playbook by its name, which a checkout (collections_path)
# and an installed collection both run; playbooks/reap.yml is only a checkout's path (issue 39).
REAP = "ansible-playbook gpufleet.preflight.reap"


def build_processes_message(count, processes):
    """What to do about running build processes; a container's init (pid 1) cannot be reaped, only restarted. reap
    ends only orphaned processes unless told ``reap_orphaned_only=false``: a hint that named reap alone for a live
    (or setsid'd) build came back after every reap, which ended nothing (issue 39)."""
    message = "%d build process%s still running: %s" % (count, "" if count == 1 else "es", describe_processes(processes))
    inits = [proc for proc in processes if proc.get("pid") == 1]
    if inits and len(inits) == len(processes):
        return message + ("; pid 1 is this node's (container's) init, which %s cannot end: it counts as "
                          "long as the container runs; restart the container with another entry point, or raise "
                          "preflight_max_build_processes" % REAP)
    live = sum(1 for proc in processes if proc.get("pid") != 1 and not proc.get("orphaned"))
    if live:
        owners = ("it still has" if len(processes) == 1 else
                  "%d of them still %s" % (live, "has" if live == 1 else "have"))
        hint = ("; wait for them, or, if they are abandoned, end them with %s -e reap_orphaned_only=false (%s a "
                "parent, and reap ends only orphaned processes unless told so)" % (REAP, owners))
    else:
        hint = "; wait for them, or end them with %s" % REAP
    if inits:
        hint += " (not pid 1, this container's init, which counts as long as the container runs)"
    return message + hint


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
_KEPT = tuple("gpus.dcgm_result.record." + key for key in (
    "level", "passed", "verified_at", "valid_until", "failures[].test", "failures[].gpu", "failures[].detail"))
_BANDWIDTH_KEPT = tuple("gpus.bandwidth_results.%s.record.%s" % (test, key) for test in ("nvbandwidth", "nccl_all_reduce")
                        for key in ("passed", "judged", "verified_at", "valid_until", "failures"))
_PROBES = ("gpus.probes",) + tuple("gpus.probes.%s.%s" % (probe, key) for probe in ("nvlink_status", "nvlink_errors", "query")
                                   for key in ("state", "message"))
_EVENTS = ("kernel_events.readable", "kernel_events.message", "kernel_events.window_seconds")
_KILL = "kernel_events.oom_kills[]."
_HW = ("node.hardware",)

# THE registry: every readiness check once, in the order they are reported. ``tests/unit/plugins/module_utils/
# test_check_registry.py`` runs each one with recording facts and policy: a path or option it reads that is not
# listed here, a path no collector produces on the captured fixtures, or an option without bounds fails it.
CHECKS = (
    check("available_memory", "always", check_available_memory, (
        "memory.effective.available_bytes", "memory.effective.total_bytes", "memory.effective.limited_by",
        "memory.host.total_bytes", "memory.errors"), ("min_available_memory",)),
    check("build_processes", "always", check_build_processes, (
        "build_processes.count", "build_processes.processes[].pid", "build_processes.processes[].name",
        "build_processes.processes[].orphaned", "build_processes.processes[].zombie",
        "build_processes.processes[].age_seconds"), ("max_build_processes",)),
    check("memory_pressure", "always", check_memory_pressure, (
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
    check("sxid", "gpu", gpu_build.check_sxid, _EVENTS + ("kernel_events.sxids",) + tuple(
        "kernel_events.sxids[]." + key for key in ("code", "device", "pci", "fatal", "age_seconds", "message")),
        ("check_sxid", "sxid_fail_nonfatal")),
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
    check("nvlink", "gpu", gpu_health.check_nvlink, _GPU + _NAMED + _PROBES + tuple(
        _DEVICE + key for key in ("nvlink", "nvlink_errors", "nvlink_state", "nvlink_note")),
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
    check("dcgm_result", "gpu", gpu_health.check_dcgm_result, _GPU + ("gpus.dcgm_result", "gpus.dcgm_result.path") + _KEPT,
          ("dcgm_result_max_age", "dcgm_result_min_level")),
    check("bandwidth_result", "gpu", gpu_health.check_bandwidth_result, _GPU + ("gpus.bandwidth_results",) + _BANDWIDTH_KEPT,
          ("bandwidth_result_max_age", "bandwidth_result_tests")),
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
        _KILL + "pid"), ("oom_window_minutes", "oom_ignore_cgroups")),
    check("cuda_libraries", "build", toolkit.check_cuda_libraries, (
        "toolchain.cuda_libraries", "toolchain.nvcc.present") + tuple(
        "toolchain.cuda_libraries.%s.%s" % (component, key) for component in toolkit.COMPONENTS
        for key in ("present", "source")), ("require_cuda_libraries",)),
    check("torch_cuda_matches_nvcc", "build", toolkit.check_torch_cuda_matches_nvcc, (
        "toolchain.torch.present", "toolchain.torch.cuda", "toolchain.torch.version", "toolchain.nvcc.present",
        "toolchain.nvcc.cuda_version"), ("toolchain_python",)),
    check("filesystems", "node", node.check_filesystems, (
        "disks.paths", "disks.paths.*.exists", "disks.paths.*.free_bytes", "disks.paths.*.error",
        "disks.paths.*.mount_point", "disks.paths.*.writable", "disks.paths.*.read_only"),
        ("required_mounts", "scratch_paths", "min_free_scratch")),
    check("services", "node", node.check_services, (
        "node.errors", "node.services", "node.services.*.running", "node.services.*.count"), ("required_services",)),
    check("cpu_topology", "node", node.check_cpu_topology, (
        "node.errors", "node.cpu_topology", "node.cpu_topology.sockets", "node.cpu_topology.cores",
        "node.cpu_topology.threads"), ("expected_sockets", "expected_cores", "expected_threads")),
    check("physical_memory", "node", node.check_physical_memory, ("memory.host.total_bytes",), ("min_memory_total",)),
    check("clock_sync", "node", node.check_clock_sync, (
        "node.errors", "node.clock", "node.clock.synchronized", "node.clock.max_error_seconds"), ("require_clock_sync",)),
    check("ib_ports", "node", node.check_ib_ports, (
        "node.errors", "node.infiniband", "node.infiniband.present", "node.infiniband.ports",
        "node.infiniband.ports[].device", "node.infiniband.ports[].port", "node.infiniband.ports[].state_code",
        "node.infiniband.ports[].state_name", "node.infiniband.ports[].phys_state_code",
        "node.infiniband.ports[].phys_state_name", "node.infiniband.ports[].rate_gbps", "node.infiniband.ports[].rate"),
        ("expected_ib_ports", "min_ib_rate")),
    check("ib_counters", "node", node.check_ib_counters, (
        "node.errors", "node.infiniband", "node.infiniband.present", "node.infiniband.ports",
        "node.infiniband.counters_since_seconds", "node.infiniband.counters_state") + tuple(
        "node.infiniband.ports[]." + key for key in ("device", "port", "counters", "counter_growth", "counters_reset",
                                                     "counter_growth.link_downed")),
        ("check_ib_counters", "max_ib_link_downed", "max_ib_error_growth")),
    check("d_state", "node", hardware.check_d_state, _HW + tuple("node.hardware.d_state." + key for key in (
        "state", "message", "count", "processes", "processes[].name", "processes[].pid", "processes[].wchan")),
        ("check_d_state", "max_d_state_processes")),
    check("cpu_governor", "node", hardware.check_cpu_governor, _HW + tuple("node.hardware.cpu_governor." + key for key in (
        "state", "message", "governors")), ("expected_cpu_governor",)),
    check("nvme_health", "node", hardware.check_nvme_health, _HW + tuple("node.hardware.nvme." + key for key in (
        "state", "message", "devices", "devices[].name", "devices[].model", "devices[].error", "devices[].critical_warning",
        "devices[].available_spare", "devices[].available_spare_threshold", "devices[].percentage_used",
        "devices[].media_errors")), ("check_nvme", "max_nvme_media_errors")),
    check("ipmi_sel", "node", hardware.check_ipmi_sel, _HW + tuple("node.hardware.ipmi_sel." + key for key in (
        "state", "message", "count", "first_run", "new_count", "new", "new[].when", "new[].sensor", "new[].event",
        "new[].direction")), ("check_ipmi_sel", "max_sel_new_entries")),
    check("sensors", "node", hardware.check_sensors, _HW + tuple("node.hardware.sensors." + key for key in (
        "state", "message", "sensors", "sensors[].name", "sensors[].value", "sensors[].unit", "sensors[].status")),
        ("check_sensors",)),
)


def evaluate(facts, policy, profile_checks=None):
    """All checks for these facts: every registered one (a profile's not selected: skipped, saying why), then the
    custom ones. ``profile_checks`` (functions) replaces the registry's gpu/build checks (tests of a subset)."""
    if profile_checks is None:
        registered = [entry["function"] for entry in CHECKS]
    else:
        registered = [entry["function"] for entry in CHECKS if entry["profile"] == "always"] + list(profile_checks)
    checks = []
    selected = set(option(policy, "profiles") or ())
    for function in registered:
        entry = function(facts, policy)
        if entry is None:
            continue
        if entry["profile"] != "always" and entry["profile"] not in selected:
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
