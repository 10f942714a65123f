# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side: the gpu profile's node-health checks (issue 30) -- PCIe link, temperature, clock events,
persistence and MIG mode from the one ``--query-gpu`` call; NVLink, NVSwitch fabric and the driver's recovery
action from the opt-in probes; and the Xid catalogue the fatal_xid check classes codes by.

Same contract as ``_gpu_build_checks``: ``check_<name>(facts, policy)`` is pure and returns ``result``,
``unknown``, ``skipped`` or ``None``. Every message names the GPU as an RMA ticket needs it: index, bus id, name,
serial and UUID.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re
import time

from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness._checks import result, skipped, unknown
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness._checks import option as _option
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _xid_catalogue

# NVIDIA's Xid catalogue lives in _xid_catalogue (issue 37); its names are re-exported here for the checks that read it.
XID_CATALOGUE = _xid_catalogue.XID_CATALOGUE
XID_ACTION_WORDS = _xid_catalogue.XID_ACTION_WORDS
classify_xid = _xid_catalogue.classify_xid

# What ``GPU Recovery Action`` (driver 570 and later) asks for; None is the healthy answer.
RECOVERY_ACTIONS_OK = ("none",)
FABRIC_STATE_HINTS = {
    "not started": "Fabric Manager has not started: start nvidia-fabricmanager (and nvlsm on B200 and later, "
                   "`nvidia-fabricmanager-start.sh`)",
    "in progress": "the GPU is still registering with the NVLink fabric: Fabric Manager (or NVLSM on B200 and later) "
                   "is not running or is stuck; check `systemctl status nvidia-fabricmanager` and its log",
}


def describe_gpu(dev):
    """``GPU 3 (00000000:9A:00.0, NVIDIA B200, serial 1654123038646, GPU-...)``: what an RMA ticket needs."""
    parts = [part for part in (dev.get("pci_bus_id"), dev.get("name")) if part]
    if dev.get("serial") and dev["serial"] not in ("0",):
        parts.append("serial %s" % dev["serial"])
    if dev.get("uuid"):
        parts.append(dev["uuid"])
    return "GPU %s (%s)" % (dev.get("index"), ", ".join(parts))


def _listed(devices, words, limit=3):
    """The first ``limit`` GPUs with what is wrong with each, then how many more."""
    shown = "; ".join("%s %s" % (describe_gpu(dev), text) for dev, text in list(zip(devices, words))[:limit])
    return shown + ("; and %d more" % (len(devices) - limit) if len(devices) > limit else "")


def usable_gpus(facts, name, expected):
    """``(gpus facts, None)`` when usable, else ``(None, unknown(...))`` saying why (every gpu check starts here)."""
    gpus = facts.get("gpus")
    if not gpus or "state" not in gpus:
        return None, unknown(name, expected, "gpus facts were not gathered", "gpu")
    if gpus["state"] != "ok":
        return None, unknown(name, expected, "nvidia-smi state is %s: %s" % (gpus["state"], gpus.get("message")), "gpu")
    if not gpus.get("devices"):
        return None, unknown(name, expected, "nvidia-smi listed no GPUs", "gpu")
    return gpus, None


# How a check whose probe timed out begins its (skipped) message; the node-local check shows such checks always.
NOT_COUNTED = "unknown, not counted against the node"


def _probe(gpus, probe, name, expected, timeout_fails):
    """``None`` when the probe answered, else the check's result: a timeout is named and, unless
    gpu_probe_timeout_fails, not counted against the node (reported with status skipped)."""
    entry = (gpus.get("probes") or {}).get(probe)
    if entry is None:
        return unknown(name, expected, "the %s probe was not run (node_facts without gpu_probes?)" % probe, "gpu")
    if entry.get("state") == "ok":
        return None
    if entry.get("state") == "timeout" and not timeout_fails:
        out = skipped(name, "", "gpu")
        out["message"] = "%s: %s (set preflight_gpu_probe_timeout_fails to fail on it)" % (NOT_COUNTED, entry.get("message"))
        out["expected"] = expected
        return out
    return unknown(name, expected, entry.get("message") or "probe %s failed" % probe, "gpu")


def _probed_gpus(facts, policy, name, expected, probes):
    """The probe checks' one start: ``(gpus, None)`` to judge, or ``(None, result)`` when there are no usable GPUs
    or one of ``probes`` did not answer (``_probe``)."""
    gpus, why = usable_gpus(facts, name, expected)
    if why:
        return None, why
    for probe in probes:
        answer = _probe(gpus, probe, name, expected, _option(policy, "gpu_probe_timeout_fails"))
        if answer:
            return None, answer
    return gpus, None


def check_pcie_link(facts, policy):
    name = "pcie_link"
    min_gen, min_width = _option(policy, "min_pcie_gen"), _option(policy, "min_pcie_width")
    expected = "busy GPUs at their max link" + "".join(
        ", max %s" % text for text in ("gen >= %s" % min_gen if min_gen else "", "width >= x%s" % min_width if min_width else "") if text)
    gpus, why = usable_gpus(facts, name, expected)
    if why:
        return why
    devices = gpus["devices"]
    if all(dev.get("pcie_gen_max") is None and dev.get("pcie_width_max") is None for dev in devices):
        return skipped(name, "the driver reports no PCIe link (pcie.link.* not supported)", "gpu")
    bad, words = [], []
    for dev in devices:
        problems = []
        if min_gen and dev.get("pcie_gen_max") is not None and dev["pcie_gen_max"] < min_gen:
            problems.append("can reach only PCIe gen %s, gen %s expected (slot, riser or BIOS setting)" % (dev["pcie_gen_max"], min_gen))
        if min_width and dev.get("pcie_width_max") is not None and dev["pcie_width_max"] < min_width:
            problems.append("can reach only x%s, x%s expected (seated in a narrower slot?)" % (dev["pcie_width_max"], min_width))
        # Links train down at idle to save power (gen 1 at P8): only a busy GPU is judged on its current link.
        busy = (dev.get("utilization_gpu") or 0) > 0 and "gpu_idle" not in (dev.get("clock_event_reasons") or [])
        if busy:
            for what, cur, top, unit in (("gen", "pcie_gen_current", "pcie_gen_max", "gen "), ("width", "pcie_width_current", "pcie_width_max", "x")):
                if dev.get(cur) is not None and dev.get(top) is not None and dev[cur] < dev[top]:
                    problems.append("runs at %s%s under load, below its max %s%s (link degraded: reseat, check the riser/"
                                    "cable, `lspci -vv` LnkSta)" % (unit, dev[cur], unit, dev[top]))
        if problems:
            bad.append(dev)
            words.append(" and ".join(problems))
    observed = dict((str(dev.get("index")), "gen %s/%s x%s/%s" % (
        dev.get("pcie_gen_current"), dev.get("pcie_gen_max"), dev.get("pcie_width_current"), dev.get("pcie_width_max")))
        for dev in devices)
    return result(name, not bad, observed, expected, _listed(bad, words) if bad else "", "gpu")


def check_gpu_temperature(facts, policy):
    name = "gpu_temperature"
    limit = _option(policy, "max_gpu_temperature")
    if limit is None:
        return None
    expected = "<= %d C" % limit
    gpus, why = usable_gpus(facts, name, expected)
    if why:
        return why
    read = [dev for dev in gpus["devices"] if dev.get("temperature") is not None]
    if not read:
        return skipped(name, "no GPU reports temperature.gpu", "gpu")
    hot = [dev for dev in read if dev["temperature"] > limit]
    observed = max(dev["temperature"] for dev in read)
    words = ["is at %d C: check the fans, airflow and inlet temperature, then `nvidia-smi -q -d TEMPERATURE`" % dev["temperature"]
             for dev in hot]
    return result(name, not hot, observed, expected, _listed(hot, words) if hot else "", "gpu")


def check_clock_events(facts, policy):
    name = "clock_events"
    bad_reasons = set(_option(policy, "bad_clock_event_reasons") or ())
    if not bad_reasons:
        return None
    expected = "none of %s" % ", ".join(sorted(bad_reasons))
    gpus, why = usable_gpus(facts, name, expected)
    if why:
        return why
    read = [dev for dev in gpus["devices"] if dev.get("clock_event_reasons") is not None]
    if not read:
        return skipped(name, "no GPU reports clock-event reasons", "gpu")
    bad = [dev for dev in read if bad_reasons & set(dev["clock_event_reasons"])]
    words = ["is slowed by %s: check cooling (thermal) and the power supply/brake signal (HW slowdown, power brake); "
             "`nvidia-smi -q -d PERFORMANCE`" % ", ".join(sorted(bad_reasons & set(dev["clock_event_reasons"]))) for dev in bad]
    observed = dict((str(dev.get("index")), dev["clock_event_reasons"]) for dev in read if dev["clock_event_reasons"])
    return result(name, not bad, observed, expected, _listed(bad, words) if bad else "", "gpu")


def check_persistence_mode(facts, policy):
    name = "persistence_mode"
    if not _option(policy, "require_persistence_mode"):
        return None
    expected = "persistence mode on"
    gpus, why = usable_gpus(facts, name, expected)
    if why:
        return why
    off = [dev for dev in gpus["devices"] if dev.get("persistence_mode") is False]
    if not off and all(dev.get("persistence_mode") is None for dev in gpus["devices"]):
        return skipped(name, "no GPU reports persistence_mode", "gpu")
    words = ["has persistence mode off: start nvidia-persistenced (or `nvidia-smi -pm 1`)"] * len(off)
    return result(name, not off, [dev.get("index") for dev in off], expected, _listed(off, words) if off else "", "gpu")


def check_mig_mode(facts, policy):
    name = "mig_mode"
    wanted = _option(policy, "mig_mode")
    if wanted in (None, "any"):
        return None
    expected = "MIG %s" % wanted
    gpus, why = usable_gpus(facts, name, expected)
    if why:
        return why
    capable = [dev for dev in gpus["devices"] if dev.get("mig_mode") is not None]
    if not capable:
        return skipped(name, "no GPU here supports MIG (mig.mode.current is N/A)", "gpu")
    wrong = [dev for dev in capable if dev["mig_mode"] != wanted]
    words = ["has MIG %s: `nvidia-smi -i %s -mig %d` (then reset the GPU), or set preflight_mig_mode"
             % (dev["mig_mode"], dev.get("index"), 1 if wanted == "enabled" else 0) for dev in wrong]
    return result(name, not wrong, dict((str(d.get("index")), d["mig_mode"]) for d in capable), expected,
                  _listed(wrong, words) if wrong else "", "gpu")


# Boards with NVLink, by the name nvidia-smi gives them -> links per GPU (None: has NVLink, count not pinned here).
# A GPU of these listed with no link is a board whose links are all down, never "a PCIe board". PCIe variants
# (``H100 PCIe``, ``A100-PCIE-40GB``) and NVL boards (bridges optional) are not in it.
NVLINK_MODELS = (
    (re.compile(r"\bV100-SXM2"), 6),
    (re.compile(r"\bA100-SXM4"), 12),
    (re.compile(r"\bA800-SXM4"), None),
    (re.compile(r"\bH100 (?:80GB HBM3|SXM)"), 18),
    (re.compile(r"\bH800\b(?!.*PCIe)"), None),
    (re.compile(r"\bH200\b(?!.*NVL)"), 18),
    (re.compile(r"\bG?B[123]00\b"), 18),
    (re.compile(r"\bGH200\b"), 18),
)


def nvlink_model(name):
    """``(has NVLink, links per GPU or None)`` for a GPU's name: ``(True, 18)`` for ``NVIDIA H100 80GB HBM3``."""
    for pattern, links in NVLINK_MODELS:
        if name and "PCIE" not in name.upper() and pattern.search(name):
            return True, links
    return False, None


def _nvlink_unknown(dev):
    """Why a GPU's NVLink cannot be judged (a probe did not list it, or printed what is no link), or None."""
    if dev.get("nvlink") is None:
        return "is not listed by `nvidia-smi nvlink -s`"
    if dev.get("nvlink_errors") is None:
        return "is not listed by `nvidia-smi nvlink -e` (error counters unknown)"
    if dev.get("nvlink_state") == "unreadable":
        return "gets %r from `nvidia-smi nvlink -s`" % dev.get("nvlink_note")
    return None


def _nvlink_problems(dev, peers_most, limit):
    """What is wrong with one listed GPU's links: down, fewer than its model (or its peers) has, error counters."""
    links = dev.get("nvlink") or {}
    has_nvlink, model_links = nvlink_model(dev.get("name"))
    problems = []
    if dev.get("nvlink_state") == "all_inactive":
        problems.append("has every NVLink link down (nvidia-smi: all links are inActive)")
    elif not links and has_nvlink:
        problems.append("lists no NVLink link, and a %s has %s: every link down" % (dev.get("name"), model_links or "NVLink"))
    else:
        down = sorted(link for link, speed in links.items() if speed is None)
        missing = max(model_links or 0, peers_most) - len(links)
        if down or missing > 0:
            problems.append("has NVLink %s down" % (", ".join("link %s" % link for link in down) if down else "%d links" % missing))
    counted = dict((link, sum(counters.values())) for link, counters in (dev.get("nvlink_errors") or {}).items())
    noisy = sorted(link for link, total in counted.items() if total > limit)
    if noisy:
        problems.append("counts errors on %s" % ", ".join("link %s (%d)" % (link, counted[link]) for link in noisy))
    return problems


def check_nvlink(facts, policy):
    name = "nvlink"
    if not _option(policy, "check_nvlink"):
        return None
    limit = _option(policy, "max_nvlink_errors")
    expected = "every NVLink link up, <= %d errors per link" % limit
    gpus, why = _probed_gpus(facts, policy, name, expected, ("nvlink_status", "nvlink_errors"))
    if why:
        return why
    devices = gpus["devices"]
    # "Not applicable" only where the probe listed every GPU alone and no model of them has NVLink.
    if all(dev.get("nvlink_state") == "none" and not nvlink_model(dev.get("name"))[0] for dev in devices):
        return skipped(name, "no NVLink on these GPUs (%s: a PCIe board): not applicable" % devices[0].get("name"), "gpu")
    unknown_devs = [dev for dev in devices if _nvlink_unknown(dev)]
    judged = [dev for dev in devices if dev not in unknown_devs]
    most = max([len(dev.get("nvlink") or {}) for dev in judged] or [0])
    bad, words = [], []
    for dev in judged:
        problems = _nvlink_problems(dev, most, limit)
        if problems:
            bad.append(dev)
            words.append(" and ".join(problems) + ": reset the GPU; if it persists check the NVLink bridge/baseboard "
                                                  "(`nvidia-smi nvlink -s -i %s`, `nvidia-smi nvlink -e -i %s`)" % (dev.get("index"), dev.get("index")))
    if not bad and unknown_devs:  # never healthy: a GPU nobody could see the links of
        return unknown(name, expected, _listed(unknown_devs, [_nvlink_unknown(dev) for dev in unknown_devs]), "gpu")
    observed = dict((str(dev.get("index")), "unknown" if dev in unknown_devs else "%d/%d up" % (
        sum(1 for s in (dev.get("nvlink") or {}).values() if s is not None), max(most, nvlink_model(dev.get("name"))[1] or 0)))
        for dev in devices)
    return result(name, not bad, observed, expected, _listed(bad, words) if bad else "", "gpu")


def check_fabric(facts, policy):
    name = "fabric"
    if not _option(policy, "check_fabric"):
        return None
    expected = "fabric state Completed, status Success"
    gpus, why = _probed_gpus(facts, policy, name, expected, ("query",))
    if why:
        return why
    devices = gpus["devices"]
    states = [(dev, (dev.get("query") or {})) for dev in devices]
    if all(summary.get("fabric_state") is None for _dev, summary in states):
        return skipped(name, "no NVSwitch fabric (Fabric State N/A on %s: a PCIe or NVLink-bridge board): not applicable"
                       % devices[0].get("name"), "gpu")
    bad, words = [], []
    for dev, summary in states:
        state, status = summary.get("fabric_state"), summary.get("fabric_status")
        if state is None:
            bad.append(dev)
            words.append("reports no fabric state while its peers do (`nvidia-smi -q -i %s | grep -A6 Fabric`)" % dev.get("index"))
        elif state.lower() != "completed":
            bad.append(dev)
            words.append("has fabric state %s: %s" % (state, FABRIC_STATE_HINTS.get(state.lower(), "check Fabric Manager")))
        elif (status or "").lower() != "success":
            bad.append(dev)
            words.append("completed fabric registration with status %s: restart Fabric Manager, then reset the GPUs" % status)
        elif (summary.get("fabric_health_summary") or "healthy").lower() not in ("healthy", "not supported"):
            bad.append(dev)
            words.append("has fabric health %s: check NVSwitch/NVLink health in the Fabric Manager log" % summary["fabric_health_summary"])
    observed = sorted(set("%s/%s" % (summary.get("fabric_state"), summary.get("fabric_status")) for _dev, summary in states))
    return result(name, not bad, observed, expected, _listed(bad, words) if bad else "", "gpu")


def check_gpu_recovery(facts, policy):
    name = "gpu_recovery"
    if not _option(policy, "check_gpu_recovery"):
        return None
    expected = "no reset required, recovery action None"
    gpus, why = _probed_gpus(facts, policy, name, expected, ("query",))
    if why:
        return why
    bad, words, reported = [], [], 0
    for dev in gpus["devices"]:
        summary = dev.get("query") or {}
        action = summary.get("recovery_action")
        flags = [text for key, text in (("reset_required", "reset required"),
                                        ("drain_and_reset_recommended", "drain and reset recommended")) if summary.get(key)]
        if action is not None or summary.get("reset_required") is not None:
            reported += 1
        if action is not None and action.lower() not in RECOVERY_ACTIONS_OK:
            flags.append("recovery action %s" % action)
        if flags:
            bad.append(dev)
            words.append("says %s: drain it, then `nvidia-smi -r -i %s` (a reboot when the action is Reboot)"
                         % (", ".join(flags), dev.get("index")))
    if not reported:
        return skipped(name, "the driver reports neither GPU Reset Status nor GPU Recovery Action", "gpu")
    return result(name, not bad, [dev.get("index") for dev in bad], expected, _listed(bad, words) if bad else "", "gpu")


def check_dcgm_diag(facts, policy):
    name = "dcgm_diag"
    if not _option(policy, "check_dcgm_diag"):
        return None
    timeout_fails = _option(policy, "gpu_probe_timeout_fails")
    expected = "dcgmi diag -r 1: no test failed"
    gpus, why = usable_gpus(facts, name, expected)
    if why:
        return why
    entry = (gpus.get("probes") or {}).get("dcgm_diag")
    if entry is not None and entry.get("state") in ("absent", "not_run"):
        return skipped(name, "%s: not applicable" % entry["message"] if entry["state"] == "absent" else entry["message"], "gpu")
    answer = _probe(gpus, "dcgm_diag", name, expected, timeout_fails)
    if answer:
        return answer
    tests = entry.get("tests") or []
    failed = [test for test in tests if test.get("result", "").lower() == "fail"]
    message = "; ".join("%s failed%s" % (test["test"], ": " + test["detail"] if test.get("detail") else "") for test in failed[:3])
    if failed:
        message += " (`dcgmi diag -r 1` for the full table; `-r 2` takes about 2 minutes)"
    return result(name, not failed, dict((t["test"], t["result"]) for t in tests), expected, message, "gpu")


def judge_kept(kept, max_age_hours, now, min_level=2, refresh=None):
    """``(ok, message)`` for the policy ``a passing DCGM level >= min_level result younger than max_age_hours``,
    from the kept record alone -- the diagnostic is never rerun by the check."""
    refresh = refresh or "run the dcgm_diag active test (dcgmi diag -r %d) on the idle node to refresh it" % min_level
    if not isinstance(kept, dict) or kept.get("verified_at") is None:
        return False, "no DCGM level-%d result is kept on the node: %s" % (min_level, refresh)
    try:
        verified, until, level = float(kept["verified_at"]), float(kept.get("valid_until") or 0), int(kept.get("level") or 0)
    except (TypeError, ValueError):
        return False, "the kept DCGM result is not readable: %s" % refresh
    age = (now - verified) / 3600.0
    if level < min_level:
        return False, "the kept DCGM result is level %d, level %d is required: %s" % (level, min_level, refresh)
    if now > until or age > float(max_age_hours):
        return False, "the kept DCGM level-%d result expired (%.1f h old, %s h allowed): %s" % (
            level, age, max_age_hours, refresh)
    if not kept.get("passed"):
        names = ", ".join("%s on GPU %s: %s" % (row.get("test"), row.get("gpu"), row.get("detail") or "failed")
                          for row in (kept.get("failures") or [])[:3])
        return False, "DCGM level-%d diagnostic failed %.1f h ago: %s; drain the node and hand it to hardware triage" % (
            level, age, names or "a test failed")
    return True, "DCGM level-%d diagnostic passed %.1f h ago (valid %s h)" % (level, age, max_age_hours)


def check_dcgm_result(facts, policy, now=time.time):
    """A passing DCGM level >= ``dcgm_result_min_level`` result younger than ``dcgm_result_max_age`` hours, from the
    record the active test kept on the node (issue 37 item 2): read, never rerun."""
    name = "dcgm_result"
    max_age = _option(policy, "dcgm_result_max_age")
    if not max_age:
        return None
    level = _option(policy, "dcgm_result_min_level") or 2
    expected = "a passing DCGM level-%d result younger than %s h" % (level, max_age)
    gpus, why = usable_gpus(facts, name, expected)
    if why:
        return why
    kept = gpus.get("dcgm_result") or {}
    ok, message = judge_kept(kept.get("record"), max_age, now(), level,
                             "run the dcgm_diag active test on the idle node to refresh %s (ansible-playbook "
                             "gpufleet.preflight.active_tests -e active_tests_dcgm_level=%d: dcgmi diag -r %d -j)"
                             % (kept.get("path") or "its result", level, level))
    record = kept.get("record") or {}
    return result(name, ok, {"verified_at": record.get("verified_at"), "valid_until": record.get("valid_until"),
                             "level": record.get("level")}, expected, "" if ok else message, "gpu")


def judge_bandwidth_kept(test, kept, max_age_hours, now):
    """``None`` when ``test``'s kept record is a pass younger than ``max_age_hours``, else what is wrong with it."""
    if not isinstance(kept, dict) or kept.get("verified_at") is None:
        return "%s: no result is kept on the node" % test
    try:
        verified, until = float(kept["verified_at"]), float(kept.get("valid_until") or 0)
    except (TypeError, ValueError):
        return "%s: the kept result is not readable" % test
    age = (now - verified) / 3600.0
    if now > until or age > float(max_age_hours):
        return "%s: the kept result expired (%.1f h old, %s h allowed)" % (test, age, max_age_hours)
    if not kept.get("passed"):
        return "%s failed %.1f h ago: %s" % (test, age, "; ".join(map(str, (kept.get("failures") or ["a test failed"])[:3])))
    if kept.get("judged") is False:
        return "%s was kept %.1f h ago without a verdict: no floor is published for this GPU model and none was given" % (test, age)
    return None


def check_bandwidth_result(facts, policy, now=time.time):
    """A passing result of each bandwidth active test (nvbandwidth, all_reduce_perf) younger than
    ``bandwidth_result_max_age`` hours, from the records the active test kept on the node (issue 37 item 2)."""
    name = "bandwidth_result"
    max_age = _option(policy, "bandwidth_result_max_age")
    if not max_age:
        return None
    tests = list(_option(policy, "bandwidth_result_tests") or [])
    expected = "a passing %s result younger than %s h" % (" and ".join(tests), max_age)
    gpus, why = usable_gpus(facts, name, expected)
    if why:
        return why
    kept = gpus.get("bandwidth_results") or {}
    problems = [problem for problem in (judge_bandwidth_kept(test, (kept.get(test) or {}).get("record"), max_age, now())
                                        for test in tests) if problem]
    observed = dict((test, ((kept.get(test) or {}).get("record") or {}).get("passed")) for test in tests)
    refresh = ("run the bandwidth active tests on the idle node to refresh them (ansible-playbook gpufleet.preflight.active_tests "
               "-e '{\"active_tests\": %s}'; give min_*_bandwidth where no floor is published)" % json.dumps(tests))
    message = "; ".join(problems) + ": " + refresh if problems else ""
    return result(name, not problems, observed, expected, message, "gpu")
