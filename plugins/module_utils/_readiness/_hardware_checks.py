# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Profile ``node``: the node hardware checks of issue 37 item 3 (``d_state``, ``cpu_governor``, ``nvme_health``,
``ipmi_sel``, ``sensors``) over ``node.hardware``; each None when its option is off, *skipped* with the reason where the node cannot answer (no
cpufreq driver, no nvme-cli, no ipmitool or BMC), never failed for a missing tool. Registered in ``_policy.CHECKS``."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness._checks import printable, result, skipped, unknown
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness._checks import option as _option

PROFILE = "node"


def _part(facts, name, expected, part):
    """``(the part's facts, None)`` or ``(None, the check's answer)`` when it was not gathered or could not be read."""
    hardware = (facts.get("node") or {}).get("hardware")
    if not hardware or part not in hardware:
        return None, unknown(name, expected, "node hardware part %s was not gathered (node_facts node_hardware)" % part, PROFILE)
    entry = hardware[part]
    if entry.get("state") == "absent":
        return None, skipped(name, "%s: not applicable" % entry.get("message"), PROFILE)
    if entry.get("state") != "ok":
        return None, unknown(name, expected, entry.get("message") or "%s could not be read" % part, PROFILE)
    return entry, None


def check_d_state(facts, policy):
    name = "d_state"
    if not _option(policy, "check_d_state"):
        return None
    most = _option(policy, "max_d_state_processes")
    expected = "<= %d processes stuck in D state" % most
    entry, answer = _part(facts, name, expected, "d_state")
    if answer:
        return answer
    count = entry.get("count") or 0
    listed = ", ".join("%s (pid %s%s)" % (printable(str(p.get("name"))), p.get("pid"), ", in %s" % p["wchan"] if p.get("wchan") else "")
                       for p in entry.get("processes") or [])
    message = "" if count <= most else (
        "%d processes stuck in uninterruptible sleep (D state): %s: stuck on I/O (a hung NFS/Lustre mount, a failing "
        "disk, a wedged driver): check `dmesg` for hung-task and I/O errors and the mounts; they cannot be killed, "
        "a reboot clears them" % (count, listed))
    return result(name, count <= most, count, expected, message, PROFILE)


def check_cpu_governor(facts, policy):
    name = "cpu_governor"
    wanted = _option(policy, "expected_cpu_governor")
    if wanted in (None, "any"):
        return None
    expected = "every CPU on the %s governor" % wanted
    entry, answer = _part(facts, name, expected, "cpu_governor")
    if answer:
        return answer
    governors = entry.get("governors") or {}
    other = dict((governor, count) for governor, count in governors.items() if governor != wanted)
    message = "" if not other else (
        "%s: set `cpupower frequency-set -g %s` (or the tuned/BIOS power profile) on every CPU" % (
            ", ".join("%d CPUs on %s" % (count, printable(governor)) for governor, count in sorted(other.items())), wanted))
    return result(name, not other, governors, expected, message, PROFILE)


def _nvme_problems(dev, max_media):
    problems = []
    if dev.get("critical_warning"):
        problems.append("critical warning 0x%x" % dev["critical_warning"])
    spare, threshold = dev.get("available_spare"), dev.get("available_spare_threshold")
    if spare is not None and threshold is not None and spare < threshold:
        problems.append("spare %d%% below its threshold %d%%" % (spare, threshold))
    if (dev.get("percentage_used") or 0) >= 100:
        problems.append("%d%% of its rated life used" % dev["percentage_used"])
    if (dev.get("media_errors") or 0) > max_media:
        problems.append("%d media errors" % dev["media_errors"])
    return problems


def check_nvme_health(facts, policy):
    name = "nvme_health"
    if not _option(policy, "check_nvme"):
        return None
    max_media = _option(policy, "max_nvme_media_errors")
    expected = "no critical warning, spare above threshold, life < 100%%, <= %d media errors" % max_media
    entry, answer = _part(facts, name, expected, "nvme")
    if answer:
        return answer
    devices = entry.get("devices") or []
    unread = [dev for dev in devices if dev.get("error")]
    bad = []
    for dev in devices:
        problems = _nvme_problems(dev, max_media)
        if problems:
            bad.append("%s (%s) has %s" % (dev["name"], printable(str(dev.get("model"))), ", ".join(problems)))
    if not bad and unread:
        return unknown(name, expected, "; ".join("%s: %s" % (dev["name"], dev["error"]) for dev in unread), PROFILE)
    message = "" if not bad else "%s: back up what it holds and replace the drive (`nvme smart-log`, `nvme error-log`)" % "; ".join(bad)
    observed = dict((dev["name"], dict((key, dev.get(key)) for key in ("critical_warning", "available_spare",
                                                                       "percentage_used", "media_errors"))) for dev in devices)
    return result(name, not bad, observed, expected, message, PROFILE)


def check_ipmi_sel(facts, policy):
    name = "ipmi_sel"
    if not _option(policy, "check_ipmi_sel"):
        return None
    most = _option(policy, "max_sel_new_entries")
    expected = "<= %d new SEL entries since the previous run" % most
    entry, answer = _part(facts, name, expected, "ipmi_sel")
    if answer:
        return answer
    if entry.get("first_run"):
        return skipped(name, "first run: the %s SEL entries are recorded as the baseline for the next run" % entry.get("count"),
                       PROFILE)
    new = entry.get("new_count") or 0
    listed = entry.get("new") or []
    shown = "; ".join("%s %s: %s%s" % (e.get("when"), printable(str(e.get("sensor"))), printable(str(e.get("event"))),
                                       " (%s)" % e["direction"] if e.get("direction") else "")
                      for index, e in enumerate(listed) if index >= len(listed) - 3)
    message = "" if new <= most else (
        "%d new BMC event log entries since the previous run, latest: %s: read `ipmitool sel elist` (power supply, "
        "memory ECC, PCIe, thermal events) and fix the part it names; clear the SEL once handled" % (new, shown))
    return result(name, new <= most, new, expected, message, PROFILE)


def check_sensors(facts, policy):
    name = "sensors"
    if not _option(policy, "check_sensors"):
        return None
    expected = "no BMC sensor past a critical threshold"
    entry, answer = _part(facts, name, expected, "sensors")
    if answer:
        return answer
    past = [sensor for sensor in entry.get("sensors") or [] if sensor.get("status") in ("cr", "nr")]
    message = "" if not past else "%s: check the part, its cooling and power (`ipmitool sensor`)" % "; ".join(
        "%s at %s %s (%s)" % (printable(str(s.get("name"))), printable(str(s.get("value"))), printable(str(s.get("unit"))),
                              {"cr": "critical", "nr": "non-recoverable"}[s["status"]]) for s in past[:5])
    observed = dict((s["name"], s["status"]) for s in entry.get("sensors") or [])
    return result(name, not past, observed, expected, message, PROFILE)
