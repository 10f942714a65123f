# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nvcc threads per source (issue 29 item 3), the admission launcher's pure side of it: how many -gencode targets a
compile has, the CPUs it uses, its argv with another ``--threads``, the peaks it was measured at per thread count and
the model fitted through them, and the thread count a decision gives it. Stdlib only, no I/O: the role copies this
file beside the launcher (plugins/module_utils/_build/_admission.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import sys

try:    # in the collection
    from ansible_collections.gpufleet.preflight.plugins.module_utils._build._admission_settings import digits, number
except ImportError:     # beside the build: the launcher's folder is on sys.path
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _admission_settings import digits, number  # pylint: disable=import-error

_GENCODE = re.compile(r"^(-gencode|--generate-code)(=|$)")


def threads_for(options, spare_bytes, spare_cpus):
    """The most threads (1 at least) whose extra bytes over one thread fit ``spare_bytes`` and extra threads
    ``spare_cpus``."""
    best = 1
    for threads in range(2, len(options) + 1):
        if threads - 1 <= spare_cpus and options[threads - 1] - options[0] <= spare_bytes:
            best = threads
    return best


def arch_count(argv):
    """How many -gencode / --generate-code targets a compile has: nvcc --threads runs that many cicc/ptxas side by
    side at most (it never splits one arch)."""
    return sum(1 for arg in argv if _GENCODE.match(arg))


def is_nvcc(argv):
    """Whether the compiler (after any cache launcher: ccache nvcc ...) is nvcc."""
    return any(os.path.basename(arg).startswith("nvcc") for arg in list(argv)[:3])


def with_threads(argv, threads):
    """``argv`` with nvcc's thread count set to ``threads``: every --threads/-t (=N or N) replaced by one, else added
    at the end (nvcc reads options anywhere; the first words may be a cache launcher)."""
    args, out, index = list(argv), [], 0
    while index < len(args):
        name, sep, _value = args[index].partition("=")
        if name in ("--threads", "-t"):
            index += 1 if sep or index + 1 >= len(args) else 2
            continue
        out.append(args[index])
        index += 1
    return out + ["--threads=%d" % threads]


def thread_points(entry):
    """``{threads: peak_bytes}`` measured for a learned source (by_threads in peaks.json; malformed ones dropped),
    each point raised to what the others imply: at t threads never below p(T) x t / T for a point at T > t (with the
    model's base >= 0 the peak grows at most in proportion to the threads): a 10 MiB 1-thread point planted or merged
    beside a 700 MiB 4-thread one is read as 175 MiB (issue 36 finding 2)."""
    points = (entry or {}).get("by_threads")
    if not isinstance(points, dict):
        return {}
    found = dict((digits(t), int(p)) for t, p in points.items() if digits(t) and number(p, 1))
    return dict((t, max([p] + [q * t // u for u, q in found.items() if u > t])) for t, p in found.items())


def peak_at(entry, threads, archs):
    """The expected peak of a learned source at ``threads`` nvcc threads, from the peaks measured at other counts.
    The model: peak(t) = base + min(t, archs) x per-arch increment - t cicc/ptxas side by side - fitted (least
    squares, neither part below 0) through the points of 2 threads or more; one point (t0, p0) gives per-arch
    p0 / t0 and base 0 (an upper bound: the real base is not negative). Measured on nvcc 13.0 (docs/benchmarks.md):
    at one thread the peak can be the host front end (cudafe++), not cicc, so the 1-thread point only floors the
    estimate, unless it is the only one. Never below a point measured at fewer threads; below every measured
    count, the smallest count's peak (the peak does not fall as threads are added). A measured point is used as is."""
    points = dict((min(t, archs), p) for t, p in thread_points(entry).items()) or {1: int(entry["peak_bytes"])}
    threads = min(threads, archs)
    if threads in points:
        return points[threads]
    below = [p for t, p in points.items() if t < threads]
    if not below:
        return points[min(points)]
    parallel = dict((t, p) for t, p in points.items() if t >= 2) or points
    if len(parallel) >= 2:
        base, per = fit_threads(parallel)
    else:
        (count, peak), = parallel.items()
        base, per = 0.0, peak / float(count)
    return int(max([base + per * threads] + below))


def fit_threads(points):
    """(base, per-thread increment) of the least-squares line through ``{threads: peak}`` (two or more threads)."""
    count = float(len(points))
    mean_t, mean_p = sum(points) / count, sum(points.values()) / count
    spread = sum((t - mean_t) ** 2 for t in points)
    per = max(sum((t - mean_t) * (p - mean_p) for t, p in points.items()) / spread, 0.0)
    return max(mean_p - per * mean_t, 0.0), per


def threads_of(argv, cpus=1):
    """The CPUs a compile uses: nvcc's ``--threads N`` / ``-t N`` (0: all of them), else 1; at most its -gencode
    count when it names any (nvcc runs one arch's cicc/ptxas per thread, never one arch on two)."""
    args, archs = list(argv), arch_count(argv)
    for index, arg in enumerate(args):
        name, _sep, value = arg.partition("=")
        if name in ("--threads", "-t"):
            value = digits(value or (args[index + 1] if index + 1 < len(args) else ""))
            if value is not None:
                threads = value or cpus
                return min(threads, archs) if archs else threads
    return 1
