#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What nvcc --threads costs in memory (issue 29 item 3): a small .cu compiled for 1-3 -gencode targets at --threads
1..archs; the process tree's RSS summed every 5 ms, its peak and which processes held it then.
    python bench/nvcc_threads.py [--heavy] [--reps 2]      (needs nvcc; a few minutes on a loaded 2-core machine)
"""

from __future__ import absolute_import, division, print_function

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

KERNEL = r'''
template <int N> __global__ void k(float *x, const float *y) {
  float a = x[threadIdx.x], b = y[threadIdx.x];
#pragma unroll
  for (int i = 0; i < STEPS; ++i) { a = fmaf(a, b, __sinf(a * (N + i))); b = b * 0.999f + __cosf(a); }
  x[threadIdx.x] = a + b;
}
template <int... Ns> void all(float *x, const float *y) { (k<Ns><<<1, 32>>>(x, y), ...); }
void run(float *x, const float *y) { all<%s>(x, y); }
'''
GENCODES = {"90": "-gencode=arch=compute_90a,code=sm_90a", "100": "-gencode=arch=compute_100a,code=sm_100a",
            "120": "-gencode=arch=compute_120a,code=sm_120a"}


def tree(root):
    """[(name, rss bytes)] of ``root`` and its descendants now."""
    children = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open("/proc/%s/stat" % pid, "rb") as handle:
                    children.setdefault(int(handle.read().rsplit(b")", 1)[1].split()[1]), []).append(int(pid))
            except (IOError, OSError, IndexError, ValueError):
                pass
    todo, rows = [root], []
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, ()))
        try:
            with open("/proc/%d/comm" % pid) as comm, open("/proc/%d/statm" % pid) as statm:
                rows.append((comm.read().strip(), int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")))
        except (IOError, OSError, IndexError, ValueError):
            pass
    return rows


def measure(source, archs, threads, folder):
    argv = ["nvcc", "-std=c++17", "-O3", "-c", source, "-o", os.path.join(folder, "k.o"), "--threads", str(threads)]
    start, child = time.time(), subprocess.Popen(argv + [GENCODES[a] for a in archs])
    peak, held = 0, []
    while child.poll() is None:
        rows = tree(child.pid)
        if sum(size for _name, size in rows) > peak:
            peak, held = sum(size for _name, size in rows), rows
        time.sleep(0.005)
    return {"archs": archs, "threads": threads, "rc": child.returncode, "seconds": round(time.time() - start, 2),
            "tree_peak_mib": round(peak / 2.0 ** 20, 1), "load": os.getloadavg()[0],
            "at_peak": sorted([(name, round(size / 2.0 ** 20)) for name, size in held if size > 5 * 2 ** 20], key=lambda r: -r[1])}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--heavy", action="store_true", help="48 kernels unrolled 400 steps (device-heavy), else 64 x 1")
    parser.add_argument("--reps", type=int, default=1)
    args = parser.parse_args(argv)
    folder = tempfile.mkdtemp(prefix="nvcc-threads-")
    source = os.path.join(folder, "k.cu")
    with open(source, "w") as handle:
        count = 48 if args.heavy else 64
        handle.write("#define STEPS %d\n" % (400 if args.heavy else 1) + KERNEL % ",".join(str(n) for n in range(1, count + 1)))
    for _rep in range(args.reps):
        for archs in (["120"], ["90", "120"], ["90", "100", "120"]):
            for threads in range(1, len(archs) + 1):
                print(json.dumps(measure(source, archs, threads, folder)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
