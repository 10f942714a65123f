# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The build's memory over time, bounded: a compact timeline kept in the guarded build's status file (pure).

One sample per status interval: ``[seconds since the build started, memory in use (bytes), jobs, attempt]``.
A multi-hour build must not grow the status file without end, so when more than ``capacity`` samples are
kept, neighbouring pairs of the same attempt merge into one (the earlier time, the larger memory: a peak is
never lost) and from then on every ``stride`` new samples are merged before they are kept. The timeline
therefore always spans the whole build at an even resolution that halves each time it fills up: 6 hours at a
2 s interval in 240 samples is one sample per 90 to 180 s, about 10 KiB of JSON.

Each sample is the interval's MAXIMUM, not a reading at its end (issue 20 item 4): readings taken between samples
(``observe``) count, and so does the confinement's own peak counter (cgroup ``memory.peak`` /
``memory.max_usage_in_bytes``, passed as ``peak``) - a rise of that counter since the last sample is a maximum
reached in this interval, so the drawn line reaches the peak the attempt recorded. ``close_attempt`` adds the
attempt's final peak when no sample holds it yet (a peak in the last interval before the attempt ended).

``current_step`` reads what ninja is doing now from the log's tail (the view tells compiling from linking).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import os
import re
import stat
import time

DEFAULT_CAPACITY = 240
MIN_CAPACITY = 8
# a sample: time, memory, jobs, attempt
T, MEMORY, JOBS, ATTEMPT = 0, 1, 2, 3
_STEP = re.compile(r"^\s*\[(\d+)/(\d+)\]\s*(.*)$", re.MULTILINE)


def merge(first, second):
    """Two neighbouring samples of one attempt -> one: the earlier time, the larger memory, the later jobs."""
    return [first[T], max(first[MEMORY], second[MEMORY]), second[JOBS], first[ATTEMPT]]


def downsample(samples):
    """Halve ``samples`` by merging neighbouring pairs; a pair across two attempts is not merged, so each
    attempt keeps its first sample (the moment a backoff happened stays visible)."""
    out = []
    index = 0
    while index < len(samples):
        current = list(samples[index])
        following = samples[index + 1] if index + 1 < len(samples) else None
        if following is not None and following[ATTEMPT] == current[ATTEMPT]:
            out.append(merge(current, following))
            index += 2
        else:
            out.append(current)
            index += 1
    return out


def sample(seconds, memory_bytes, jobs, attempt):
    return [round(float(seconds), 1), int(memory_bytes or 0), int(jobs or 0), int(attempt or 0)]


class Timeline(object):
    """Samples added one by one, at most ``capacity`` kept (see the module's docstring)."""

    def __init__(self, capacity=DEFAULT_CAPACITY):
        if int(capacity) < MIN_CAPACITY:
            raise ValueError("timeline capacity must be at least %d, got %r" % (MIN_CAPACITY, capacity))
        self.capacity = int(capacity)
        self.samples = []
        self.stride = 1
        self._pending = None
        self._pending_count = 0
        self._observed = 0       # the largest reading since the last sample
        self._counter = {}       # attempt -> the peak counter at its last sample

    def observe(self, memory_bytes):
        """A reading between samples (e.g. the watchdog's every 50 ms): the next sample is at least this."""
        self._observed = max(self._observed, int(memory_bytes or 0))

    def add(self, seconds, memory_bytes, jobs, attempt, peak=None):
        """One sample: the most of ``memory_bytes``, the readings observed since the last sample, and ``peak`` (the
        confinement's peak counter for this attempt) when that rose since this attempt's last sample."""
        memory = max(int(memory_bytes or 0), self._observed)
        self._observed = 0
        if peak is not None:
            peak = int(peak)
            if peak > self._counter.get(attempt, 0):  # a new high of this attempt: reached in this interval
                memory = max(memory, peak)
                self._counter[attempt] = peak
        new = sample(seconds, memory, jobs, attempt)
        if self._pending is not None and self._pending[ATTEMPT] != new[ATTEMPT]:
            self._keep()
        if self._pending is None:
            self._pending, self._pending_count = new, 1
        else:
            self._pending = merge(self._pending, new)
            self._pending_count += 1
        if self._pending_count >= self.stride:
            self._keep()

    def _keep(self):
        self.samples.append(self._pending)
        self._pending, self._pending_count = None, 0
        while len(self.samples) > self.capacity:
            shorter = downsample(self.samples)
            if len(shorter) == len(self.samples):  # every sample its own attempt: drop the oldest
                shorter = shorter[1:]
            self.samples = shorter
            self.stride *= 2

    def to_list(self):
        """The samples, the one still being merged included (a reader sees the latest memory)."""
        return self.samples + ([list(self._pending)] if self._pending is not None else [])

    def peak(self):
        return max([s[MEMORY] for s in self.to_list()] or [0])

    def samples_of(self, attempt):
        return [s for s in self.to_list() if s[ATTEMPT] == attempt]

    def close_attempt(self, seconds, jobs, attempt, peak):
        """The attempt ended with ``peak`` recorded (its cgroup's memory.peak): a last sample holds it unless one
        already does, so the chart of this attempt reaches the peak its row says."""
        if peak is None:
            return
        mine = self.samples_of(attempt)
        if not mine or max(s[MEMORY] for s in mine) < int(peak):
            self._observed = 0
            self._counter[attempt] = int(peak)
            self._flush_and_add(sample(seconds, peak, jobs, attempt))

    def _flush_and_add(self, new):
        if self._pending is not None:
            self._keep()
        self._pending, self._pending_count = new, 1
        self._keep()


def current_step(text):
    """The last ninja ``[N/M] description`` line of ``text`` -> its description (``Linking CXX shared module
    common_ops.so``), or None."""
    matches = _STEP.findall(text or "")
    if not matches:
        return None
    return matches[-1][2].strip()[:200] or None


# ---------------------------------------------------------------- progress that survives a flood, and a learned ETA

_NINJA_STEP = re.compile(r"^\s*\[(\d+)/(\d+)\]\s*(.*?)\s*$")
_OBJECT_OUTPUT = re.compile(r"(?:^|/)CMakeFiles/[^/]+\.dir/(.+)\.(?:o|obj)$")
SCAN_CHUNK = 1 << 20
MAX_SCAN_PER_UPDATE = 64 << 20     # a flood beyond this between two updates is skipped (and counted)
MAX_LINE = 64 << 10                # a longer line is cut: a [N/M] line is short
MAX_NINJA_LOG = 16 << 20
MAX_WEIGHTS = 100000


def parse_ninja_log(text):
    """``.ninja_log`` (v5-v7: ``start end mtime output hash``, milliseconds) -> ``{output: seconds}``, the latest
    entry per output (ninja appends; a step built again replaces the earlier time)."""
    weights = {}
    for line in (text or "").splitlines():
        if not line or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) < 4:
            continue
        try:
            start, end = int(fields[0]), int(fields[1])
        except ValueError:
            continue
        if end >= start and len(weights) < MAX_WEIGHTS:
            weights[fields[3]] = (end - start) / 1000.0
    return weights


OFFLINE = "offline/"   # _admission_policy.OFFLINE: how a FetchContent source is keyed


def step_output(description):
    """The output a ninja step line names (its last word: ``Building CUDA object CMakeFiles/x.dir/a.cu.o``), or
    the description itself."""
    words = (description or "").split()
    return words[-1] if words else ""


def source_of_output(output):
    """The source path (relative to the project) of a CMake object output ``CMakeFiles/<target>.dir/<path>.o``, or
    None for another step (a link, a custom command)."""
    match = _OBJECT_OUTPUT.search(output or "")
    return match.group(1) if match else None


def known_source(source, known):
    """The key of ``known`` that names ``source`` (an object's source path): itself, or for a source outside the
    project (FetchContent's: its object is named by its whole path less the ``/``) the key ``offline/<folder>/<path>``
    that ends its path - the census's key, and the launcher's under its ``offline_dir``, wherever that folder is."""
    path = (source or "").lstrip("/")
    if path in known:
        return path
    parts = path.split("/")
    for index in range(1, len(parts) - 1):
        key = OFFLINE + "/".join(parts[index:])
        if key in known:
            return key
    return None


def paced_eta(durations, source_seconds, parallel):
    """Seconds left of a build whose sources' times are known (``source_seconds``: the census, a census of another
    version, another node) but not at this node's pace: the pace is what the sources done took here (``durations``:
    this build's own ``.ninja_log``, output -> seconds) over what ``source_seconds`` says; what is left is the known
    seconds of the sources not done, at that pace, ``parallel`` at a time. None until a known source is done.
    The real tree's cold run took 0.10-0.71x its census's seconds (0.24 over the first five minutes): the census's
    own pace read 6,000 s at 5 minutes, the elapsed time over the census seconds done (quick C++ steps first) 2,100."""
    known = dict((source.lstrip("/"), seconds) for source, seconds in source_seconds.items())
    done = {}
    for output, took in durations.items():
        source = known_source(source_of_output(output), known)
        if source:
            done[source] = took
    pairs = [(took, known[source]) for source, took in done.items() if known.get(source, 0) > 0]
    if not pairs:
        return None
    pace = sum(took for took, _known in pairs) / sum(seconds for _took, seconds in pairs)
    left = sum(seconds for source, seconds in known.items() if source not in done)
    return round(pace * left / max(1, int(parallel or 1)), 1)


def find_ninja_logs(build_dir, depth=3):
    """``.ninja_log`` files under ``build_dir`` (the ninja dir may be a level or two down, e.g.
    ``build/{wheel_tag}`` under scikit-build-core), newest first; symlinks not followed."""
    found = []
    base = build_dir.rstrip("/").count("/")
    for path, dirs, files in os.walk(build_dir):
        if path.count("/") - base >= depth:
            dirs[:] = []
        dirs[:] = [d for d in dirs if d not in ("CMakeFiles", "_deps", ".git")]
        if ".ninja_log" in files:
            full = os.path.join(path, ".ninja_log")
            try:
                found.append((os.lstat(full).st_mtime, full))
            except OSError:
                pass
    return [path for _mtime, path in sorted(found, reverse=True)]


def learned_eta(done_outputs, done, total, elapsed, weights, jobs=1):
    """Seconds left, weighted by what each step took before (``weights``: output -> seconds, from the previous
    build's ``.ninja_log``), or None without weights or progress.

    Done work is the weights of the steps done in this attempt (an unknown step weighs the median); what is left is
    (total - done) steps at the mean weight of the steps not done yet - in a build of C++ steps first and heavy
    CUDA steps after, the rate of the first few minutes says nothing of the hours to come, the weights do. When the
    previous build stopped part-way, fewer steps are known than are left: those beyond it weigh the mean of every
    known step (not nothing - an ETA of 0 s at 45 % of the real tree). The ratio of elapsed time to done weight
    carries this machine's speed and parallelism; until a few steps are done it says little (the real tree's resume
    finished a 0.04 s stub first and read 24 h), so it starts from what the weights imply - ``jobs`` steps at a
    time at the speed they were timed - counted as one round of ``jobs`` steps of evidence, which the measured
    ratio soon outweighs. A cold build (no ``.ninja_log`` yet) has ``paced_eta`` instead."""
    if not weights or not total or done is None or not elapsed or elapsed <= 0:
        return None
    if done >= total:
        return 0.0
    values = sorted(weights.values())
    median = values[len(values) // 2]
    done_set = set(done_outputs)
    # a resumed build compiles what the previous one did not reach: when most of what this attempt did is unknown
    # to the weights, they describe other steps (the real tree's resume read 26 h for about one) - no learned ETA
    if len(done_set & set(weights)) * 2 < len(done_set):
        return None
    # a step the weights do not know weighs their median
    done_weight = sum(weights.get(output, median) for output in done_set)
    if done_weight <= 0:
        return None
    unseen = [seconds for output, seconds in weights.items() if output not in done_set]
    left = total - done
    if len(unseen) >= left:
        left_weight = left * sum(unseen) / len(unseen)
    else:
        left_weight = sum(unseen) + (left - len(unseen)) * sum(values) / len(values)
    jobs = max(1, jobs or 1)
    prior_weight = jobs * left_weight / left
    ratio = (float(elapsed) + prior_weight / jobs) / (done_weight + prior_weight)
    return round(left_weight * ratio, 1)


# what CMake's own edges write (the glob check, the regeneration): a log of only these is of no earlier build
CMAKE_OWN_OUTPUTS = ("cmake.verify_globs", "build.ninja")

# ninja's own edges that check CMake's globs and rerun CMake: a [0/2] of their own before the build's count
REGENERATION_STEPS = ("Re-checking globbed directories", "Re-running CMake")


def build_progress(seen, now, steps_total, run_counted, eta):
    """A follower's state counted over the whole build: steps across attempts and resumed runs, and one ETA (the
    learned per-step times of the last build's .ninja_log, else this run's rate over every attempt), smoothed over
    minutes by ``eta`` (an ``EtaSmoother``), with its basis. Returns it with the new ``steps_total`` and
    ``run_counted`` (the first count of this run and when it was seen: the rate's start)."""
    progress, steps_total = overall_progress(seen["progress"], steps_total)
    if progress and run_counted is None:
        run_counted = (progress["done"], now)
    raw, basis = seen["eta_seconds"], "learned"
    if raw is None and progress:
        raw, basis = rate_eta(progress["done"], progress["total"], (run_counted[0], now - run_counted[1])), "rate"
    smoothed = eta.update(raw, basis, now)
    return (dict(seen, progress=progress, eta_seconds=smoothed, eta_basis=eta.basis if smoothed is not None else None),
            steps_total, run_counted)


def overall_progress(progress, steps_total):
    """An attempt's ninja ``[N/M]`` counted across attempts and resumed runs -> ``(progress, steps_total)``.

    ninja counts only what is left to build: the field rerun's attempt after an OOM read ``[2/85] 2.4%`` with 72 of
    155 steps done, a resume ``[0/2]``. ``steps_total`` is the largest ``M`` this build has seen (its first attempt's,
    or carried from the status of the run a resume continues), so done = that total less what ninja still has
    left (``M - N``)."""
    if not progress or not progress.get("total") or progress.get("done") is None:
        return progress, steps_total
    total = max(int(steps_total or 0), int(progress["total"]))
    done = total - (int(progress["total"]) - int(progress["done"]))
    return {"done": done, "total": total, "percent": round(100.0 * done / total, 1)}, total


def rate_eta(done, total, since):
    """Seconds left at this run's rate over every attempt: ``since`` is ``(done, seconds)`` when it first counted,
    ``done`` and ``total`` now with the seconds since; None without two counts a second apart."""
    first_done, seconds = since
    if done is None or not total or done <= first_done or seconds < 1.0:
        return None
    return round((total - done) * seconds / (done - first_done), 1)


SMOOTHED_FLOOR = 0.25
# the real tree's cold run replayed (bench/eta_replay.py, docs/benchmarks.md "Run F"): from known times the raw
# estimate was the closest, and a 10-minute constant read up to 20 points further from the truth than 2 minutes
LEARNED_TAU = 120.0


class EtaSmoother(object):
    """The ETA shown: the finish time moves towards each new estimate with a time constant of ``tau`` seconds, so a
    new attempt (a back-off restarts the rate; the field rerun's ETA went from 38 m to 3 h 17 m in three minutes) or
    a change of basis moves it over minutes, not at once. An estimate from known times (basis ``learned``) follows
    faster (``learned_tau``): it jumps only when a long compile ends, and lagging it read minutes short. Kept for
    the whole build, across attempts."""

    def __init__(self, tau=600.0, learned_tau=LEARNED_TAU):
        self.tau, self.learned_tau = float(tau), float(learned_tau)
        self.finish = None
        self.at = None
        self.basis = None

    def update(self, raw, basis, now):
        """The smoothed seconds left (None before any estimate); ``raw`` None keeps the last finish time."""
        if raw is not None:
            target = now + float(raw)
            if self.finish is None or raw == 0 or self.finish <= now or (basis == "learned" != self.basis):
                # none yet, done, the last one ran out with steps left (it was wrong), or the first estimate from
                # known times after the rate's guesses: a better-founded estimate is not smoothed into a worse one
                self.finish = target
            else:
                tau = self.learned_tau if basis == "learned" else self.tau
                self.finish += (1.0 - math.exp(-max(0.0, now - self.at) / tau)) * (target - self.finish)
            # never under a share of the newest estimate: a first guess made of quick C++ steps put the finish
            # 15 s ahead, the clock passed it and the real tree's cold field run showed 0 s with 96 of 155 steps left
            self.finish = max(self.finish, now + SMOOTHED_FLOOR * float(raw))
            self.at, self.basis = now, basis
        return None if self.finish is None else round(max(0.0, self.finish - now), 1)


class ProgressFollower(object):
    """Follows one attempt's lines of the build log from where it began: every line between two looks is read (in
    chunks, bounded per look), so ninja's ``[N/M]`` is never pushed out of view by a flood of compiler output (ptxas
    prints a few lines per kernel and architecture) as it was out of a fixed 8 KiB tail. Remembers the last
    ``[N/M]``, its step, and which outputs this attempt finished (for ``learned_eta``)."""

    def __init__(self, path, start=0, weights=None, clock=None, jobs=1, source_seconds=None, build_dir=None):
        self.path = path
        self.jobs = jobs
        self.build_dir = build_dir    # where this build's own .ninja_log appears (the census's pace, ``paced_eta``)
        self._own_log = None
        self.offset = start
        self.weights = weights or {}
        self.source_seconds = source_seconds or {}
        self.clock = clock or time.time
        self.started = self.clock()
        self.progress = None
        self.step = None
        self.done_outputs = []
        self.skipped_bytes = 0
        self._partial = b""

    @classmethod
    def for_build(cls, path, start, build_dir, clock=None, jobs=1, source_seconds=None):
        """A follower whose weights come from the newest ``.ninja_log`` under ``build_dir``; without one, from
        ``source_seconds`` at this build's pace (``paced_eta``)."""
        weights = {}
        for ninja_log in find_ninja_logs(build_dir):
            text = _read_bounded(ninja_log, MAX_NINJA_LOG)
            if text:
                weights = parse_ninja_log(text)
                break
        # a log of CMake's own edges (the role's configure check ran ninja's glob check) is no earlier build: cold
        if all(os.path.basename(output) in CMAKE_OWN_OUTPUTS for output in weights):
            weights = {}
        return cls(path, start, weights, clock, jobs, source_seconds, build_dir)

    def update(self):
        """Read what the log gained since the last look; the state: ``{progress, step, eta_seconds}``."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            return self.state()
        try:
            size = os.fstat(fd).st_size
            if size < self.offset:  # truncated or replaced: start over
                self.offset, self._partial = 0, b""
            if size - self.offset > MAX_SCAN_PER_UPDATE:
                self.skipped_bytes += size - MAX_SCAN_PER_UPDATE - self.offset
                self.offset, self._partial = size - MAX_SCAN_PER_UPDATE, b""
            os.lseek(fd, self.offset, os.SEEK_SET)
            while self.offset < size:
                chunk = os.read(fd, min(SCAN_CHUNK, size - self.offset))
                if not chunk:
                    break
                self.offset += len(chunk)
                self._lines(chunk)
        except OSError:
            pass
        finally:
            os.close(fd)
        return self.state()

    def _lines(self, chunk):
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()[-MAX_LINE:]
        for raw in lines:
            if b"/" not in raw[:32] or not raw.lstrip()[:1] == b"[":
                continue
            match = _NINJA_STEP.match(raw[:MAX_LINE].decode("utf-8", "replace"))
            if match and not match.group(3).startswith(REGENERATION_STEPS):
                done, total = int(match.group(1)), int(match.group(2))
                self.progress = {"done": done, "total": total,
                                 "percent": round(100.0 * done / total, 1) if total else None}
                self.step = match.group(3)[:200] or None
                if len(self.done_outputs) < MAX_WEIGHTS:
                    self.done_outputs.append(step_output(match.group(3)))

    def state(self):
        eta = None
        if self.progress and not self.weights and self.source_seconds:   # cold: the known times at this build's pace
            eta = paced_eta(self._own_durations(), self.source_seconds, min(self.jobs or 1, _usable_cpus()))
        elif self.progress:
            eta = learned_eta(self.done_outputs, self.progress["done"], self.progress["total"], self.clock() - self.started,
                              self.weights, self.jobs)
        return {"progress": self.progress, "step": self.step, "eta_seconds": eta,
                "eta_basis": "learned" if eta is not None else None, "skipped_bytes": self.skipped_bytes}

    def _own_durations(self):
        """What this build's steps took so far, from the .ninja_log it writes (none at its start: it was cold)."""
        if self._own_log is None and self.build_dir:
            self._own_log = (find_ninja_logs(self.build_dir) or [None])[0]   # looked for until it appears, then kept
        return parse_ninja_log(_read_bounded(self._own_log, MAX_NINJA_LOG)) if self._own_log else {}


def _usable_cpus():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _read_bounded(path, limit):
    """The last ``limit`` bytes of a regular file as text ('' when unreadable or not a regular file)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return ""
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return ""
        os.lseek(fd, max(0, info.st_size - limit), os.SEEK_SET)
        chunks, total = [], 0
        while total < limit:
            chunk = os.read(fd, min(SCAN_CHUNK, limit - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        return b"".join(chunks).decode("utf-8", "replace")
    except OSError:
        return ""
    finally:
        os.close(fd)
