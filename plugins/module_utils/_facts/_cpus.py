# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Usable CPUs: online CPUs, this process's affinity and the cgroup CPU quota (v1 CFS, v2 cpu.max).

``nproc`` honours affinity but not the quota, and ``os.cpu_count()`` honours neither: a container
limited to 4 CPUs on a 128-CPU host would otherwise plan 128 jobs.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import os

from ansible.module_utils.six import string_types

from ansible_collections.gpufleet.preflight.plugins.module_utils._facts._cgroupfs import ancestors, locate_controller, parse_id_list, read_text, tightest


def parse_cfs_quota(quota_text, period_text):
    """cgroup v1 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` -> CPUs (float), None when unlimited (-1)."""
    quota = int(quota_text.strip())
    period = int(period_text.strip())
    if quota <= 0 or period <= 0:
        return None
    return quota / float(period)


def parse_cpu_max(text):
    """cgroup v2 ``cpu.max`` (``200000 100000`` or ``max 100000``) -> CPUs (float), None when ``max``."""
    fields = text.split()
    if not fields or fields[0] == "max":
        return None
    period = int(fields[1]) if len(fields) > 1 else 100000
    quota = int(fields[0])
    if quota <= 0 or period <= 0:
        return None
    return quota / float(period)


def quota_to_cpus(quota_cpus):
    """A fractional quota (1.5 CPUs) buys whole parallel compilers: floor, but at least 1."""
    if quota_cpus is None:
        return None
    return max(1, int(math.floor(quota_cpus + 1e-9)))


def usable_cpus(online=None, affinity=None, quota_cpus=None):
    """The CPUs a build can keep busy: the smallest of online, affinity and the whole-CPU quota."""
    candidates = [value for value in (online, affinity, quota_to_cpus(quota_cpus)) if value]
    return min(candidates) if candidates else 1


def cpus_facts(online=None, affinity=None, quota_cpus=None, quota_dir=None, errors=None):
    """Assemble the ``cpus`` fact dict from what the collector read."""
    return {
        "online": online,
        "affinity": affinity,
        "quota_cpus": quota_cpus,
        "quota_dir": quota_dir,
        "usable": usable_cpus(online, affinity, quota_cpus),
        "errors": list(errors or []),
    }


def _read_quota(directory, version):
    """CPUs of the quota set in this one cgroup directory, or None; (cpus, error)."""
    if version == 2:
        text, error = read_text(os.path.join(directory, "cpu.max"))
        if text is None:
            return None, error
        return parse_cpu_max(text), None
    quota_text, error = read_text(os.path.join(directory, "cpu.cfs_quota_us"))
    if quota_text is None:
        return None, error
    period_text, error = read_text(os.path.join(directory, "cpu.cfs_period_us"))
    if period_text is None:
        return None, error
    return parse_cfs_quota(quota_text, period_text), None


def collect_cpus(root="/", affinity=None, pid="self"):
    """Read online CPUs, affinity and the tightest CPU quota over the cgroup and its ancestors.

    ``affinity``: a collection of CPU ids; by default ``os.sched_getaffinity(0)`` when ``root`` is ``/``
    (a fixture tree has no process to ask). Returns the dict of :func:`cpus_facts`.
    """
    errors = []
    online = None
    online_path = os.path.join(root, "sys", "devices", "system", "cpu", "online")
    text, error = read_text(online_path)
    if text is None:
        errors.append(error)
    else:
        try:
            online = len(parse_id_list(text))
        except ValueError:
            errors.append("%s: not a CPU list: %r" % (online_path, text.strip()))

    if affinity is None and root in ("/", "") and hasattr(os, "sched_getaffinity"):
        affinity = os.sched_getaffinity(0)
    if isinstance(affinity, string_types):
        affinity = parse_id_list(affinity)
    affinity_count = len(affinity) if affinity is not None else None

    quotas = []  # (directory, cpus) innermost first: the tightest counts
    where = locate_controller("cpu", root=root, pid=pid)
    if where["dir"] is None:
        errors.extend(where["errors"])
    else:
        for directory in ancestors(where["dir"], where["mountpoint"]):
            if not os.path.isdir(directory):
                continue
            try:
                cpus, error = _read_quota(directory, where["version"])
            except ValueError:
                errors.append("%s: unreadable CPU quota" % directory)
                continue
            if error and directory == where["dir"] and directory != os.path.normpath(where["mountpoint"]):
                # the v2 root has no cpu.max: only the process's own directory must have it
                errors.append(error)
            quotas.append((directory, cpus))
    quota_cpus, quota_dir = tightest(quotas)
    return cpus_facts(online, affinity_count, quota_cpus, quota_dir, errors)
