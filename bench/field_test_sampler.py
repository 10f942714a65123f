# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Peak resident memory per compiler process of one build, sampled from /proc (bench/field_test.sh).

    field_test_sampler.py MARKER OUT.json [INTERVAL]

Follows every process named like a CUDA/C++ compiler stage whose ancestor's command line contains MARKER
(the build directory) or whose ancestor runs in it: other builds on a shared machine are left out, reads its VmHWM (the kernel's own
peak-RSS high-water mark, so a short spike between samples is not lost) until it exits, and writes
{"processes": [{pid, name, peak_bytes, seconds, source}], "by_name": {name: max peak_bytes}} when it gets
SIGTERM or SIGINT.
"""
from __future__ import absolute_import, division, print_function

import json
import os
import signal
import sys
import time

TOOLS = frozenset(("nvcc", "cicc", "cudafe++", "ptxas", "fatbinary", "nvlink", "cc1plus", "cc1", "gcc", "g++",
                   "c++", "as", "ld", "collect2"))


def read(path):
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", "replace")
    except (IOError, OSError):
        return None


def main():
    marker, out = sys.argv[1], sys.argv[2]
    real_marker = os.path.realpath(marker)
    interval = float(sys.argv[3]) if len(sys.argv) > 3 else 0.2
    seen = {}
    ours = {}
    running = [True]

    def stop(_signum, _frame):
        running[0] = False
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    def belongs(pid, depth=0):
        if pid in ours:
            return ours[pid]
        if pid <= 1 or depth > 32:
            return False
        cmdline = read("/proc/%d/cmdline" % pid)
        stat = read("/proc/%d/stat" % pid)
        if cmdline is None or stat is None:
            return False
        try:
            cwd = os.path.realpath(os.readlink("/proc/%d/cwd" % pid))
        except OSError:
            cwd = ""
        answer = (marker in cmdline.replace("\0", " ") or cwd == real_marker or cwd.startswith(real_marker + "/")
                  or belongs(int(stat.rsplit(")", 1)[1].split()[1]), depth + 1))
        ours[pid] = answer
        return answer

    while running[0]:
        now = time.time()
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            pid = int(entry)
            comm = (read("/proc/%d/comm" % pid) or "").strip()
            if comm not in TOOLS:
                continue
            key = (pid, comm)
            if key not in seen:
                if not belongs(pid):
                    continue
                cmdline = (read("/proc/%d/cmdline" % pid) or "").split("\0")
                source = next((arg for arg in cmdline if arg.endswith((".cu", ".cpp", ".cc", ".ii", ".cudafe1.cpp"))), None)
                seen[key] = {"pid": pid, "name": comm, "peak_bytes": 0, "first": now, "last": now, "source": source}
            status = read("/proc/%d/status" % pid) or ""
            for line in status.splitlines():
                if line.startswith("VmHWM:"):
                    seen[key]["peak_bytes"] = max(seen[key]["peak_bytes"], int(line.split()[1]) * 1024)
            seen[key]["last"] = now
        time.sleep(interval)

    processes = [dict(pid=v["pid"], name=v["name"], peak_bytes=v["peak_bytes"], source=v["source"],
                      seconds=round(v["last"] - v["first"], 1)) for v in seen.values()]
    by_name = {}
    for process in processes:
        by_name[process["name"]] = max(by_name.get(process["name"], 0), process["peak_bytes"])
    with open(out, "w") as handle:
        json.dump({"processes": processes, "by_name": by_name}, handle, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
