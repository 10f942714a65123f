# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The admission launcher's settings (plugins/module_utils/_build/_admission.py): their defaults, the one size rule,
the checks that refuse an unknown key or a bad value by name, and the budget they give. The admission_config filter
and guarded_build's admission option build a launcher's config with ``checked_config``, so the role, the module and
the launcher refuse the same things. Stdlib only, no I/O: the role copies this file beside the launcher."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import os
import re

DEFAULTS = {
    "state_dir": None,          # ledger.json + ledger.lock + ledger.log: one per node, so builds share the budget
    "peaks_path": None,         # peaks.json (node-local, shared by the builds of this node)
    "seed_peaks": None,         # peaks files of other nodes (read only): what this node has not measured itself
    "census": None,             # census files (measured peaks shipped for known trees, docs/build.md): used for the
                                # sources of a matching tree that nothing learned or seeded
    "root": None,               # project source root: keys are paths relative to it
    "offline_dir": None,        # FetchContent's offline sources (sgl_kernel_offline_dir): a source under it is keyed
                                # offline/<its folder>/<path> wherever the folder is, as the census keys it
    "tree": None,               # the tree's identity (name, version, archs): keys of different trees never mix
    "budget_bytes": None,       # None: the cgroup's memory limit (else MemAvailable at start)
    "reserve_bytes": None,      # ninja, cmake, pip and the page cache inside the cgroup (None: scaled to the limit,
                                # ``auto_reserve``; the launchers count their own memory in the ledger)
    "default_bytes": 5 * 1024 ** 3,     # a source never seen: memory per nvcc thread ...
    "default_times": 1,                 # ... x nvcc threads
    "margin": 1.15,
    "cpus": None,               # None: the CPUs this process may run on
    "poll_seconds": 0.5,        # a waiting compile looks at the ledger's inode this often, decides at least 4x slower
    "settle_seconds": 0.5,      # the decision waits for this long a lull in arrivals: the compiles ninja starts together queue
                                # first (at most 10x this long)
    "sample_seconds": 1.0,      # how often a running compile's process tree is measured (a scan of /proc) and the freeze decided
    "threads_per_source": True,  # an nvcc compile of several -gencode targets gets the --threads its learned peaks,
                                 # the free CPUs and memory allow (its own --threads value is replaced)
    "max_threads": None,        # at most this many nvcc threads per compile (None: its -gencode count, the CPUs)
    "freeze": True,             # freeze (SIGSTOP of its process group) the compile furthest from done when the running
                                # set's growth would cross the budget, instead of starting the unknown ones one at a time
    "oversize_wait_seconds": 900,  # a learned source above the live budget waits this long for the budget to come back,
                                   # then fails naming its need (never started into the OOM killer)
}

# The launcher's files, as written beside a build (source from _build/, name beside the build): the one list that
# guarded_build's admission option and the sgl_kernel role copy (tests/unit/plugins/module_utils/test_admission_setup.py holds both).
LAUNCHER_FILES = (("_admission.py", "gpufleet_admit.py"), ("_admission_policy.py", "_admission_policy.py"),
                  ("_admission_settings.py", "_admission_settings.py"), ("_admission_pressure.py", "_admission_pressure.py"),
                  ("_admission_threads.py", "_admission_threads.py"), ("_admission_node.py", "_admission_node.py"),
                  ("_admission_census.py", "_admission_census.py"), ("../_atomic.py", "_atomic.py"))

NUMBER_CEILING = 2 ** 63   # no size, pid, time or count this file reads comes near it; above it, margin x peak overflows


def number(value, low=0):
    """``value`` when it is a finite real number >= ``low`` and below ``NUMBER_CEILING`` (not a bool, not a string),
    else None: a 400-digit integer in a planted peaks file or ledger (valid JSON) is dropped, never an OverflowError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    return value if low <= value < NUMBER_CEILING else None


def digits(value):
    """``value`` (a str or int) as a whole number >= 0 when written in ASCII digits only, else None: ``str.isdigit``
    is true for "²" and "١", which ``int`` refuses or reads as another number (issue 36 finding 4)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if 0 <= value < NUMBER_CEILING else None
    if not isinstance(value, str) or not value or len(value) > 18 or value.strip("0123456789"):
        return None
    return int(value)


def auto_reserve(base):
    """The reserve for a limit of ``base`` bytes when none is set: 6 % of it, between 32 MiB and 512 MiB - ninja and
    CMake need tens of MiB, not half of a 1,000 MiB cgroup (issue 35 item 6); the launchers count themselves."""
    return int(min(512 * 1024 ** 2, max(32 * 1024 ** 2, 0.06 * base)))


ALONE_RESERVE = 64 * 1024 ** 2   # what ninja, CMake and a launcher hold beside one compile running alone


def base_bytes(config, limit=None, available=None, held=0):
    """The memory the build's compiles share: the configured budget and the cgroup limit (the smaller), re-read at each
    decision; without either, what is available now plus what the running compiles hold (MemAvailable already
    leaves their memory out)."""
    candidates = [b for b in (config.get("budget_bytes"), limit) if b]
    return int(min(candidates)) if candidates else int((available or 0) + held)


def budget(config, limit=None, available=None, held=0):
    """The bytes compiles may reserve together: ``base_bytes`` less the reserve (``auto_reserve`` when unset)."""
    base = base_bytes(config, limit, available, held)
    reserve = config.get("reserve_bytes")
    return max(base - int(auto_reserve(base) if reserve is None else reserve), 1)


def beyond_reserve(overhead, reserve):
    """What the build holds beside its compiles (ninja, the launchers, a setup.py holding torch) that the reserve
    does not already keep room for: charged twice - the reserve and then the measured overhead - a 1,000 MiB cgroup
    with 400 MiB reserved for setup.py froze and evicted a compile that fitted (docs/benchmarks.md)."""
    return max(int(overhead) - max(int(reserve), 0), 0)


def ceiling(config, limit=None, available=None, held=0):
    """What one compile running alone may hold: ``base_bytes`` less what ninja and CMake need beside it (never less
    than the budget). A source is too big for a node only above this (a resumed build in a cgroup just big enough)."""
    base = base_bytes(config, limit, available, held)
    return max(base - ALONE_RESERVE, budget(config, limit, available, held))


# The project's one size rule (plugins/module_utils/_human.parse_size_option, held to the same answers by a table
# test; this file stays stdlib-only): binary units or whole bytes; 64GB (10^9 or 2^30?) and "5 GiB" are refused.
_DECIMAL_UNIT = re.compile(r"^\s*([0-9.]+)\s*([kKmMgGtTpPeE])[bB]\s*$")
_SIZE_FORM = re.compile(r"([0-9]+(\.[0-9]+)?)(([KMGTPEkmgtpe])|([KMGTPE])iB|[Bb])?\Z")
_POWERS = "BKMGTPE"


def parse_size(option, value):
    """A size the config holds -> bytes, or ValueError naming ``option``."""
    if isinstance(value, float) and not (math.isnan(value) or math.isinf(value)) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError("%s: %r is not a size like 64GiB, 512MiB or a number of bytes" % (option, value))
    if isinstance(value, int):
        if value < 0:
            raise ValueError("%s: %r is negative" % (option, value))
        return value
    decimal = _DECIMAL_UNIT.match(value)
    if decimal:
        raise ValueError("%s: %r is ambiguous (decimal GB = 10^9 bytes, or GiB = 2^30?): write %s%siB for powers of "
                         "1024, or the number of bytes" % (option, value, decimal.group(1), decimal.group(2).upper()))
    form = _SIZE_FORM.match(value.strip())
    if not form:
        raise ValueError("%s: %r is not a size like 64GiB, 512MiB or a number of bytes" % (option, value))
    return int(round(float(form.group(1)) * 1024 ** _POWERS.index((form.group(4) or form.group(5) or "B").upper())))


SIZES = ("budget_bytes", "reserve_bytes", "default_bytes")
PATHS = ("state_dir", "peaks_path", "root", "offline_dir")


def checked_config(settings):
    """``DEFAULTS`` updated by ``settings``: sizes in bytes, numbers checked; ValueError naming an unknown key or a
    bad value (the sgl_kernel role and guarded_build build the file with the admission_config filter, which calls
    this, so a value the launcher refuses is refused before the build)."""
    unknown = sorted(set(settings) - set(DEFAULTS))
    if unknown:
        raise ValueError("unknown admission setting(s) %s: the settings are %s" % (", ".join(unknown), ", ".join(sorted(DEFAULTS))))
    config = dict(DEFAULTS)
    config.update(settings)
    for name in SIZES:
        if config[name] is not None:
            config[name] = parse_size(name, config[name])
    for name, low in (("default_times", 1), ("margin", 1), ("poll_seconds", 0.01), ("sample_seconds", 0.01),
                      ("settle_seconds", 0), ("oversize_wait_seconds", 0)):
        if number(config[name], low) is None:
            raise ValueError("%s: %r is not a number >= %s" % (name, config[name], low))
    for name in PATHS + ("tree",):
        if config[name] is not None and not isinstance(config[name], str):
            raise ValueError("%s: %r is not a string" % (name, config[name]))
    for name in ("cpus", "max_threads"):
        if config[name] is not None and not number(config[name], 1):
            raise ValueError("%s: %r is not a number >= 1" % (name, config[name]))
    for name in ("threads_per_source", "freeze"):
        if not isinstance(config[name], bool):
            raise ValueError("%s: %r is not true or false" % (name, config[name]))
    for name in ("seed_peaks", "census"):
        paths = config[name]
        if paths is not None and not (isinstance(paths, list) and all(isinstance(p, str) for p in paths)):
            raise ValueError("%s: %r is not a list of paths" % (name, paths))
    return config


def launcher_config(settings, config_dir):
    """``checked_config`` and what the launcher derives from it: the bytes of one nvcc thread and of a source never
    seen, ``~`` in paths expanded, the state and peaks beside the config file unless named."""
    config = checked_config(settings)
    config["per_thread_bytes"] = config["default_bytes"] or DEFAULTS["default_bytes"]
    config["default_bytes"] = config["per_thread_bytes"] * int(config["default_times"])
    for name in PATHS:
        if config.get(name):
            config[name] = os.path.expanduser(config[name])
    if not config.get("state_dir"):
        config["state_dir"] = config_dir
    if not config.get("peaks_path"):
        config["peaks_path"] = os.path.join(config["state_dir"], "peaks.json")
    return config
