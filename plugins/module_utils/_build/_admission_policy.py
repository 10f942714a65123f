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
    from ansible_collections.gpufleet.preflight.plugins.module_utils._build._admission_settings import digits, number
    from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _admission_threads as threads_rule
except ImportError:     # beside the build: the launcher's folder is on sys.path
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _admission_settings import digits, number  # pylint: disable=import-error
    import _admission_threads as threads_rule  # pylint: disable=import-error

SOURCE_SUFFIXES = (".cu", ".cpp", ".cc", ".cxx", ".c", ".C", ".c++")


# -- the census's keys (measured peaks shipped for known trees, _admission_census.py) ----------------------------------
CENSUS = "census:"


def path_of(key):
    """A launcher key's path in its tree: ``tree:path#flags`` -> ``path``."""
    return key.split(":", 1)[-1].split("#", 1)[0]


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


OFFLINE = "offline/"


def source_key(source, root=None, cwd=None, tree=None, flags=None, offline=None):
    """A stable key: the tree's identity, the path relative to the project root (else absolute), the arch flags. A
    source under ``offline`` (FetchContent's offline sources, wherever they are) is ``offline/<folder>/<path>``: the
    census's key of it, the same on every node."""
    if source is None:
        return None
    path = os.path.normpath(os.path.join(cwd or os.getcwd(), source))
    offline = os.path.normpath(offline) if offline else None
    if offline and path.startswith(offline + os.sep):
        return (tree + ":" if tree else "") + OFFLINE + os.path.relpath(path, offline) + ("#" + flags if flags else "")
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
    return (digits(str(pid)) is not None and isinstance(entry, dict) and entry.get("state") in ("waiting", "running")
            and all(number(entry.get(name)) is not None for name in ("bytes", "since"))
            and all(entry.get(name) is None or number(entry.get(name)) is not None
                    for name in ("seconds", "started", "child", "threads", "budget", "cpus", "pid_start", "child_start",
                                 "live", "rate", "frozen", "frozen_seconds", "self_bytes", "ceiling", "sampled", "gap"))
            and (entry.get("options") is None or (isinstance(entry["options"], list) and 0 < len(entry["options"]) <= 1024
                                                  and all(number(o) is not None for o in entry["options"]))))


def entry_for(peaks, key):
    """The valid peaks entry of ``key``: this node's or a seed's, else the shipped census's for its path (``census``)."""
    if not key:
        return None
    peaks = peaks or {}
    return valid_peak(peaks.get(key)) or valid_peak(peaks.get(CENSUS + path_of(key)))


def known(peaks, key):
    """The learned entry of a source that finished last time, or None (never seen, malformed, or killed)."""
    entry = entry_for(peaks, key)
    return entry if entry and not entry.get("killed") else None


def expected_seconds(peaks, key):
    """How long this source took the last time (None: never seen, or killed)."""
    entry = known(peaks, key)
    return float(entry["seconds"]) if entry and entry.get("seconds") else None


def expected_bytes(peaks, key, default_bytes, margin):
    """(bytes this compile is expected to need, whether it was learned); a killed one needs at least what it held."""
    entry, learned = entry_for(peaks, key), known(peaks, key) is not None
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


def pick_next(waiting, running, budget, cpus, margin=1.0, now=None, overhead=0):
    """The waiting compile to start now, or None. Each entry: ``bytes``, ``threads``, ``seconds`` (learned, None if
    not), ``learned`` (it finished before), ``since``; ``budget``/``cpus``/``ceiling`` of its own build (live: re-read
    at each decision) override the arguments; ``options`` (an nvcc compile of several archs): the bytes it needs at
    1, 2, ... threads. ``overhead``: what the launchers themselves hold (issue 35 item 5).

    Among those that fit - their ``load`` beside what runs within the budget, their threads beside the running ones
    within the CPUs - the longest expected first (the longest compiles bound the makespan; ties: first come). An
    unlearned one claims its default, at most its share of the budget per CPU: it starts wide, and the freeze
    (_admission_pressure) stops its growth before the budget. A learned one whose peak is over its build's ceiling
    waits, whatever runs (it would start into the OOM killer: issue 35 item 2). When the longest waiting one does not
    fit beside what runs, nothing else starts unless it is expected to end before enough of the running ones end for
    the longest to fit (no starvation: item 3), or - while the CPUs bind (``order_for``) - it fits beside the longest
    and what is expected to run still when the longest starts (EASY backfill's extra room). While the memory binds a
    compile that needs a large share of it ranks as longer (``order_for``). One with ``options`` comes back as a copy
    with the ``threads`` and ``bytes`` it starts with (``threads_for``)."""
    now = max([e["since"] for e in waiting] + [0]) if now is None else now

    def room(e):
        return e.get("budget", budget) - overhead

    def fits(e, beside):
        return (load(beside + [e], margin) <= room(e)
                and sum(b.get("threads") or 1 for b in beside + [e]) <= e.get("cpus", cpus))

    waiting = [e if e.get("learned") else dict(e, bytes=claim(e, room(e), e.get("cpus", cpus))) for e in waiting
               if runnable_alone(e, budget, margin)]
    fitting = [e for e in waiting if not running or fits(e, list(running))]
    order = order_for(waiting, room, cpus)
    head = max(waiting, key=order) if waiting else None
    if head is not None and head not in fitting and load(list(running) + [head], margin) > room(head):
        shadow = drained_by(head, running, room(head), margin)
        left = still_running(running, shadow) if order is start_order and shadow < float("inf") else None
        fitting = [e for e in fitting if (e.get("seconds") and now + e["seconds"] <= shadow < float("inf"))
                   or (left is not None and load(left + [head, e], margin) <= room(head))]
    if not fitting:
        return None
    pick = max(fitting, key=order)
    if len(pick.get("options") or ()) < 2:
        return pick
    # what would start beside it at one thread each (longest first) keeps its CPUs and memory: the rest is its to use
    beside = list(running) + [pick]
    for other in sorted((e for e in fitting if e is not pick), key=start_order, reverse=True):
        if fits(other, beside):
            beside.append(other)
    chosen = threads_rule.threads_for(pick["options"], pick.get("budget", budget) - load(beside, margin),
                                      pick.get("cpus", cpus) - sum(b.get("threads") or 1 for b in beside))
    # a compile longer than the rest of the build spread over the CPUs (or over the memory: learned seconds x bytes
    # / budget, whichever is longer) bounds the makespan: it takes its threads first (up to seconds / that span),
    # from what the running ones leave, before the others get theirs
    span = max(sum((e.get("seconds") or 0) * (e.get("threads") or 1) for e in waiting) / float(pick.get("cpus", cpus)),
               sum((e.get("seconds") or 0) * e["bytes"] for e in waiting) / float(pick.get("budget", budget)))
    if span > 0 and (pick.get("seconds") or 0) > span:
        critical = threads_rule.threads_for(pick["options"][:int(math.ceil(pick["seconds"] / span))],
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


def claim(entry, room, cpus):
    """What an unlearned compile reserves when it starts: its default need, at most the room per CPU (a cold build
    starts as wide as the CPUs; what it really needs is watched and frozen, not guessed); one evicted before claims
    what it held x the margin (``bytes``), and all of it once evicted twice (it runs alone: never a third time)."""
    if entry.get("first"):
        return int(max(room if entry.get("alone") else min(entry["bytes"], room), 1))
    return int(max(min(entry["bytes"], room / float(max(cpus, 1))), 1))


def runnable_alone(entry, budget, margin):
    """Whether ``entry`` may ever start on this budget: an unlearned one always (nothing says it cannot); a learned one
    when its peak (without the margin: alone, nothing else grows) fits its build's ceiling."""
    if not entry.get("learned"):
        return True
    return entry["bytes"] / float(margin) <= entry.get("ceiling", entry.get("budget", budget))


def drained_by(head, running, room, margin):
    """When ``head`` will fit, as running compiles end at their learned times (inf when one is unlearned)."""
    ends = sorted(((r["started"] + r["seconds"]) if r.get("learned") and r.get("seconds") and r.get("started") is not None
                   else float("inf"), index) for index, r in enumerate(running))
    left = list(running)
    for end, index in ends:
        left.remove(running[index])
        if load(left + [head], margin) <= room or not left:   # alone it runs (``runnable_alone`` let it wait)
            return end
    return float("inf")


def still_running(running, when):
    """The running compiles expected to run still at ``when`` (a learned end after it, or unlearned)."""
    return [r for r in running if not (r.get("learned") and r.get("seconds") and r.get("started") is not None
                                       and r["started"] + r["seconds"] <= when)]


def start_order(entry, room=None):
    """An evicted compile first (``first``: it already ran and was stopped for another), then the longest expected,
    then first come. With ``room`` (the memory binds: ``order_for``) the expected seconds count x (1 + ROCK_WEIGHT x
    the share of the room the compile needs)."""
    seconds = (entry.get("seconds") or 0) * (1 + ROCK_WEIGHT * entry["bytes"] / float(room) if room else 1)
    return (bool(entry.get("first")), seconds, -entry["since"])


ROCK_WEIGHT = 2


def order_for(waiting, room, cpus):
    """The order ``pick_next`` starts by: ``start_order``, but while the memory binds - the waiting compiles' learned
    seconds x bytes over the room exceed their seconds x threads over the CPUs - a compile that needs a large share of
    the memory ranks as longer than it is (issue 35, seeded builds: a 14 GiB source seeded at half its time ranked
    below 40 small ones and started last, when nothing was left to pack beside it, and ended the build)."""
    area = sum((e.get("seconds") or 0) * e["bytes"] / float(max(room(e), 1)) for e in waiting)
    work = sum((e.get("seconds") or 0) * (e.get("threads") or 1) / float(max(e.get("cpus", cpus), 1)) for e in waiting)
    if area <= work:
        return start_order
    return lambda e: start_order(e, max(room(e), 1))


def thread_options(peaks, key, top, archs, per_thread_default, margin):
    """What a compile needs at 1..``top`` nvcc threads: learned, the model's peak x margin. Never seen (or killed last
    time) it gets one option, one thread, the default per thread (or at least what it held): cold is safe - a
    source's per-arch peak may be 15 GiB where the default guesses 5, so t of them side by side are not risked before
    one has been seen."""
    entry, learned = entry_for(peaks, key), known(peaks, key) is not None
    if not learned:
        return [max(int(per_thread_default), int(entry["peak_bytes"] * margin) if entry else 0)]
    return [int(threads_rule.peak_at(entry, threads, archs) * margin) for threads in range(1, max(int(top), 1) + 1)]


def killed_by_signal(rc):
    """Whether a compile's exit status says it was killed: by a signal (negative), or - through nvcc or a cache
    launcher, which report a child's death as 128 + its signal (the real tree's OOM-killed cicc came back as 137) -
    by the OOM killer or a stop."""
    return rc < 0 or rc - 128 in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def reservation(entry, live_bytes, margin, phases=(), position=0, peak_bytes=0):
    """What a running compile holds in the ledger now. Learned with phases: what it holds now or the largest phase
    still ahead (from ``position``), times the margin - it follows the compile down as cicc ends - and never below its
    learned peak (``peak_bytes``) until the phase that reached it is over (issue 35 item 4: the sampled phases may
    miss the top that ``ru_maxrss`` saw). Otherwise what it reserved (or claimed, when unlearned), or more once it
    holds more."""
    if phases:
        ahead = [size for _name, size in phases[position:]]
        top = max(range(len(phases)), key=lambda index: phases[index][1])
        return int(max([live_bytes] + ahead + ([peak_bytes] if position <= top else [])) * margin)
    return max(int(entry["bytes"]), int(live_bytes * margin))


def growth_rate(earlier, later, least_seconds):
    """Bytes a second a tree grew by between two ``(time, bytes)`` samples (never below 0; an interval shorter than
    ``least_seconds`` counts as that long: two samples close together say little)."""
    return max(later[1] - earlier[1], 0) / max(later[0] - earlier[0], least_seconds)


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


def record(peaks, key, peak_bytes, seconds, killed, now, phases=None, threads=None, stopped=False, known_before=None,
           cache_hit=False):
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
    # what the node knew of it, its own entry or a seed's (issue 36 finding 1: a hit on a source known only from the
    # fleet seed was learned as its peak and won over the seed)
    reference = previous or valid_peak((known_before or {}).get(key)) or {}
    if killed:
        peak = max(peak, int(previous.get("peak_bytes") or 0))
    elif cache_hit or (reference.get("seconds") and not reference.get("killed")
                       and float(seconds) < 0.25 * float(reference["seconds"]) and peak < int(reference["peak_bytes"])):
        if previous:
            peaks[key] = dict(previous, runs=count(previous, "runs") + 1, cache_hits=count(previous, "cache_hits") + 1)
        return peaks
    peaks[key] = {"peak_bytes": peak, "seconds": round(float(seconds), 1), "killed": bool(killed), "at": int(now),
                  "runs": count(previous, "runs") + 1}
    points = threads_rule.thread_points(previous)
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


CACHE_LAUNCHERS = ("ccache", "sccache", "buildcache")
COMPILERS_PROPER = ("cc1", "cc1plus", "cicc", "ptxas", "cudafe++", "fatbinary", "nvlink", "clang", "clang++")


HIT_SECONDS = 0.5   # a cache's answer comes in well under this; a real nvcc compile, even of an empty .cu, takes longer


def cache_hit(argv, phases, seconds):
    """Whether a compile through a cache launcher (``ccache nvcc ...``) was answered from the cache: its process tree
    was sampled and no compiler proper (cc1plus, cicc, ptxas...) was in it, or it ended before any sample, within
    ``HIT_SECONDS``. A hit's memory and time say nothing of the source."""
    if not any(os.path.basename(arg) in CACHE_LAUNCHERS for arg in list(argv)[:2]):
        return False
    if phases:
        return not any(name in COMPILERS_PROPER for name, _size in phases)
    return seconds < HIT_SECONDS


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
    node finished the source; its thread points the largest of each count over the finished entries (issue 36
    finding 2: the winner's own points were kept unchecked, so one node's small point was every node's); its time the
    median of the finished entries' (each node's time is off by its own speed and load: the median of several orders
    the longest compiles better than any one node's - issue 35, seeded builds)."""
    merged, points, times = {}, {}, {}
    for table in tables:
        for key, entry in (table if isinstance(table, dict) else {}).items():
            entry, before = valid_peak(entry), merged.get(key)
            if not entry or not isinstance(key, str):
                continue
            if not entry.get("killed"):
                for threads, peak in threads_rule.thread_points(entry).items():
                    points.setdefault(key, {})[threads] = max(peak, points.get(key, {}).get(threads, 0))
                if entry.get("seconds") is not None:
                    times.setdefault(key, []).append(float(entry["seconds"]))
            if not before or (not entry.get("killed"), entry["peak_bytes"]) > (not before.get("killed"), before["peak_bytes"]):
                merged[key] = entry
    for key, found in points.items():
        merged[key] = dict(merged[key], by_threads=dict((str(t), p) for t, p in sorted(found.items())))
    for key, seconds in times.items():
        if len(seconds) > 1 and not merged[key].get("killed"):
            merged[key] = dict(merged[key], seconds=median(seconds))
    return merged


def median(values):
    """The median of a non-empty list of numbers (the mean of the middle two for an even count)."""
    ordered, middle = sorted(values), len(values) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2.0


def oom_killed(entry):
    """Whether a peaks entry is a compile the OOM killer (or a back-off's SIGKILL) ended, not one a stop ended."""
    return bool(entry and entry.get("killed") and not entry.get("stopped"))


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
