# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The admission launcher's pure side (plugins/module_utils/_build/_admission.py): the keys of a compile, the peaks it
learns and merges, nvcc threads per source, and the scheduler's one decision (``pick_next``), which bench/replay.py
imports to model the policy. Its settings are _admission_settings.py's. Stdlib only, no I/O: the role copies both files
beside the launcher."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import math
import os
import re
import signal
import sys

try:    # in the collection
    from ansible_collections.gpufleet.preflight.plugins.module_utils._build._admission_settings import number
except ImportError:     # beside the build: the launcher's folder is on sys.path
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _admission_settings import number  # pylint: disable=import-error

SOURCE_SUFFIXES = (".cu", ".cpp", ".cc", ".cxx", ".c", ".C", ".c++")


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
    """The CPUs a compile uses: nvcc's ``--threads N`` / ``-t N`` (0: all of them), else 1; at most its -gencode
    count when it names any (nvcc runs one arch's cicc/ptxas per thread, never one arch on two)."""
    args, archs = list(argv), arch_count(argv)
    for index, arg in enumerate(args):
        name, _sep, value = arg.partition("=")
        if name in ("--threads", "-t"):
            value = value or (args[index + 1] if index + 1 < len(args) else "")
            if value.isdigit():
                threads = int(value) or cpus
                return min(threads, archs) if archs else threads
    return 1


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
                    for name in ("seconds", "started", "child", "threads", "budget", "cpus", "pid_start", "child_start"))
            and (entry.get("options") is None or (isinstance(entry["options"], list) and 0 < len(entry["options"]) <= 1024
                                                  and all(number(o) is not None for o in entry["options"]))))


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


def pick_next(waiting, running, budget, cpus, margin=1.0):
    """The waiting compile to start now, or None. Each entry: ``bytes``, ``threads``, ``seconds`` (learned, None if
    not), ``learned`` (it finished before), ``since``; ``budget``/``cpus`` of its own build override the arguments;
    ``options`` (an nvcc compile of several archs): the bytes it needs at 1, 2, ... threads.

    Among those that fit - their ``load`` beside what runs within the budget, their threads beside the running ones
    within the CPUs, no second unlearned one beside an unlearned one - the longest expected first (the longest
    compiles bound the makespan; ties: first come). With nothing running, the longest waiting always starts. One
    with ``options`` comes back as a copy with the ``threads`` and ``bytes`` it starts with (``threads_for``)."""
    def fits(e, beside):
        return (load(beside + [e], margin) <= e.get("budget", budget)
                and sum(b.get("threads") or 1 for b in beside + [e]) <= e.get("cpus", cpus)
                and not (not e.get("learned") and any(not b.get("learned") for b in beside)))

    fitting = [e for e in waiting if not running or fits(e, list(running))]
    if not fitting:
        return None
    pick = max(fitting, key=start_order)
    if len(pick.get("options") or ()) < 2:
        return pick
    # what would start beside it at one thread each (longest first) keeps its CPUs and memory: the rest is its to use
    beside = list(running) + [pick]
    for other in sorted((e for e in fitting if e is not pick), key=start_order, reverse=True):
        if fits(other, beside):
            beside.append(other)
    chosen = threads_for(pick["options"], pick.get("budget", budget) - load(beside, margin),
                         pick.get("cpus", cpus) - sum(b.get("threads") or 1 for b in beside))
    # a compile longer than the rest of the build spread over the CPUs (or over the memory: learned seconds x bytes
    # / budget, whichever is longer) bounds the makespan: it takes its threads first (up to seconds / that span),
    # from what the running ones leave, before the others get theirs
    span = max(sum((e.get("seconds") or 0) * (e.get("threads") or 1) for e in waiting) / float(pick.get("cpus", cpus)),
               sum((e.get("seconds") or 0) * e["bytes"] for e in waiting) / float(pick.get("budget", budget)))
    if span > 0 and (pick.get("seconds") or 0) > span:
        critical = threads_for(pick["options"][:int(math.ceil(pick["seconds"] / span))],
                               pick.get("budget", budget) - load(list(running) + [pick], margin),
                               pick.get("cpus", cpus) - sum(b.get("threads") or 1 for b in list(running) + [pick]))
        chosen = max(chosen, critical)
    return dict(pick, threads=chosen, bytes=pick["options"][chosen - 1])


def load(entries, margin=1.0):
    """The memory ``entries`` take together for admission: a learned compile's reservation is its peak x the margin,
    but the margin is kept once, for the largest (peaks of one source repeat within 1 % run to run; what the margin
    covers - a seed from another node, a sample that missed the top - is not expected of every compile at once, and
    a compile that grows past its peak raises its own reservation as it runs); an unlearned one's claim counts whole."""
    learned = [e["bytes"] / float(margin) for e in entries if e.get("learned")]
    return (sum(e["bytes"] for e in entries if not e.get("learned")) + sum(learned)
            + (max(learned) * (margin - 1) if learned else 0))


def start_order(entry):
    """Longest expected first, then first come."""
    return (entry.get("seconds") or 0, -entry["since"])


def threads_for(options, spare_bytes, spare_cpus):
    """The most threads (1 at least) whose extra bytes over one thread fit ``spare_bytes`` and extra threads
    ``spare_cpus``."""
    best = 1
    for threads in range(2, len(options) + 1):
        if threads - 1 <= spare_cpus and options[threads - 1] - options[0] <= spare_bytes:
            best = threads
    return best


# -- nvcc threads per source (issue 29 item 3) ------------------------------------------------------------------------
_GENCODE = re.compile(r"^(-gencode|--generate-code)(=|$)")


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
    """``{threads: peak_bytes}`` measured for a learned source (by_threads in peaks.json; malformed ones dropped)."""
    points = (entry or {}).get("by_threads")
    if not isinstance(points, dict):
        return {}
    return dict((int(t), int(p)) for t, p in points.items() if str(t).isdigit() and int(t) >= 1 and number(p, 1))


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


def thread_options(peaks, key, top, archs, per_thread_default, margin):
    """What a compile needs at 1..``top`` nvcc threads: learned, the model's peak x margin. Never seen (or killed last
    time) it gets one option, one thread, the default per thread (or at least what it held): cold is safe - a
    source's per-arch peak may be 15 GiB where the default guesses 5, so t of them side by side are not risked before
    one has been seen."""
    entry, learned = valid_peak((peaks or {}).get(key)) if key else None, known(peaks, key) is not None
    if not learned:
        return [max(int(per_thread_default), int(entry["peak_bytes"] * margin) if entry else 0)]
    return [int(peak_at(entry, threads, archs) * margin) for threads in range(1, max(int(top), 1) + 1)]


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


def record(peaks, key, peak_bytes, seconds, killed, now, phases=None, threads=None, stopped=False):
    """The peaks with this compile's measurement: the last measurement wins (sources change); a compile killed by a
    signal (the OOM killer, a back-off) did not finish its peak, so it keeps the larger of this and what was known
    (and is not "learned" until it finishes) - ``stopped`` when a stop asked for it (what it held then says nothing
    of what it needs); one far quicker and smaller than last time is a compiler cache's hit (the cache launcher runs
    after this one) and changes nothing learned."""
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
    points = thread_points(previous)
    if threads and not killed:
        points[int(threads)] = peak   # the per-threads peaks the model is fitted through (the last one of each wins)
    if points:
        peaks[key]["by_threads"] = dict((str(t), p) for t, p in sorted(points.items()))
    if killed and stopped:
        peaks[key]["stopped"] = True
    if phases and not killed:
        peaks[key]["phases"] = [[name, int(size)] for name, size in phases]
    elif previous.get("phases"):
        peaks[key]["phases"] = previous["phases"]
    return peaks


def count(entry, name):
    return int(number(entry.get(name)) or 0)


def merge_peaks(*tables):
    """One peaks table from several (seeds first, this node's own last): valid entries only; a later table's entry
    wins, except that a killed one replaces one that finished only when it held more (it was killed past the peak
    that table knew, so that peak is too low here; killed below it - a stop, a neighbour's OOM - it says nothing)."""
    merged = {}
    for table in tables:
        for key, entry in (table if isinstance(table, dict) else {}).items():
            entry = valid_peak(entry)
            before = merged.get(key)
            if entry and not (entry.get("killed") and before and not before.get("killed")
                              and entry["peak_bytes"] <= before["peak_bytes"]):
                merged[key] = entry
    return merged


def merge_fleet_peaks(*tables):
    """The fleet's peaks from every node's peaks.json (the controller's merge, seeding the next build): valid entries
    only, as the launcher reads them; per key the largest finished peak (the safe seed), a killed one only where no
    node finished the source."""
    merged = {}
    for table in tables:
        for key, entry in (table if isinstance(table, dict) else {}).items():
            entry, before = valid_peak(entry), merged.get(key)
            if entry and isinstance(key, str) and (not before or (not entry.get("killed"), entry["peak_bytes"])
                                                   > (not before.get("killed"), before["peak_bytes"])):
                merged[key] = entry
    return merged


def oom_killed(entry):
    """Whether a peaks entry is a compile the OOM killer (or a back-off's SIGKILL) ended, not one a stop ended."""
    return bool(entry and entry.get("killed") and not entry.get("stopped"))


def too_big(peaks, budget_bytes, tree=None, margin=1.0):
    """``[(key, peak_bytes, killed)]`` of the sources (of ``tree``) that need more than the budget even alone: a
    learned one whose peak - at the fewest nvcc threads measured: the scheduler may run a multi-arch compile with
    fewer than last time - is over it, and one OOM-killed holding a peak that times the margin is over it (it was
    killed at that size, so it needs more: the field rerun's fp8_blockwise_gemm_kernel.cu, killed again and again)."""
    prefix = tree + ":" if tree else ""
    found = []
    for key, entry in merge_peaks(peaks).items():
        if not key.startswith(prefix) or entry.get("stopped"):
            continue
        least = min(list(thread_points(entry).values()) or [int(entry["peak_bytes"])])
        if least * (margin if entry.get("killed") else 1) > budget_bytes:
            found.append((key, int(least), oom_killed(entry)))
    return sorted(found)


def learned_from_oom(before, after):
    """The keys whose OOM-killed peak ``after`` (a peaks table) learned since ``before``: killed for the first time,
    or killed again holding more. An OOM that taught the scheduler this needs no fewer jobs; one that taught nothing
    (the same source killed again at the same peak) is where guarded_build's back-off is the last resort."""
    found = []
    for key, entry in sorted((after or {}).items()):
        old = (before or {}).get(key)
        if oom_killed(entry) and (not oom_killed(old) or entry["peak_bytes"] > old["peak_bytes"]):
            found.append(key)
    return found


def too_big_message(big, budget_bytes):
    """What a person reads for ``too_big``'s answer ('' for none)."""
    if not big:
        return ""
    return "the budget of %.1f GiB is below what these sources need alone: %s" % (budget_bytes / 1024.0 ** 3, ", ".join(
        ("%s (more than %.1f GiB: OOM-killed holding that)" if killed else "%s (%.1f GiB, held when compiled)")
        % (key, peak / 1024.0 ** 3) for key, peak, killed in big))
