# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Plan a CUDA build's parallelism from the memory a node really has (pure; used by the
``build_jobs`` filter on the controller and by ``guarded_build`` on the node).

    jobs x nvcc_threads x memory_per_thread <= available - reserve
    jobs x nvcc_threads                     <= usable cpus

A concurrent nvcc thread takes 3-5 GB (flash-attention, onnxruntime measurements), so the default
per thread (guarded_build's ``memory_per_thread``, _build_option_table.py) covers the top of that;
sgl-kernel's own default of 32 threads per compile is what made ``-j20`` OOM a 449 GiB node.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


from ansible.module_utils.six import integer_types, string_types

from ansible_collections.gpufleet.preflight.plugins.module_utils._build._build_option_table import default
from ansible_collections.gpufleet.preflight.plugins.module_utils._human import human, parse_size_option

GIB = 1024 ** 3
DEFAULT_MEMORY_PER_THREAD = parse_size_option("memory_per_thread", default("memory_per_thread"))
MIN_RESERVE = 8 * GIB
RESERVE_FRACTION = 0.10
# a measured memory per thread is planned with this margin, and never below the floor
MEASURED_MARGIN = 1.25
MIN_MEMORY_PER_THREAD = GIB


def _short(num_bytes):
    """Rounded to the nearest unit (``45Gi`` for 44.9 GiB, ``5Gi``, ``1.5Gi``) for the one-line reason;
    ``human()`` truncates as ``free -h`` does, which would under-state a reserve."""
    value = float(num_bytes)
    units = ("B", "Ki", "Mi", "Gi", "Ti", "Pi")
    for unit in units:
        if abs(value) < 1024 or unit == units[-1]:
            break
        value /= 1024.0
    if unit == "B" or abs(value) >= 10 or round(value, 1) == round(value):
        return "%d%s" % (int(round(value)), unit)
    return "%.1f%s" % (value, unit)


def default_reserve(total_bytes):
    """max(8 GiB, 10 % of the effective total): room for the OS, sshd and the page cache."""
    return max(MIN_RESERVE, int(total_bytes * RESERVE_FRACTION))


# Most a count may be: a typo like 1e99 is refused by name instead of planning with a 100-digit number.
# The same bounds as guarded_build's own option checks (_build_options.LIMITS).
MAXIMUM = {"cpus": 1 << 16, "nvcc_threads": 1024, "min_jobs": 4096, "max_jobs": 4096}


def _positive_int(name, value, allow_none=False, minimum=1, maximum=None):
    if value is None and allow_none:
        return None
    if isinstance(value, bool):
        raise ValueError("%s must be a whole number, got %r" % (name, value))
    if isinstance(value, string_types):
        text = value.strip()
        if not text.isdigit():
            raise ValueError("%s must be a whole number, got %r" % (name, value))
        value = int(text)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, integer_types):
        raise ValueError("%s must be a whole number, got %r" % (name, value))
    if value < minimum:
        raise ValueError("%s must be at least %d, got %d" % (name, minimum, value))
    maximum = MAXIMUM.get(name) if maximum is None else maximum
    if maximum is not None and value > maximum:
        raise ValueError("%s must be at most %d, got %s" % (name, maximum, _count(value)))
    return value


def _count(value):
    """A number for a message: ``1e+99`` stays short instead of printing a hundred digits."""
    text = "%d" % value
    return text if len(text) <= 20 else "%.3g" % value


def memory_from_facts(memory_facts):
    """(available_bytes, total_bytes) from ``gpufleet_memory`` (``effective.*``) or a whole ``ansible_facts``."""
    if not isinstance(memory_facts, dict):
        raise ValueError("memory facts must be the gpufleet_memory dict, got %s" % type(memory_facts).__name__)
    if "gpufleet_memory" in memory_facts:
        memory_facts = memory_facts["gpufleet_memory"]
        if not isinstance(memory_facts, dict):
            raise ValueError("memory facts: gpufleet_memory must be the memory facts dict, got %s"
                             % type(memory_facts).__name__)
    effective = memory_facts.get("effective")
    if not isinstance(effective, dict):
        raise ValueError("memory facts have no 'effective' section; gather node_facts with the memory subset")
    available = effective.get("available_bytes")
    total = effective.get("total_bytes")
    if available is None or total is None:
        raise ValueError("memory facts lack effective.available_bytes / effective.total_bytes")
    return parse_size_option("effective.available_bytes", available), parse_size_option("effective.total_bytes", total)


def cpus_from_value(cpus):
    """An int, or the ``cpus`` facts dict (its ``usable``), or a whole ``ansible_facts`` with ``gpufleet_cpus``."""
    if isinstance(cpus, dict):
        if "gpufleet_cpus" in cpus:
            cpus = cpus["gpufleet_cpus"]
        if not isinstance(cpus, dict):
            raise ValueError("cpus: gpufleet_cpus must be the cpus facts dict, got %s" % type(cpus).__name__)
        cpus = cpus.get("usable")
    return _positive_int("cpus", cpus)


def measured_memory_per_thread(attempts, nvcc_threads):
    """What one concurrent nvcc thread took in a guarded build: the largest ``peak / (jobs x nvcc_threads)`` over the
    attempts that finished (kind ``ok``), in bytes, or None. An OOM-killed attempt's peak is its limit, not what it
    needed, so it teaches nothing. When fewer steps than jobs ran at the peak this under-states a thread: the
    margin of :func:`learned_memory_per_thread` is there for that."""
    threads = _positive_int("nvcc_threads", nvcc_threads)
    found = [int(a["peak_memory_bytes"]) // (int(a["jobs"]) * threads) for a in attempts or []
             if isinstance(a, dict) and a.get("kind") == "ok" and a.get("peak_memory_bytes") and a.get("jobs")]
    return max(found) if found else None


def learned_memory_per_thread(default, measured=None, margin=MEASURED_MARGIN, floor=MIN_MEMORY_PER_THREAD):
    """The memory per thread to plan with: ``measured x margin``, never below ``floor``, when a build on this node
    measured it; else ``default``. ``(bytes, why)``, ``why`` a few words for the plan's reason."""
    default = parse_size_option("memory_per_thread", default)
    if measured is None or measured == "":
        return default, None
    measured = parse_size_option("measured_memory_per_thread", measured)
    if measured <= 0:
        raise ValueError("measured_memory_per_thread must be more than 0, got %r" % measured)
    try:
        margin = float(margin)
    except (TypeError, ValueError):
        raise ValueError("measured_margin must be a number, got %r" % (margin,))
    if not 1.0 <= margin <= 10.0:
        raise ValueError("measured_margin must be between 1 and 10, got %r" % margin)
    floor = parse_size_option("min_memory_per_thread", floor)
    learned = max(int(measured * margin), floor)
    why = "measured %s/thread + %d%%%s, not the default %s" % (
        _short(measured), int(round((margin - 1) * 100)), ", raised to the floor %s" % _short(floor)
        if learned == floor else "", _short(default))
    return learned, why


def plan_jobs(available_bytes, total_bytes, cpus, memory_per_thread=DEFAULT_MEMORY_PER_THREAD,
              nvcc_threads=1, reserve=None, min_jobs=1, max_jobs=None, measured_memory_per_thread=None,
              measured_margin=MEASURED_MARGIN, min_memory_per_thread=MIN_MEMORY_PER_THREAD):
    """The job count and why. Returns
    ``{jobs, fits, reason, budget_bytes, per_job_bytes, reserve_bytes, memory_jobs, cpu_jobs, ...}``.

    ``budget_bytes`` (available - reserve) is the memory the build may use: the cgroup limit
    ``guarded_build`` sets. ``fits`` is false when even ``min_jobs`` jobs do not fit in it;
    running out of CPUs only slows a build down, so CPUs never make a plan not fit.
    """
    available = parse_size_option("available", available_bytes)
    total = parse_size_option("total", total_bytes)
    cpus = _positive_int("cpus", cpus)
    per_thread, learned = learned_memory_per_thread(memory_per_thread, measured_memory_per_thread,
                                                    measured_margin, min_memory_per_thread)
    if per_thread <= 0:
        raise ValueError("memory_per_thread must be more than 0")
    threads = _positive_int("nvcc_threads", nvcc_threads)
    reserve_bytes = default_reserve(total) if reserve is None else parse_size_option("reserve", reserve)
    min_jobs = _positive_int("min_jobs", min_jobs)
    max_jobs = _positive_int("max_jobs", max_jobs, allow_none=True)
    if max_jobs is not None and max_jobs < min_jobs:
        raise ValueError("max_jobs (%d) is below min_jobs (%d)" % (max_jobs, min_jobs))

    budget = max(0, available - reserve_bytes)
    per_job = threads * per_thread
    memory_jobs = budget // per_job
    cpu_jobs = cpus // threads

    jobs = min(memory_jobs, cpu_jobs)
    bound = "memory" if memory_jobs <= cpu_jobs else "cpus"
    if max_jobs is not None and jobs > max_jobs:
        jobs, bound = max_jobs, "max_jobs"
    if jobs < min_jobs:
        jobs, bound = min_jobs, "min_jobs"
    fits = memory_jobs >= jobs

    basis = "%s available - %s reserve over %d thread%s x %s" % (
        _short(available), _short(reserve_bytes), threads, "" if threads == 1 else "s", _short(per_thread))
    if learned:
        basis += " (%s)" % learned
    if not fits:
        reason = ("does not fit: %s = %s budget, below %d job%s of %s (%d x %s); "
                  "raise memory or lower nvcc threads / memory_per_thread" % (
                      basis, _short(budget), jobs, "" if jobs == 1 else "s",
                      _short(per_job * jobs), threads, _short(per_thread)))
    else:
        reason = "jobs=%d: %s (memory allows %d, %d cpus allow %d; bound by %s)" % (
            jobs, basis, memory_jobs, cpus, cpu_jobs, bound)
    return {
        "jobs": jobs,
        "fits": fits,
        "reason": reason,
        "bound_by": bound,
        "budget_bytes": budget,
        "budget_human": human(budget),
        "per_job_bytes": per_job,
        "per_job_human": human(per_job),
        "reserve_bytes": reserve_bytes,
        "reserve_human": human(reserve_bytes),
        "available_bytes": available,
        "total_bytes": total,
        "memory_jobs": memory_jobs,
        "cpu_jobs": cpu_jobs,
        "cpus": cpus,
        "nvcc_threads": threads,
        "memory_per_thread_bytes": per_thread,
        "memory_per_thread_source": "measured" if learned else "default",
        "concurrent_threads": jobs * threads,
    }


def plan_from_facts(memory_facts, cpus, **options):
    """:func:`plan_jobs` fed from ``gpufleet_memory`` facts and an int or ``cpus`` facts."""
    available, total = memory_from_facts(memory_facts)
    return plan_jobs(available, total, cpus_from_value(cpus), **options)
