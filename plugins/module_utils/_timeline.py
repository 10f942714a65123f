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

import re

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
