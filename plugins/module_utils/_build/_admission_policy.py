# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The admission launcher's pure side (plugins/module_utils/_build/_admission.py): its settings and their checks, the
keys of a compile, the peaks it learns and merges, and the scheduler's one decision (``pick_next``), which
bench/replay.py imports to model the policy. Stdlib only, no I/O: the role copies this file beside the launcher."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import math
import os
import re
import signal

SOURCE_SUFFIXES = (".cu", ".cpp", ".cc", ".cxx", ".c", ".C", ".c++")
DEFAULTS = {
    "state_dir": None,          # ledger.json + ledger.lock + ledger.log: one per node, so builds share the budget
    "peaks_path": None,         # peaks.json (node-local, shared by the builds of this node)
    "seed_peaks": None,         # peaks files of other nodes (read only): what this node has not measured itself
    "root": None,               # project source root: keys are paths relative to it
    "tree": None,               # the tree's identity (name, version, archs): keys of different trees never mix
    "budget_bytes": None,       # None: the cgroup's memory limit (else MemAvailable at start)
    "reserve_bytes": 512 * 1024 ** 2,   # ninja, cmake, pip and the page cache inside the cgroup
    "default_bytes": 5 * 1024 ** 3,     # a source never seen: memory per nvcc thread ...
    "default_times": 1,                 # ... x nvcc threads
    "margin": 1.15,
    "cpus": None,               # None: the CPUs this process may run on
    "poll_seconds": 0.5,        # a waiting compile looks at the ledger's inode this often, decides at least 4x slower
    "settle_seconds": 0.5,      # the decision waits for this long a lull in arrivals: the compiles ninja starts together queue
                                # first (at most 10x this long)
    "sample_seconds": 2.0,      # how often a running compile's process tree is measured (a scan of /proc)
}


# -- keys, peaks, the decision -------------------------------------------------------------------------------------------------
def source_of(argv):
    """The source file a compiler command line compiles, or None (a link step, a version query)."""
    args = list(argv)
    for index, arg in enumerate(args[:-1]):
        if arg == "-c" and args[index + 1].endswith(SOURCE_SUFFIXES):
            return args[index + 1]
    for arg in reversed(args):
        if not arg.startswith("-") and arg.endswith(SOURCE_SUFFIXES):
            return arg
    return None


def source_key(source, root=None, cwd=None, tree=None, flags=None):
    """A stable key: the tree's identity, the path relative to the project root (else absolute), the arch flags."""
    if source is None:
        return None
    path = os.path.normpath(os.path.join(cwd or os.getcwd(), source))
    if root:
        root = os.path.normpath(root)
        if path == root or path.startswith(root + os.sep):
            path = os.path.relpath(path, root)
    return (tree + ":" if tree else "") + path + ("#" + flags if flags else "")


_ARCH_FLAG = re.compile(r"^(-gencode|--generate-code|-arch|--gpu-architecture|-code|--gpu-code|--threads|-t)(=|$)")


def flags_id(argv):
    """A short digest of the flags that change what a CUDA compile holds (archs, threads), or None without any:
    the same source built for sm90 and for sm100 are two compiles."""
    args, picked = list(argv), []
    for index, arg in enumerate(args):
        if _ARCH_FLAG.match(arg):
            picked.append(arg if "=" in arg or index + 1 >= len(args) else arg + "=" + args[index + 1])
    return hashlib.sha1(" ".join(picked).encode()).hexdigest()[:8] if picked else None


def threads_of(argv, cpus=1):
    """The CPUs a compile uses: nvcc's ``--threads N`` / ``-t N`` (0: all of them), else 1."""
    args = list(argv)
    for index, arg in enumerate(args):
        name, _sep, value = arg.partition("=")
        if name in ("--threads", "-t"):
            value = value or (args[index + 1] if index + 1 < len(args) else "")
            if value.isdigit():
                return int(value) or cpus
    return 1


NUMBER_CEILING = 2 ** 63   # no size, pid, time or count this file reads comes near it; above it, margin x peak overflows


def number(value, low=0):
    """``value`` when it is a finite real number >= ``low`` and below ``NUMBER_CEILING`` (not a bool, not a string),
    else None: a 400-digit integer in a planted peaks file or ledger (valid JSON) is dropped, never an OverflowError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    return value if low <= value < NUMBER_CEILING else None


def valid_peak(entry):
    """A peaks.json entry as the launcher wrote it, or None (a number, a list, NaN, "4GiB", a string ``seconds``,
    a negative or zero peak: never seen - a negative peak would lift the budget of every other compile)."""
    if not isinstance(entry, dict) or not number(entry.get("peak_bytes"), 1):
        return None
    if entry.get("seconds") is not None and number(entry.get("seconds")) is None:
        return None
    return entry


def phases_of(entry):
    """The learned phases ``[[name, bytes], ...]`` of a peaks entry ([] when none or malformed)."""
    phases = (entry or {}).get("phases")
    if not isinstance(phases, list) or not all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], str)
                                               and number(p[1]) is not None for p in phases):
        return []
    return phases


def valid_entry(pid, entry):
    """Whether a ledger entry is one a launcher wrote (a bad one is dropped, never trusted)."""
    return (str(pid).isdigit() and isinstance(entry, dict) and entry.get("state") in ("waiting", "running")
            and all(number(entry.get(name)) is not None for name in ("bytes", "since"))
            and all(entry.get(name) is None or number(entry.get(name)) is not None
                    for name in ("seconds", "started", "child", "threads", "budget", "cpus", "pid_start", "child_start")))


def known(peaks, key):
    """The learned entry of a source that finished last time, or None (never seen, malformed, or killed)."""
    entry = valid_peak((peaks or {}).get(key)) if key else None
    return entry if entry and not entry.get("killed") else None


def expected_seconds(peaks, key):
    """How long this source took the last time (None: never seen, or killed)."""
    entry = known(peaks, key)
    return float(entry["seconds"]) if entry and entry.get("seconds") else None


def expected_bytes(peaks, key, default_bytes, margin):
    """(bytes this compile is expected to need, whether it was learned); a killed one needs at least what it held."""
    entry, learned = valid_peak((peaks or {}).get(key)) if key else None, known(peaks, key) is not None
    if entry:
        return max(int(entry["peak_bytes"] * margin), 0 if learned else int(default_bytes)), learned
    return int(default_bytes), False


def reclaim(ledger, alive, started=None):
    """The ledger without bad entries and those whose launcher is gone - unless its compiler still runs (a SIGKILLed
    launcher's compiler gets SIGKILL too, by PR_SET_PDEATHSIG; until it is gone it holds its reservation). With
    ``started(pid)`` (the process's start time), a pid whose start differs from the one its entry recorded is
    another process that reuses the pid: gone."""
    def lives(pid, start):
        return alive(int(pid)) and (started is None or start is None or started(int(pid)) == start)
    return dict((pid, entry) for pid, entry in (ledger or {}).items() if valid_entry(pid, entry)
                and (lives(pid, entry.get("pid_start")) or (entry.get("child") and lives(entry["child"], entry.get("child_start")))))


def still_arriving(waiting, now, settle, patience=10):
    """Whether the queue is still filling, so that the decision waits: a compile joined it within the last ``settle``
    seconds, and the longest waiting has waited less than ``patience`` x ``settle``. ninja starts its ready compiles
    together, but on a loaded machine their launchers reach the queue seconds apart: deciding at the first lull
    that is shorter than the gaps starts whichever came first, not the longest."""
    if not waiting or settle <= 0:
        return False
    newest = max(e["since"] for e in waiting)
    oldest = min(e["since"] for e in waiting)
    return now - newest < settle and now - oldest < patience * settle


def pick_next(waiting, running, budget, cpus):
    """The waiting compile to start now, or None. Each entry: ``bytes``, ``threads``, ``seconds`` (learned, None if
    not), ``learned`` (it finished before), ``since``; ``budget``/``cpus`` of its own build override the arguments.

    Among those that fit - their bytes beside what runs within the budget, their threads beside the running ones
    within the CPUs, no second unlearned one beside an unlearned one - the longest expected first (the longest
    compiles bound the makespan; ties: first come). With nothing running, the longest waiting always starts."""
    used = sum(e["bytes"] for e in running)
    threads = sum(e.get("threads") or 1 for e in running)
    cold = any(not e.get("learned") for e in running)
    fits = [e for e in waiting if not running or (
        used + e["bytes"] <= e.get("budget", budget) and threads + (e.get("threads") or 1) <= e.get("cpus", cpus)
        and not (cold and not e.get("learned")))]
    if not fits:
        return None
    return max(fits, key=lambda e: (e.get("seconds") or 0, -e["since"]))


def killed_by_signal(rc):
    """Whether a compile's exit status says it was killed: by a signal (negative), or - through nvcc or a cache
    launcher, which report a child's death as 128 + its signal (the real tree's OOM-killed cicc came back as 137) -
    by the OOM killer or a stop."""
    return rc < 0 or rc - 128 in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def reservation(entry, live_bytes, margin, phases=(), position=0):
    """What a running compile holds in the ledger now. Learned with phases: what it holds now or the largest phase
    still ahead (from ``position``), times the margin - it follows the compile down as cicc ends. Otherwise what
    it reserved (or claimed, when unlearned), or more once it holds more."""
    if phases:
        return int(max([live_bytes] + [size for _name, size in phases[position:]]) * margin)
    return max(int(entry["bytes"]), int(live_bytes * margin))


def advance(phases, position, name):
    """The phase a compile is in: the first learned one named ``name`` at or after ``position`` (else unchanged)."""
    for index in range(position, len(phases)):
        if phases[index][0] == name:
            return index
    return position


def tree_members(stats, root):
    """The pids of ``root`` and its descendants, from ``{pid: ppid}``."""
    children = {}
    for pid, ppid in stats.items():
        children.setdefault(ppid, []).append(pid)
    members, todo = [], [root]
    while todo:
        pid = todo.pop()
        members.append(pid)
        todo.extend(children.get(pid, ()))
    return members


def record(peaks, key, peak_bytes, seconds, killed, now, phases=None):
    """The peaks with this compile's measurement: the last measurement wins (sources change); a compile killed by a
    signal (the OOM killer, a back-off) did not finish its peak, so it keeps the larger of this and what was known
    (and is not "learned" until it finishes); one far quicker and smaller than last time is a compiler cache's hit
    (the cache launcher runs after this one) and changes nothing learned."""
    peaks = dict(peaks or {})
    if not key:
        return peaks
    peak = int(peak_bytes)
    previous = valid_peak(peaks.get(key)) or {}
    if killed:
        peak = max(peak, int(previous.get("peak_bytes") or 0))
    elif previous.get("seconds") and not previous.get("killed") \
            and float(seconds) < 0.25 * float(previous["seconds"]) and peak < int(previous["peak_bytes"]):
        peaks[key] = dict(previous, runs=count(previous, "runs") + 1, cache_hits=count(previous, "cache_hits") + 1)
        return peaks
    peaks[key] = {"peak_bytes": peak, "seconds": round(float(seconds), 1), "killed": bool(killed), "at": int(now),
                  "runs": count(previous, "runs") + 1}
    if phases and not killed:
        peaks[key]["phases"] = [[name, int(size)] for name, size in phases]
    elif previous.get("phases"):
        peaks[key]["phases"] = previous["phases"]
    return peaks


def count(entry, name):
    return int(number(entry.get(name)) or 0)


def merge_peaks(*tables):
    """One peaks table from several (seeds first, this node's own last): valid entries only; a later table's entry
    wins, except that a killed one never replaces one that finished."""
    merged = {}
    for table in tables:
        for key, entry in (table if isinstance(table, dict) else {}).items():
            entry = valid_peak(entry)
            before = merged.get(key)
            if entry and not (entry.get("killed") and before and not before.get("killed")):
                merged[key] = entry
    return merged


def too_big(peaks, budget_bytes, tree=None):
    """``[(key, peak_bytes)]`` of the learned sources (of ``tree``) that need more than the budget even alone."""
    prefix = tree + ":" if tree else ""
    return sorted((key, int(entry["peak_bytes"])) for key, entry in merge_peaks(peaks).items()
                  if key.startswith(prefix) and entry["peak_bytes"] > budget_bytes)


def budget(config, limit=None, available=None):
    """The bytes compiles may reserve together: the configured budget and the cgroup limit (the smaller), less the
    reserve; without either, what is available now."""
    candidates = [b for b in (config.get("budget_bytes"), limit) if b]
    base = min(candidates) if candidates else (available or 0)
    return max(int(base) - int(config.get("reserve_bytes") or 0), 1)


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
PATHS = ("state_dir", "peaks_path", "root")


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
                      ("settle_seconds", 0)):
        if number(config[name], low) is None:
            raise ValueError("%s: %r is not a number >= %s" % (name, config[name], low))
    for name in PATHS + ("tree",):
        if config[name] is not None and not isinstance(config[name], str):
            raise ValueError("%s: %r is not a string" % (name, config[name]))
    if config["cpus"] is not None and not number(config["cpus"], 1):
        raise ValueError("cpus: %r is not a number >= 1" % (config["cpus"],))
    seeds = config["seed_peaks"]
    if seeds is not None and not (isinstance(seeds, list) and all(isinstance(p, str) for p in seeds)):
        raise ValueError("seed_peaks: %r is not a list of paths" % (seeds,))
    return config
