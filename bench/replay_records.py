#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The records bench/replay.py replays: a data file of compiles (seconds alone, peak) or a build directory's
`.ninja_log` with the admission launcher's peaks.json; a compile as the model sees it (``Job``). Split off
bench/replay.py (500-line rule); bench/replay.py re-exports every name here."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

GIB = 1024 ** 3
GROWTH = 0.5          # a compile reaches its peak after this fraction of its duration


class ReplayError(Exception):
    """A record that cannot be replayed: the message names the file and what to fix."""


class Job:
    """One compile: seconds alone, peak bytes, manifest position, CPU share, fraction of its time it grows for."""

    def __init__(self, name, seconds, peak, order, cpu=1.0, grow=GROWTH):
        self.name, self.seconds, self.peak, self.order, self.cpu = name, max(float(seconds), 1e-6), float(peak), order, cpu
        self.grow = max(float(grow), 1e-6)


# -- records ---------------------------------------------------------------------------------------------------------
def load_record(path):
    """Jobs from a data file: {"objects": [{"source", "seconds", "peak_gib"}...]} (cpu: optional share of a core)."""
    try:
        with open(path) as handle:
            data = json.load(handle)
        rows = data["objects"]
        return [Job(r["source"], r["seconds"], r["peak_gib"] * GIB, i, r.get("cpu", 1.0))
                for i, r in enumerate(sorted(rows, key=lambda r: r["source"]))]
    except (OSError, ValueError) as exc:
        raise ReplayError("%s: cannot read the record (%s)" % (path, exc))
    except (KeyError, TypeError) as exc:
        raise ReplayError("%s: every object needs source, seconds and peak_gib (missing %s)" % (path, exc))


def parse_ninja_log(text):
    """{output: seconds} from a .ninja_log (v5/v6), the last build of each output winning (a resumed build appends)."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith("# ninja log v"):
        raise ReplayError("not a .ninja_log: the first line must be '# ninja log vN'")
    seconds = {}
    for number, line in enumerate(lines[1:], 2):
        fields = line.split("\t")
        if not line.strip() or line.startswith("#"):
            continue
        if len(fields) < 4:
            raise ReplayError(".ninja_log line %d: expected start, end, mtime, output separated by tabs" % number)
        try:
            seconds[fields[3]] = (int(fields[1]) - int(fields[0])) / 1000.0
        except ValueError:
            raise ReplayError(".ninja_log line %d: start and end must be milliseconds" % number)
    return seconds


def jobs_from_build(ninja_log, peaks, cpu=1.0):
    """Jobs for the compile steps of a build: each peaks.json source (key: path relative to the project root) matched
    to the .ninja_log output whose name ends with it + '.o' (CMake names objects <target>.dir/<source>.o)."""
    jobs = []
    for key in sorted(peaks):
        entry = peaks[key]
        matches = [out for out in ninja_log if out.endswith(key + ".o") or out.endswith(key + ".obj")]
        if not matches or not entry.get("peak_bytes"):
            raise ReplayError("peaks.json source %r: no .ninja_log output ends with %r (or no peak_bytes)" % (key, key + ".o"))
        jobs.append(Job(key, ninja_log[matches[0]], entry["peak_bytes"], len(jobs), cpu))
    if not jobs:
        raise ReplayError("peaks.json has no sources")
    return jobs
