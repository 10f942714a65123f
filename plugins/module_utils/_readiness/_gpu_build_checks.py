# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side: readiness checks on the gpus, toolchain, disks and kernel_events facts (profiles ``gpu`` and ``build``).

Each ``check_<name>(facts, policy)`` is pure: ``facts`` holds the gathered subsets without the ``gpufleet_``
prefix, ``policy`` the readiness options. It returns ``result``, ``unknown`` (facts missing or failed -- says
why), ``skipped`` (the node cannot report it, e.g. no ECC on the card) or ``None`` (the policy turns it off).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fnmatch

from ansible_collections.gpufleet.preflight.plugins.module_utils._constants import GUARDED_BUILD_CGROUP_PREFIX
from ansible_collections.gpufleet.preflight.plugins.module_utils._human import human, parse_size
from ansible_collections.gpufleet.preflight.plugins.module_utils._paths import is_within
from ansible_collections.gpufleet.preflight.plugins.module_utils._versions import split_arch, supports, version_at_least, version_tuple
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness._checks import describe_age, printable, result, skipped, unknown
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness._checks import option as _option
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness._gpu_health_checks import describe_gpu, usable_gpus
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness._xid_catalogue import SXID_ACTION, classify_event

# Oldest Linux driver each CUDA toolkit release needs (CUDA toolkit release notes, table 3): the code nvcc builds
# here must run on this node's driver.
DRIVER_FOR_CUDA = (
    ("13.0", "580.65.06"), ("12.9", "575.51.03"), ("12.8", "570.26"), ("12.6", "560.28.03"), ("12.5", "555.42.02"),
    ("12.4", "550.54.14"), ("12.3", "545.23.06"), ("12.2", "535.54.03"), ("12.1", "530.30.02"), ("12.0", "525.60.13"),
)


def _kernel_events(facts, name, expected, profile):
    events = facts.get("kernel_events")
    if not events or "readable" not in events:
        return None, unknown(name, expected, "kernel_events facts were not gathered", profile)
    if not events["readable"]:
        return None, unknown(name, expected, events.get("message") or "no kernel log readable", profile)
    return events, None


def _toolchain_entry(facts, name, tool, expected):
    toolchain = facts.get("toolchain")
    if not toolchain or tool not in toolchain:
        return None, unknown(name, expected, "toolchain facts were not gathered", "build")
    return toolchain[tool], None


# ---------------------------------------------------------------- profile gpu


def check_gpu_count(facts, policy):
    name = "gpu_count"
    wanted = _option(policy, "expected_gpus")
    if wanted is None:
        return None
    expected = "== %d" % wanted
    gpus = facts.get("gpus")
    if not gpus or "state" not in gpus:
        return unknown(name, expected, "gpus facts were not gathered", "gpu")
    if gpus["state"] in ("timeout", "error"):
        return unknown(name, expected, "nvidia-smi state is %s: %s" % (gpus["state"], gpus.get("message")), "gpu")
    count = gpus.get("count") or 0
    ok = count == wanted
    if ok:
        return result(name, True, count, expected, "", "gpu")
    if gpus["state"] != "ok":
        message = "0 GPUs usable, %d expected: %s (%s)" % (wanted, gpus.get("message"), gpus["state"])
    else:
        message = "%d GPU%s found, %d expected: check `nvidia-smi -L`, `lspci | grep -i nvidia` and the PCIe bus (Xid 79 in dmesg)" % (
            count, "" if count == 1 else "s", wanted)
    return result(name, False, count, expected, message, "gpu")


def check_compute_capability(facts, policy):
    name = "compute_capability"
    wanted = _option(policy, "compute_capability")
    if not wanted:
        return None
    gpus, why = usable_gpus(facts, name, wanted)
    if why:
        return why
    unknown_cc = [dev["index"] for dev in gpus["devices"] if not dev.get("compute_capability")]
    if unknown_cc and len(unknown_cc) == len(gpus["devices"]):
        return unknown(name, wanted, "the driver does not report compute_cap (driver %s is older than 510?)"
                       % gpus.get("driver_version"), "gpu")
    wrong = [dev for dev in gpus["devices"] if dev.get("compute_capability") and dev["compute_capability"] != str(wanted)]
    observed = sorted(set(dev.get("compute_capability") for dev in gpus["devices"] if dev.get("compute_capability")))
    if not wrong:
        return result(name, True, observed, wanted, "", "gpu")
    message = "%s compute capability %s, %s expected: this node does not match the build's GPU target; run it on a %s node " \
              "or change preflight_compute_capability" % (
                  ", ".join("GPU %s (%s) is" % (dev["index"], dev.get("name")) for dev in wrong[:3]) + (" ..." if len(wrong) > 3 else ""),
                  wrong[0]["compute_capability"], wanted, wanted)
    return result(name, False, observed, wanted, message, "gpu")


def check_ecc_errors(facts, policy):
    name = "ecc_errors"
    limit = _option(policy, "max_ecc_errors")
    expected = "<= %d uncorrected" % limit
    gpus, why = usable_gpus(facts, name, expected)
    if why:
        return why
    counted = [dev for dev in gpus["devices"] if dev.get("ecc_uncorrected") is not None]
    if not counted:
        return skipped(name, "no GPU reports ECC counters (ECC off or not supported on %s)" % gpus["devices"][0].get("name"), "gpu")
    bad = [dev for dev in counted if dev["ecc_uncorrected"] > limit]
    total = sum(dev["ecc_uncorrected"] for dev in counted)
    if not bad:
        return result(name, True, total, expected, "", "gpu")
    message = "uncorrected ECC errors on %s: drain the GPU, reset it (`nvidia-smi -r -i N`) and check `nvidia-smi -q -d ECC`" % (
        ", ".join("GPU %s (%d)" % (dev["index"], dev["ecc_uncorrected"]) for dev in bad))
    return result(name, False, total, expected, message, "gpu")


def check_row_remaps(facts, policy):
    name = "row_remaps"
    expected = "no pending or failed row remaps"
    gpus, why = usable_gpus(facts, name, expected)
    if why:
        return why
    reported = [dev for dev in gpus["devices"]
                if dev.get("remapped_rows_pending") is not None or dev.get("remapped_rows_failure") is not None]
    if not reported:
        return skipped(name, "no GPU reports row remapping (needs Ampere or newer and driver support)", "gpu")
    pending = [dev["index"] for dev in reported if dev.get("remapped_rows_pending")]
    failed = [dev["index"] for dev in reported if dev.get("remapped_rows_failure")]
    observed = {"pending": pending, "failure": failed}
    if not pending and not failed:
        return result(name, True, observed, expected, "", "gpu")
    parts = []
    if pending:
        parts.append("GPU %s have row remaps pending: reset those GPUs (`nvidia-smi -r -i N`) or reboot before use"
                     % ", ".join(str(i) for i in pending))
    if failed:
        parts.append("GPU %s had a row remapping failure: the board needs an RMA" % ", ".join(str(i) for i in failed))
    return result(name, False, observed, expected, "; ".join(parts), "gpu")


def check_fatal_xid(facts, policy):
    """Xid errors that fail the node: those in fatal_xids, and those whose class in NVIDIA's Xid catalogue
    (``_xid_catalogue``, refined by the message: Xid 154's recovery action, an NVLink5 Xid's Fatal/Nonfatal) is one
    of xid_fail_actions. The hint is the driver's own recovery action (an Xid 154 among them), else the catalogue's."""
    name = "fatal_xid"
    fatal = set(int(code) for code in _option(policy, "fatal_xids"))
    actions = set(_option(policy, "xid_fail_actions") or ())
    events, why = _kernel_events(facts, name, "no fatal Xid", "gpu")
    if why:
        return why
    expected = "no fatal Xid in the last %s" % describe_age(events.get("window_seconds"))
    judged = [(xid, classify_event(xid)) for xid in events.get("xids") or []]
    bad = [(xid, kind) for xid, kind in judged if xid.get("code") in fatal or kind["kind"] in actions]
    if not bad:
        return result(name, True, [], expected, "", "gpu")
    latest, latest_kind = bad[-1]
    driver = [kind for _xid, kind in bad if kind.get("recovery_action")]
    device = _device_at(facts, latest.get("pci"))
    action = (driver[-1]["action"] if driver else latest_kind["action"]) or "the GPU needs a reset or reboot"
    message = "%d fatal Xid error%s, latest Xid %s on %s %s ago (%s)%s%s: %s; see `dmesg | grep Xid`" % (
        len(bad), "" if len(bad) == 1 else "s", latest["code"], latest.get("pci"),
        describe_age(latest.get("age_seconds")) if latest.get("age_seconds") is not None else "an unknown time",
        printable(latest.get("message") or ""), ", %s" % latest_kind["what"] if latest_kind["what"] else "",
        ", %s" % describe_gpu(device) if device else "", action)
    return result(name, False, sorted(set((x["code"], x.get("pci")) for x, _kind in bad)), expected, message, "gpu")


def check_sxid(facts, policy):
    """NVSwitch errors (SXid) in the kernel log: a fatal one fails the node (``sxid_fail_nonfatal``: any)."""
    name = "sxid"
    if not _option(policy, "check_sxid"):
        return None
    any_sxid = _option(policy, "sxid_fail_nonfatal")
    expected = "no %sSXid in the last %%s" % ("" if any_sxid else "fatal ")
    events, why = _kernel_events(facts, name, expected % "window", "gpu")
    if why:
        return why
    expected = expected % describe_age(events.get("window_seconds"))
    if "sxids" not in events:
        return skipped(name, "the node's facts carry no SXid list (an older collection on the node): not judged", "gpu")
    sxids = events.get("sxids") or []
    bad = [sxid for sxid in sxids if any_sxid or sxid.get("fatal")]
    observed = sorted(set((sxid.get("code"), sxid.get("device")) for sxid in sxids))
    if not bad:
        return result(name, True, observed, expected, "", "gpu")
    latest = bad[-1]
    message = "%d %sSXid error%s, latest SXid %s on %s (%s) %s ago: %s; %s; see `dmesg | grep SXid`" % (
        len(bad), "" if any_sxid else "fatal ", "" if len(bad) == 1 else "s", latest.get("code"), latest.get("device"),
        latest.get("pci"), describe_age(latest.get("age_seconds")) if latest.get("age_seconds") is not None
        else "an unknown time", printable(latest.get("message") or ""),
        SXID_ACTION if latest.get("fatal") else "a non-fatal NVSwitch error: watch its count, no action on its own")
    return result(name, False, observed, expected, message, "gpu")


def _device_at(facts, pci):
    """The GPU at an Xid's PCI address (``0000:3b:00``), when gpus facts were gathered too."""
    if not pci:
        return None
    wanted = pci.lower().split(":")[-2:] if pci.count(":") >= 1 else None
    for dev in ((facts.get("gpus") or {}).get("devices") or []):
        bus = (dev.get("pci_bus_id") or "").lower().split(".")[0].split(":")[-2:]
        if wanted and bus == wanted:
            return dev
    return None


def check_gpu_compute_apps(facts, policy):
    name = "gpu_compute_apps"
    if _option(policy, "allow_gpu_compute_apps"):
        return None
    allowed = set(_option(policy, "allowed_gpu_compute_apps") or [])
    expected = "no compute processes on the GPUs" + (" (except %s)" % ", ".join(sorted(allowed)) if allowed else "")
    gpus, why = usable_gpus(facts, name, expected)
    if why:
        return why
    if any(dev.get("compute_apps") is None for dev in gpus["devices"]):
        return unknown(name, expected, "nvidia-smi could not list compute processes: %s" % gpus.get("message"), "gpu")
    busy = []
    for dev in gpus["devices"]:
        for app in dev["compute_apps"]:
            if app.get("name") not in allowed and (app.get("name") or "").rsplit("/", 1)[-1] not in allowed:
                busy.append((dev["index"], app))
    if not busy:
        return result(name, True, [], expected, "", "gpu")
    message = "GPUs are in use: %s; stop those processes or set preflight_allow_gpu_compute_apps" % ", ".join(
        "GPU %s: %s (pid %s, %s)" % (index, printable(str(app.get("name"))), app.get("pid"), human(app.get("used_memory_bytes")))
        for index, app in busy[:5])
    return result(name, False, [dict(app, gpu=index) for index, app in busy], expected, message, "gpu")


def check_driver_version(facts, policy):
    name = "driver_version"
    minimum = _option(policy, "min_driver_version")
    source = "preflight_min_driver_version"
    if not minimum:
        # Without an explicit minimum, the driver must run what this node's nvcc builds.
        cuda = ((facts.get("toolchain") or {}).get("nvcc") or {}).get("cuda_version")
        for release, driver in DRIVER_FOR_CUDA:
            if cuda and version_at_least(cuda, release):
                minimum, source = driver, "CUDA %s (nvcc here)" % cuda
                break
    if not minimum:
        return None
    expected = ">= %s" % minimum
    gpus, why = usable_gpus(facts, name, expected)
    if why:
        return why
    have = gpus.get("driver_version")
    if not have:
        return unknown(name, expected, "nvidia-smi reported no driver version", "gpu")
    ok = version_at_least(have, minimum)
    message = "" if ok else "NVIDIA driver %s is older than %s, which %s needs: upgrade the driver" % (have, minimum, source)
    return result(name, bool(ok), have, expected, message, "gpu")


# ---------------------------------------------------------------- profile build


def check_nvcc_arch(facts, policy):
    name = "nvcc_arch"
    arch = _option(policy, "nvcc_arch")
    if not arch:
        return None
    nvcc, why = _toolchain_entry(facts, name, "nvcc", arch)
    if why:
        return why
    if not nvcc.get("present"):
        return result(name, False, None, arch, "nvcc not found (%s): install the CUDA toolkit (>= 12.8 for sm_120) and put "
                      "its bin/ on PATH" % nvcc.get("error"), "build")
    if not nvcc.get("gpu_archs") and not nvcc.get("gpu_codes"):
        return unknown(name, arch, "nvcc %s did not list its architectures: %s" % (nvcc.get("version"), nvcc.get("error")), "build")
    try:
        ok, why_not = supports(nvcc, arch)
    except ValueError as exc:
        return unknown(name, arch, "preflight_nvcc_arch: %s" % exc, "build")
    number = split_arch(arch)[1]
    hint = " (sm_120 needs CUDA >= 12.8)" if number >= 120 else ""
    message = "" if ok else "%s: install a newer CUDA toolkit%s or build for another architecture" % (why_not, hint)
    return result(name, ok, nvcc.get("cuda_version"), arch, message, "build")


def check_cmake_version(facts, policy):
    name = "cmake_version"
    minimum = _option(policy, "cmake_min_version")
    maximum = _option(policy, "cmake_max_version")
    policy_minimum = _option(policy, "cmake_policy_version_minimum")
    expected = ">= %s" % minimum + (", <= %s" % maximum if maximum else "")
    cmake, why = _toolchain_entry(facts, name, "cmake", expected)
    if why:
        return why
    if not cmake.get("present"):
        return result(name, False, None, expected, "cmake not found: install it (`pip install 'cmake>=%s'`)" % minimum, "build")
    version = cmake.get("version")
    if not version:
        return unknown(name, expected, "cmake --version gave no version: %s" % cmake.get("error"), "build")
    problems = []
    if minimum and not version_at_least(version, minimum):
        problems.append("cmake %s is older than %s: `pip install 'cmake>=%s'` into the build environment" % (version, minimum, minimum))
    if maximum and newer_than(version, maximum):
        problems.append("cmake %s is newer than %s, the newest this build supports" % (version, maximum))
    if cmake.get("policy_version_minimum_needed") and not policy_minimum:
        problems.append("cmake %s (>= 4.0) refuses dependencies declaring cmake_minimum_required < 3.5: set "
                        "CMAKE_POLICY_VERSION_MINIMUM=3.5 (sgl_kernel does when cmake_policy_version_minimum is set) "
                        "or use cmake < 4" % version)
    return result(name, not problems, version, expected, "; ".join(problems), "build")


def newer_than(version, maximum):
    """``version`` past ``maximum`` at the precision ``maximum`` is written in: 4.2.1 is not newer than 4.2, 4.3.0 is."""
    have, limit = version_tuple(version), version_tuple(maximum)
    if have is None or limit is None:
        return False
    return have[:len(limit)] > limit


def check_numa_header(facts, policy):
    name = "numa_header"
    if not _option(policy, "require_numa"):
        return None
    expected = "numa.h and libnuma.so"
    numa, why = _toolchain_entry(facts, name, "numa", expected)
    if why:
        return why
    missing = []
    if not numa.get("header_present"):
        missing.append("numa.h")
    if not numa.get("linkable", numa.get("library_present")):
        missing.append("libnuma.so" + (" (only the runtime %s)" % numa.get("library_path") if numa.get("library_present") else ""))
    observed = {"header": numa.get("header_path"), "library": numa.get("library_path")}
    message = "" if not missing else "%s missing (mscclpp's find_package(NUMA) fails): %s" % (
        " and ".join(missing), numa.get("package_hint") or "install libnuma-dev (Debian/Ubuntu) or numactl-devel (RHEL)")
    return result(name, not missing, observed, expected, message, "build")


def check_disk_space(facts, policy):
    name = "disk_space"
    try:
        min_bytes = parse_size(_option(policy, "min_free_disk"))
    except ValueError as exc:
        return unknown(name, None, "min_free_disk: %s" % exc, "build")
    min_inodes = _option(policy, "min_free_inodes")
    expected = ">= %s and >= %d inodes free, writable" % (human(min_bytes), min_inodes)
    disks = facts.get("disks")
    if not disks or "paths" not in disks:
        return unknown(name, expected, "disks facts were not gathered", "build")
    paths = disks["paths"]
    wanted = _option(policy, "build_path")
    selected = {wanted: paths[wanted]} if wanted in paths else paths
    if not selected:
        return unknown(name, expected, "no disk paths were measured", "build")
    problems, observed, unknowns = [], {}, []
    for path in sorted(selected):
        entry = selected[path]
        where = path if entry.get("exists") else "%s (not there yet; measured at %s)" % (path, entry.get("checked_path"))
        if entry.get("free_bytes") is None:
            unknowns.append("%s: %s" % (path, entry.get("error") or "statvfs failed"))
            continue
        observed[path] = {"free": human(entry["free_bytes"]), "free_inodes": entry.get("free_inodes"),
                          "mount_point": entry.get("mount_point")}
        if entry["free_bytes"] < min_bytes:
            problems.append("%s has %s free on %s, %s needed: free space (old build dirs, pip/ccache caches) or point the "
                            "build elsewhere" % (where, human(entry["free_bytes"]), entry.get("mount_point"), human(min_bytes)))
        if entry.get("free_inodes") is not None and entry["free_inodes"] < min_inodes:
            problems.append("%s has %d inodes free, %d needed: delete small files (build trees, caches)" % (
                where, entry["free_inodes"], min_inodes))
        if entry.get("writable") is False:
            problems.append("%s is not writable by the build user%s" % (
                where, " (read-only mount)" if entry.get("read_only") else ""))
    if unknowns and not problems:
        return unknown(name, expected, "; ".join(unknowns), "build")
    return result(name, not problems, observed, expected, "; ".join(problems + unknowns), "build")


def node_memory_domain(memory):
    """The cgroup path whose OOM kills are this node's: the level whose limit binds it (a container, a fleet
    node's cgroup: ``cgroup.limit_path``). Without a limit, a node that sees the host's PID namespace is the whole
    machine (``/``: on a systemd host ssh lands in a session scope, yet a kill in ``system.slice`` is this node's);
    a container without a limit is its own cgroup."""
    memory = memory or {}
    cgroup = memory.get("cgroup") or {}
    if cgroup.get("limit_path"):
        return cgroup["limit_path"]
    if memory.get("host_pid_namespace"):
        return "/"
    return cgroup.get("path") or "/"


def concerns_node(kill, domain):
    """Whether an OOM kill happened to this node: a global OOM, or one inside its memory domain.

    Containers on one host share the kernel log; a kill in a neighbour's cgroup is not this node's.
    Without a known domain (or a kill line naming no cgroup) every kill counts.
    """
    where = kill.get("cgroup") or kill.get("oom_cgroup")
    if kill.get("global") or not domain or not where:
        return True
    return is_within(where, domain)


def confined_to_guarded_build(kill):
    """Whether the kill was the limit of a guarded_build cgroup doing its job: that build backs off and resumes
    by itself, so the kill says nothing about the node's health. A global OOM is never confined."""
    where = kill.get("oom_cgroup") or kill.get("cgroup") or ""
    return not kill.get("global") and any(part.startswith(GUARDED_BUILD_CGROUP_PREFIX) for part in where.split("/"))


def ignored_tenant(kill, domain, patterns):
    """The name of the cgroup below the node's memory domain that one of ``patterns`` (the policy's
    ``oom_ignore_cgroups``, shell globs) matches, where the kill happened - another tenant's limit, say the test
    suite's deliberate kills - or None. A global OOM, or a kill at the domain itself (the node's own container: the
    seed's case), is never ignored."""
    where = kill.get("cgroup") or kill.get("oom_cgroup") or ""
    if kill.get("global") or not patterns or not domain or not where or not is_within(where, domain):
        return None
    below = [part for part in where[len(domain.rstrip("/")):].split("/") if part]
    return next((part for part in below if any(fnmatch.fnmatchcase(part, p) for p in patterns)), None)


def describe_oom_kill(kill, domain):
    """The latest kill for a person: the victim and its cgroup, what killed it, and what to do -- a global OOM whose
    victim lives outside this node's memory domain is another workload's doing, not this node's build."""
    victim = "latest %s (pid %s)" % (kill.get("process"), kill.get("pid"))
    where = kill.get("cgroup")
    if where:
        victim += " in cgroup %s" % where
    age = describe_age(kill["age_seconds"]) if kill.get("age_seconds") is not None else "an unknown time"
    if kill.get("global"):
        text = "%s, killed by the whole node (global OOM) %s ago" % (victim, age)
    else:
        limit = kill.get("oom_cgroup")
        text = "%s %s ago%s" % (victim, age, " (the limit of %s)" % limit if limit and limit != where else "")
    if kill.get("global") and where and domain and not is_within(where, domain):
        return text + (": the victim is outside this node's memory domain (%s) - another workload on this machine "
                       "ran it out of memory; free memory there, or give this node a memory limit of its own, before "
                       "resuming" % domain)
    # a kill in this node's own domain: whatever build runs here (not necessarily sgl-kernel) ran it out of memory
    return text + (": lower MAX_JOBS and nvcc threads of the build that runs here (-j, or sgl_kernel_jobs and "
                   "SGL_KERNEL_COMPILE_THREADS for the sgl_kernel role; guarded_build's admission option schedules "
                   "by memory) before resuming")


def check_recent_oom(facts, policy):
    name = "recent_oom"
    minutes = _option(policy, "oom_window_minutes")
    if not minutes:
        return None
    expected = "no OOM kill in the last %d min" % minutes
    events, why = _kernel_events(facts, name, expected, "build")
    if why:
        return why
    domain = node_memory_domain(facts.get("memory"))
    in_window = [kill for kill in events.get("oom_kills") or []
                 if (kill.get("age_seconds") is None or kill["age_seconds"] <= minutes * 60) and concerns_node(kill, domain)]
    patterns = _option(policy, "oom_ignore_cgroups") or []
    ignored = [kill for kill in in_window if ignored_tenant(kill, domain, patterns)]
    recent = [kill for kill in in_window if not confined_to_guarded_build(kill) and kill not in ignored]
    confined = len(in_window) - len(recent) - len(ignored)
    note = ""
    if (events.get("window_seconds") or 0) < minutes * 60:
        note = " (the kernel log was read only %s back)" % describe_age(events.get("window_seconds"))
    if not recent:
        said = ["%d OOM kill%s inside guarded builds' own cgroups, handled by their job backoff" % (
            confined, "" if confined == 1 else "s")] if confined else []
        if ignored:
            said.append("%d in cgroups oom_ignore_cgroups leaves out (latest in %s)" % (
                len(ignored), ignored[-1].get("cgroup") or ignored[-1].get("oom_cgroup")))
        return result(name, True, 0, expected + note, "; ".join(said), "build")
    message = "%d OOM kill%s in the last %d min, %s" % (
        len(recent), "" if len(recent) == 1 else "s", minutes, describe_oom_kill(recent[-1], domain))
    return result(name, False, len(recent), expected + note, message, "build")
