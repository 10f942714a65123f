# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Bandwidth active tests (issue 37 item 2): NVIDIA's ``nvbandwidth`` (host<->device copy per GPU, and device<->device
where GPUs are NVLinked) and nccl-tests' ``all_reduce_perf`` on every GPU of the node (bus bandwidth), run like the
DCGM diagnostic only on an idle node, within a budget, the result kept with ``verified_at`` / ``valid_until``.

Neither tool judges its own numbers, so the verdict is against a floor: the option the user gives, else the figure
published for the GPU model (``PUBLISHED``: Azure's node health checks, which run these same tools on these GPUs), else
none - the numbers are kept and said, with no verdict. Pure parsers and decisions first; the run last."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import time

from ansible_collections.gpufleet.preflight.plugins.module_utils._constants import ACTIVE_RESULT_DIR, ACTIVE_RESULT_FILES
from ansible_collections.gpufleet.preflight.plugins.module_utils._values import non_finite

H2D, D2H, P2P = "host_to_device_memcpy_ce", "device_to_host_memcpy_ce", "device_to_device_memcpy_read_ce"
TESTS = ("nvbandwidth", "nccl_all_reduce")
RESULT_DIR, RESULT_FILES = ACTIVE_RESULT_DIR, ACTIVE_RESULT_FILES
STATE_FILES = dict((test, RESULT_DIR + "/" + name) for test, name in RESULT_FILES.items() if test != "dcgm_diag")
# The size the published all-reduce figures are measured at: one 16 GiB message per GPU (send and receive buffers).
ALL_REDUCE_BYTES = "16G"

# (GPU name pattern, floors in GB/s, where they are published). host: each GPU's host->device and device->host copy;
# peer: each NVLinked pair's device->device read; bus: all_reduce_perf's bus bandwidth at 16 GiB on all the GPUs.
PUBLISHED = (
    (r"H100 80GB HBM3", dict(host=48.0, peer=335.0, bus=460.0),
     "Azure HPC node health checks, conf/nd96isr_h100_v5.conf (check_gpu_bw 48 335, check_nccl_allreduce 460.0 1 16G)"),
    (r"H200(?! NVL)", dict(host=48.0, peer=335.0, bus=431.0),
     "Azure HPC node health checks, conf/nd96isr_h200_v5.conf (check_gpu_bw 48 335, check_nccl_allreduce 431.0 1 16G)"),
    (r"GB200", dict(host=48.0, peer=335.0, bus=432.0),
     "Azure HPC node health checks, conf/nd128isr_ndr_gb200_v6.conf (check_gpu_bw 48 335, check_nccl_allreduce 432.0 1 16G)"),
)


def _number(text):
    try:
        value = float(text)
    except ValueError:
        return None
    return None if non_finite(value) else value


def parse_nvbandwidth(text):
    """``nvbandwidth`` output -> ``{testcase: {"sum": GB/s or None, "rows": [[GB/s or None, ...], ...]}}``: each
    testcase's matrix as printed (row = source, column = destination; ``N/A`` on the diagonal is None). Raises
    ValueError when no testcase ran."""
    cases, current, state = {}, None, None   # state: "header" (the column numbers come next), "rows", None
    for line in (text or "").splitlines():
        words = line.split()
        if line.startswith("Running ") and len(words) > 1:
            current, state = words[1].rstrip("."), None
            cases[current] = {"sum": None, "rows": []}
        elif current is None or not words:
            state = None if state == "rows" else state
        elif "bandwidth (GB/s)" in line:
            state = "header"
        elif words[0] == "SUM" and len(words) >= 3 and words[1] == current:
            cases[current]["sum"], state = _number(words[2]), None
        elif state == "header":
            state = "rows"
        elif state == "rows" and words[0].isdigit() and len(words) > 1:
            cases[current]["rows"].append([_number(word) for word in words[1:]])
    if not cases:
        raise ValueError("no testcase ran")
    return cases


def parse_all_reduce(text):
    """``all_reduce_perf`` output -> ``{"rows": [{"bytes", "busbw", "wrong"}], "avg_busbw", "out_of_bounds"}``: a
    row per message size, its bus bandwidth the lower of out-of-place and in-place (GB/s), ``wrong`` their errors.
    Raises ValueError when no size was measured."""
    rows, average, out_of_bounds = [], None, None
    for line in (text or "").splitlines():
        line = re.sub(r"^\[\d+,\d+\]<stdout>:", "", line).strip()   # mpirun's prefix, when run under MPI
        if line.startswith("# Avg bus bandwidth"):
            average = _number(line.split(":", 1)[1].split()[0]) if line.split(":", 1)[1].split() else None
        elif line.startswith("# Out of bounds values"):
            found = re.search(r":\s*(\d+)", line)
            out_of_bounds = int(found.group(1)) if found else None
        elif line and not line.startswith("#"):
            words = line.split()
            # size count type redop root | time algbw busbw #wrong (out-of-place) | the same in-place
            if len(words) >= 9 and words[0].isdigit() and words[1].isdigit():
                numbers = [_number(word) for word in words[5:]]
                bus = [numbers[i] for i in (2, 6) if i < len(numbers) and numbers[i] is not None]
                wrong = sum(int(numbers[i]) for i in (3, 7) if i < len(numbers) and numbers[i] is not None)
                if bus:
                    rows.append({"bytes": int(words[0]), "busbw": min(bus), "wrong": wrong})
    if not rows:
        raise ValueError("no message size was measured")
    return {"rows": rows, "avg_busbw": average, "out_of_bounds": out_of_bounds}


def floors_for(gpu_name, given):
    """``(floors, source)``: the user's (``given``: host / peer / bus, None where not set) over the figures published
    for this GPU model; source None when neither says anything (the numbers are then kept without a verdict)."""
    published, source = {}, None
    for pattern, floors, where in PUBLISHED:
        if re.search(pattern, gpu_name or ""):
            published, source = dict(floors), where
            break
    mine = dict((key, float(value)) for key, value in (given or {}).items() if value is not None)
    if mine:
        source = "the options (%s)%s" % (", ".join("min_%s_bandwidth" % key for key in sorted(mine)),
                                         "; the rest from " + source if source and set(published) - set(mine) else "")
    published.update(mine)
    return published, source


def judge_nvbandwidth(cases, floors):
    """Failures (strings): each GPU whose host copy, each NVLinked pair whose peer read is under its floor."""
    failed = []
    for case, direction in ((H2D, "host to GPU %d"), (D2H, "GPU %d to host")):
        rows = (cases.get(case) or {}).get("rows") or []
        if floors.get("host") is not None and rows:
            for gpu, value in enumerate(rows[0]):
                if value is not None and value < floors["host"]:
                    failed.append("%s: %.1f GB/s, under %.0f" % (direction % gpu, value, floors["host"]))
    for source, row in enumerate((cases.get(P2P) or {}).get("rows") or []):
        for peer, value in enumerate(row):
            if floors.get("peer") is not None and value is not None and source != peer and value < floors["peer"]:
                failed.append("GPU %d to GPU %d: %.1f GB/s, under %.0f" % (source, peer, value, floors["peer"]))
    return failed


def judge_all_reduce(parsed, floors):
    """Failures (strings): data errors, and the bus bandwidth at the largest size under the floor."""
    largest = max(parsed["rows"], key=lambda row: row["bytes"])
    failed = []
    if parsed.get("out_of_bounds") or any(row["wrong"] for row in parsed["rows"]):
        failed.append("all_reduce returned wrong data (%s values out of bounds)" % (parsed.get("out_of_bounds") or "some"))
    if floors.get("bus") is not None and largest["busbw"] < floors["bus"]:
        failed.append("bus bandwidth %.1f GB/s at %d MiB, under %.0f" % (largest["busbw"], largest["bytes"] >> 20, floors["bus"]))
    return failed


def command(test, executable, gpu_count, nvlinked):
    """The argv of one test: nvbandwidth's host copies (and peer reads where the GPUs are NVLinked: over PCIe the
    published floors do not apply), all_reduce_perf at 16 GiB on all the node's GPUs in one process."""
    if test == "nvbandwidth":
        return [executable, "-t", H2D, D2H] + ([P2P] if nvlinked else [])
    return [executable, "-b", ALL_REDUCE_BYTES, "-e", ALL_REDUCE_BYTES, "-g", str(max(1, int(gpu_count)))]


def measured(test, parsed):
    """What the kept record shows of the numbers: per-GPU host copies, the lowest peer read; the bus bandwidths."""
    if test == "nvbandwidth":
        host = dict((case, ((parsed.get(case) or {}).get("rows") or [[]])[0]) for case in (H2D, D2H))
        peers = [value for row in (parsed.get(P2P) or {}).get("rows") or [] for value in row if value is not None]
        return {"host_to_gpu": host[H2D], "gpu_to_host": host[D2H], "lowest_peer": min(peers) if peers else None}
    return {"busbw_by_bytes": dict((str(row["bytes"]), row["busbw"]) for row in parsed["rows"]),
            "avg_busbw": parsed.get("avg_busbw")}


def kept_result(test, argv, parsed, failed, floors, source, seconds, now, valid_hours):
    """The record kept on the node, the shape of the DCGM one: the verdict, the numbers, when and until when."""
    return {"test": test, "command": " ".join(argv), "passed": not failed, "judged": source is not None,
            "floors": floors, "floors_source": source, "measured": measured(test, parsed), "failures": failed,
            "seconds": seconds, "verified_at": round(now, 3), "valid_until": round(now + float(valid_hours) * 3600, 3)}


def _said(entry, state, message):
    entry.update(state=state, message=message)
    return entry


def run_bandwidth_test(run, test, executable, busy, params, gpus, save, now=time.time):
    """Run one test when ``busy`` is None, within ``params["budget"]``; keep what parsed through ``save(record)``.
    ``{state, seconds, command, message, kept}``, the DCGM diagnostic's shape."""
    devices = (gpus or {}).get("devices") or []
    # the nvlink_status probe's links (GB/s, None when down): any link up means the peer reads are over NVLink
    nvlinked = any(speed is not None for dev in devices for speed in (dev.get("nvlink") or {}).values())
    argv = command(test, executable or test, len(devices), nvlinked)
    entry = {"state": "ok", "seconds": 0.0, "command": " ".join(argv), "message": "", "kept": None}
    if executable is None:
        return _said(entry, "absent", message="%s is not installed (or give its path as executable)" % (
            "nvbandwidth" if test == "nvbandwidth" else "nccl-tests' all_reduce_perf"))
    if busy:
        return _said(entry, "not_run", message="not run: %s (an active test runs only on an idle node)" % busy)
    started = time.monotonic()
    rc, out, err = run(argv, float(params["budget"]))
    entry["seconds"] = round(time.monotonic() - started, 3)
    if rc is None:
        return _said(entry, "timeout", message="%s ran past its budget of %.1fs and was killed" % (argv[0], float(params["budget"])))
    try:
        parsed = (parse_nvbandwidth if test == "nvbandwidth" else parse_all_reduce)(out)
    except ValueError as exc:
        first = next((line.strip() for line in (err or out or "").splitlines() if line.strip()), "no output")
        return _said(entry, "error", message="%s exited %s, %s: %s" % (argv[0], rc, exc, first))
    floors, source = floors_for((devices[0] if devices else {}).get("name"), dict(
        host=params.get("min_host_bandwidth"), peer=params.get("min_peer_bandwidth"), bus=params.get("min_bus_bandwidth")))
    failed = (judge_nvbandwidth if test == "nvbandwidth" else judge_all_reduce)(parsed, floors)
    if rc != 0 and not failed:
        failed = ["%s exited %s" % (test, rc)]
    entry["kept"] = kept_result(test, argv, parsed, failed, floors, source, entry["seconds"], now(), params["valid_hours"])
    save(entry["kept"])
    if source is None:
        entry["message"] = "no published floor for %s: the numbers are kept without a verdict (set min_*_bandwidth)" % (
            (devices[0] if devices else {}).get("name") or "these GPUs")
    return entry
