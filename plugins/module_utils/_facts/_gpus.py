# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``nvidia-smi`` output -> ``gpufleet_gpus``.

Pure parsers first (CSV text -> devices); ``collect_gpus`` at the bottom runs ``nvidia-smi`` with a
timeout, because a wedged driver makes it hang, and degrades field by field when an older driver
rejects a field it does not know.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufleet.preflight.plugins.module_utils._human import human
from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _dcgm_deep, _gpu_probes
from ansible_collections.gpufleet.preflight.plugins.module_utils._run import did_not_exit, find_executable, run_with_timeout, search_path, side_by_side

# (nvidia-smi field, key in a device). Order is the column order of the query.
QUERY_FIELDS = (
    ("index", "index"),
    ("name", "name"),
    ("uuid", "uuid"),
    ("compute_cap", "compute_capability"),
    ("driver_version", "driver_version"),
    ("pci.bus_id", "pci_bus_id"),
    ("memory.total", "memory_total"),
    ("memory.used", "memory_used"),
    ("temperature.gpu", "temperature"),
    ("power.draw", "power_draw_watts"),
    ("ecc.errors.uncorrected.volatile.total", "ecc_uncorrected"),
    ("remapped_rows.pending", "remapped_rows_pending"),
    ("remapped_rows.failure", "remapped_rows_failure"),
    ("clocks_event_reasons.active", "clock_event_reasons"),
    ("persistence_mode", "persistence_mode"),
    # Issue 30: RMA identity, PCIe link (max = what GPU and slot can train to), load (links train down at idle), MIG.
    ("serial", "serial"),
    ("pcie.link.gen.current", "pcie_gen_current"),
    ("pcie.link.gen.max", "pcie_gen_max"),
    ("pcie.link.width.current", "pcie_width_current"),
    ("pcie.link.width.max", "pcie_width_max"),
    ("utilization.gpu", "utilization_gpu"),
    ("mig.mode.current", "mig_mode"),
)
COMPUTE_APPS_FIELDS = ("gpu_uuid", "pid", "process_name", "used_memory")

# Renamed in driver 535.54.03; older drivers only know the throttle name.
FIELD_FALLBACKS = {"clocks_event_reasons.active": "clocks_throttle_reasons.active"}

# nvidia-smi exit codes worth naming (nvidia-smi(1), RETURN VALUE).
EXIT_STATES = {
    9: ("driver_not_loaded", "the NVIDIA driver is not loaded: check `lsmod | grep nvidia` and `dmesg | grep NVRM`"),
    12: ("nvml_missing", "the NVML shared library (libnvidia-ml.so) was not found: reinstall the driver's user-space libraries"),
    14: ("inforom_corrupt", "a GPU's infoROM is corrupted: the board needs service"),
    15: ("gpu_lost", "a GPU has fallen off the bus: check `dmesg` for Xid 79 and reseat or reset the GPU"),
}

# NVML clocks event reason bits (nvml.h nvmlClocksEventReason*).
CLOCK_EVENT_REASONS = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
)

# Where drivers put nvidia-smi when it is not on a non-login PATH (containers, Ansible's minimal env).
DEFAULT_SEARCH_DIRS = ("/usr/bin", "/usr/local/nvidia/bin", "/usr/local/bin", "/usr/sbin", "/usr/local/sbin", "/opt/nvidia/bin", "/bin")

_MISSING_VALUES = ("", "[n/a]", "n/a", "[not supported]", "not supported", "[unknown error]", "[insufficient permissions]")
_INVALID_FIELD_RE = re.compile(r'Field "([^"]+)" is not a valid field to query', re.IGNORECASE)
_CUDA_VERSION_RE = re.compile(r"CUDA Version\s*:\s*([0-9]+\.[0-9]+)")
_DRIVER_VERSION_RE = re.compile(r"(?:DRIVER version|Driver Version)\s*:\s*([0-9][0-9.]*)")
_MIB = 2 ** 20
# No field nvidia-smi prints comes near this (MiB, watts, counts); past it a field is garbage, read as unknown.
NUMBER_LIMIT = 2.0 ** 53
_NUMBER_RE = re.compile(r"^-?[0-9]{1,400}(?:\.[0-9]{1,400})?")


def parse_value(text):
    """One CSV cell: ``[N/A]``, ``[Not Supported]``, ``N/A`` and empty -> None, else the stripped text."""
    if text is None:
        return None
    cleaned = text.strip()
    if cleaned.lower() in _MISSING_VALUES:
        return None
    return cleaned


def _number(text, kind=int):
    """``97887``, ``97887 MiB``, ``24.12 W`` -> number (units are dropped: nounits may be ignored by old drivers)."""
    value = parse_value(text)
    if value is None:
        return None
    match = _NUMBER_RE.match(value)
    if not match:
        return None
    number = float(match.group(0))
    if not -NUMBER_LIMIT < number < NUMBER_LIMIT:   # a 400-digit field: int(inf) would raise OverflowError
        return None
    return int(number) if kind is int else kind(number)


def _flag(text):
    """``Enabled``/``Yes``/``1`` -> True, ``Disabled``/``No``/``0`` -> False, unknown -> None."""
    value = parse_value(text)
    if value is None:
        return None
    lowered = value.lower()
    if lowered in ("enabled", "yes", "true", "1", "active"):
        return True
    if lowered in ("disabled", "no", "false", "0", "not active"):
        return False
    return None


def _mig(text):
    """``Enabled``/``Disabled`` -> 'enabled'/'disabled'; ``[N/A]`` (a board without MIG) -> None."""
    value = _flag(text)
    return None if value is None else ("enabled" if value else "disabled")


def decode_clock_event_reasons(text):
    """``0x0000000000000005`` -> ``(['gpu_idle', 'sw_power_cap'], '0x0000000000000005')``; unknown bits as ``bit_0x...``."""
    raw = parse_value(text)
    if raw is None:
        return None, None
    try:
        mask = int(raw, 16)
    except ValueError:
        return None, raw
    names = [name for bit, name in CLOCK_EVENT_REASONS if mask & bit]
    known = 0
    for bit, _name in CLOCK_EVENT_REASONS:
        known |= bit
    if mask & ~known:
        names.append("bit_0x%x" % (mask & ~known))
    return names, raw


def split_csv_line(line):
    """nvidia-smi CSV cells: comma + space separated, never quoted; GPU names contain no commas."""
    return [cell.strip() for cell in line.split(",")]


# The device keys read straight from their own ``--query-gpu`` cell, each with its parser (memory and clock-event
# reasons are derived in device_from_row).
_PARSED = (
    ("index", _number), ("name", parse_value), ("uuid", parse_value), ("pci_bus_id", parse_value),
    ("compute_capability", parse_value), ("driver_version", parse_value), ("temperature", _number),
    ("power_draw_watts", lambda text: _number(text, float)), ("ecc_uncorrected", _number),
    ("remapped_rows_pending", _flag), ("remapped_rows_failure", _flag), ("persistence_mode", _flag),
    ("serial", parse_value), ("pcie_gen_current", _number), ("pcie_gen_max", _number),
    ("pcie_width_current", _number), ("pcie_width_max", _number), ("utilization_gpu", _number), ("mig_mode", _mig),
)


def device_from_row(cells, fields):
    """One ``--query-gpu`` row (``cells`` in the order of ``fields``, nvidia-smi names) -> a device dict."""
    by_field = dict(zip(fields, cells))
    raw = dict((key, by_field.get(field)) for field, key in QUERY_FIELDS)
    if raw["clock_event_reasons"] is None and "clocks_throttle_reasons.active" in by_field:
        raw["clock_event_reasons"] = by_field["clocks_throttle_reasons.active"]
    total = _number(raw["memory_total"])
    used = _number(raw["memory_used"])
    reasons, reasons_raw = decode_clock_event_reasons(raw["clock_event_reasons"])
    device = dict((key, parse(raw[key])) for key, parse in _PARSED)
    device.update({
        "memory_total_bytes": None if total is None else total * _MIB,
        "memory_total_human": None if total is None else human(total * _MIB),
        "memory_used_bytes": None if used is None else used * _MIB,
        "memory_used_human": None if used is None else human(used * _MIB),
        "clock_event_reasons": reasons,
        "clock_event_reasons_raw": reasons_raw,
        "compute_apps": [],
    })
    return device


def parse_query_gpu(text, fields):
    """``--query-gpu=<fields> --format=csv,noheader,nounits`` output -> list of devices; ValueError on a short row."""
    devices = []
    for line in text.splitlines():
        if not line.strip():
            continue
        cells = split_csv_line(line)
        if len(cells) != len(fields):
            raise ValueError("expected %d columns (%s), got %d: %r" % (len(fields), ",".join(fields), len(cells), line))
        devices.append(device_from_row(cells, fields))
    return devices


def parse_compute_apps(text):
    """``--query-compute-apps=gpu_uuid,pid,process_name,used_memory`` -> ``{uuid: [{pid, name, used_memory_bytes}]}``."""
    apps = {}
    for line in text.splitlines():
        if not line.strip() or line.lower().startswith("no running"):
            continue
        cells = split_csv_line(line)
        if len(cells) < len(COMPUTE_APPS_FIELDS):
            continue
        # A process name could contain a comma: everything between pid and the last cell is the name.
        uuid, pid, name, used = cells[0], cells[1], ", ".join(cells[2:-1]), cells[-1]
        used_mib = _number(used)
        apps.setdefault(uuid, []).append({
            "pid": _number(pid),
            "name": parse_value(name),
            "used_memory_bytes": None if used_mib is None else used_mib * _MIB,
        })
    return apps


def invalid_field(text):
    """The field named by ``Field "x" is not a valid field to query.``, or None."""
    match = _INVALID_FIELD_RE.search(text or "")
    return match.group(1) if match else None


def parse_cuda_version(text):
    """``CUDA Version: 12.8`` (header of plain nvidia-smi) or ``CUDA Version : 13.0`` (``--version``) -> '12.8'."""
    match = _CUDA_VERSION_RE.search(text or "")
    return match.group(1) if match else None


def state_for_exit(rc):
    """nvidia-smi's exit code -> (state, hint)."""
    return EXIT_STATES.get(rc, ("error", "nvidia-smi exited with %s" % rc))


def _first_line(text):
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


def timeout_message(timeout, stderr):
    """What a timed-out nvidia-smi means: killed, or still there in D state (the run gave up on it)."""
    if did_not_exit(stderr):
        return ("nvidia-smi did not exit (D state: the driver is wedged): no answer within %ss and SIGKILL did not end "
                "it; it was left behind (%s). Check `dmesg | grep -i xid`; a GPU reset or a reboot is needed"
                % (timeout, stderr.strip()))
    return ("nvidia-smi did not answer within %ss and was killed: the driver may be wedged; "
            "check `dmesg | grep -i xid` and consider a GPU reset or reboot" % timeout)


def empty_gpus(state, message, path=None):
    """The shape of ``gpufleet_gpus`` when no device could be listed."""
    return {
        "present": False,
        "state": state,
        "message": message,
        "nvidia_smi": path,
        "driver_version": None,
        "cuda_version": None,
        "count": 0,
        "unsupported_fields": [],
        "devices": [],
        "probes": {},
    }


def attach_probes(facts, results):
    """Probe results -> ``facts['probes']`` (state, seconds, command, message) and, per device, what each probe saw:
    ``nvlink`` (link -> GB/s or None when down) and ``nvlink_errors`` by UUID, the ``-q`` summary by bus id. A
    device a probe did not answer for keeps None: unknown, never healthy."""
    facts["probes"] = dict((name, dict((k, v) for k, v in entry.items() if k != "gpus")) for name, entry in results.items())
    status = (results.get("nvlink_status") or {}).get("gpus")
    errors = (results.get("nvlink_errors") or {}).get("gpus")
    query = dict((_gpu_probes.normal_bus_id(bus), summary) for bus, summary in ((results.get("query") or {}).get("gpus") or {}).items())
    for dev in facts["devices"]:
        if "nvlink_status" in results:
            # A GPU the probe did not list is unknown (None), never "no links": only the probe's own "none" says that.
            listed = (status or {}).get(dev["uuid"])
            dev["nvlink"] = None if listed is None else listed["links"]
            dev["nvlink_state"] = None if listed is None else listed["state"]
            dev["nvlink_note"] = None if listed is None else listed.get("note")
        if "nvlink_errors" in results:
            dev["nvlink_errors"] = (errors or {}).get(dev["uuid"])
        if "query" in results:
            summary = query.get(_gpu_probes.normal_bus_id(dev["pci_bus_id"])) if results["query"].get("gpus") is not None else None
            dev["query"] = summary
            if summary and not dev.get("serial"):
                dev["serial"] = summary.get("serial")


# ---- I/O below: runs nvidia-smi ------------------------------------------------------------------------


def query_devices(run, smi, timeout, fields=None):
    """Run ``--query-gpu``, dropping fields the driver rejects; ``(rc, devices, fields_used, unsupported, stdout, stderr)``.

    ``rc`` None is a timeout. A rejected ``clocks_event_reasons.active`` is retried under its pre-535 name.
    """
    fields = list(fields or [field for field, _key in QUERY_FIELDS])
    unsupported = []
    while True:
        argv = [smi, "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"]
        rc, out, err = run(argv, timeout)
        if rc is None:
            return None, [], fields, unsupported, out, err
        rejected = invalid_field(out) or invalid_field(err)
        if rejected and rejected in fields:
            fallback = FIELD_FALLBACKS.get(rejected)
            position = fields.index(rejected)
            unsupported.append(rejected)
            if fallback and fallback not in fields and fallback not in unsupported:
                fields[position] = fallback
            else:
                del fields[position]
            if not fields:
                return rc, [], fields, unsupported, out, err
            continue
        if rc != 0:
            return rc, [], fields, unsupported, out, err
        return rc, parse_query_gpu(out, fields), fields, unsupported, out, err


def cuda_version(run, smi, timeout):
    """The CUDA version the driver supports, from ``nvidia-smi --version`` or, before that existed, its table header."""
    ver_rc, ver_out, _ver_err = run([smi, "--version"], timeout)
    cuda = parse_cuda_version(ver_out) if ver_rc == 0 else None
    if cuda is None and ver_rc is not None:
        plain_rc, plain_out, _plain_err = run([smi], timeout)
        cuda = parse_cuda_version(plain_out) if plain_rc == 0 else None
    return cuda


def collect_gpus(run=run_with_timeout, timeout=10, search_paths=None, probes=(), probe_timeout=5, probe_budget=20,
                 dcgm_diag_timeout=None, dcgm_result_path=None, bandwidth_result_paths=None):
    """``gpufleet_gpus``: devices from nvidia-smi, or why there are none (``present: false`` and a ``state``).

    ``run(argv, timeout) -> (rc, stdout, stderr)`` with rc None on timeout; ``search_paths`` default to PATH then
    the usual driver locations. ``probes`` (names in ``_gpu_probes.PROBES``) run after the device query, side by
    side with the compute-apps query, each within ``probe_timeout`` and all within ``probe_budget`` seconds.
    ``dcgm_diag_timeout`` set: ``dcgmi diag -r 1`` runs after them when no process uses the GPUs.
    ``dcgm_result_path`` set: the result the DCGM active test kept there is read (``dcgm_result``), never rerun;
    ``bandwidth_result_paths`` ({test: path}): the bandwidth tests' kept results (``bandwidth_results``), the same way.
    """
    dirs = list(search_paths) if search_paths is not None else search_path(DEFAULT_SEARCH_DIRS)
    smi = find_executable("nvidia-smi", dirs)
    if smi is None:
        where = "on PATH or in %s" % ", ".join(DEFAULT_SEARCH_DIRS) if search_paths is None else "in %s" % ", ".join(dirs)
        return empty_gpus("not_found", "nvidia-smi not found %s: is the NVIDIA driver installed?" % where)
    try:
        rc, devices, _fields, unsupported, out, err = query_devices(run, smi, timeout)
    except ValueError as exc:
        facts = empty_gpus("error", "could not parse nvidia-smi --query-gpu output: %s" % exc, smi)
        return facts
    if rc is None:
        return empty_gpus("timeout", timeout_message(timeout, err), smi)
    if rc != 0:
        state, hint = state_for_exit(rc)
        detail = _first_line(err) or _first_line(out)
        facts = empty_gpus(state, "%s (%s)" % (hint, detail) if detail else hint, smi)
        facts["unsupported_fields"] = unsupported
        return facts

    facts = empty_gpus("ok", "%d GPU%s listed by nvidia-smi" % (len(devices), "" if len(devices) == 1 else "s"), smi)
    facts.update(present=bool(devices), count=len(devices), devices=devices, unsupported_fields=unsupported)
    if unsupported:
        facts["message"] += "; fields this driver does not know: %s" % ", ".join(unsupported)
    facts["driver_version"] = next((dev["driver_version"] for dev in devices if dev["driver_version"]), None)

    # Each nvidia-smi call initialises NVML for every GPU (tenths of a second on an 8-GPU node): once the
    # device query has answered, ask for the compute apps and the CUDA version side by side.
    calls = {"apps": lambda: run([smi, "--query-compute-apps=" + ",".join(COMPUTE_APPS_FIELDS),
                                  "--format=csv,noheader,nounits"], timeout),
             "cuda": lambda: cuda_version(run, smi, timeout)}
    if probes:
        calls["probes"] = lambda: _gpu_probes.run_probes(run, smi, probes, probe_timeout, probe_budget)
    answers = side_by_side(calls)
    app_rc, app_out, app_err = answers["apps"]
    facts["cuda_version"] = answers["cuda"]
    if probes:
        attach_probes(facts, answers["probes"])
    if app_rc == 0:
        apps = parse_compute_apps(app_out)
        for dev in devices:
            dev["compute_apps"] = apps.get(dev["uuid"], [])
    else:
        # Unknown, not empty: a check must not read "no processes" from a failed query.
        for dev in devices:
            dev["compute_apps"] = None
        facts["message"] += "; compute apps unknown (%s)" % (
            "timed out" if app_rc is None else _first_line(app_err) or _first_line(app_out) or "exit %s" % app_rc)

    if dcgm_diag_timeout and devices:
        apps = [app for dev in devices for app in (dev["compute_apps"] or ())]
        busy = ("compute processes could not be listed" if any(dev["compute_apps"] is None for dev in devices) else
                "%d process%s on the GPUs" % (len(apps), "" if len(apps) == 1 else "es") if apps else "")
        dcgmi = find_executable("dcgmi", dirs)
        facts["probes"]["dcgm_diag"] = _gpu_probes.run_dcgm_diag(run, dcgmi, busy, dcgm_diag_timeout)
    if dcgm_result_path:
        facts["dcgm_result"] = {"path": dcgm_result_path, "record": _dcgm_deep.load_kept(dcgm_result_path)}
    if bandwidth_result_paths:
        facts["bandwidth_results"] = dict((test, {"path": path, "record": _dcgm_deep.load_kept(path)})
                                          for test, path in sorted(bandwidth_result_paths.items()))
    if not devices:
        facts["state"] = "ok"
        facts["message"] = "nvidia-smi ran but listed no GPUs"
    return facts
