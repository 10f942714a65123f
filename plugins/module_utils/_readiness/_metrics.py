# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A node's verdict as node_exporter textfile metrics: pure rendering, then one atomic write.

The text format node_exporter's textfile collector reads: ``# HELP`` and ``# TYPE`` once per metric, samples
WITHOUT timestamps (a sample with one makes node_exporter skip the whole file), label values escaped
(backslash, double quote, newline). The file is written to an unpredictable temp name (``mkstemp``) and renamed
in the same directory, so a scrape never reads half a file and nobody can plant a FIFO or symlink in its way.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import os
import re
import stat

from ansible_collections.gpufleet.preflight.plugins.module_utils._atomic import write_file

# One file per source (the playbook and the node-local check write side by side, never over each other): with one
# shared name the last writer won and the other source's series came and went (an alert on them flapped).
SOURCES = ("playbook", "health_check")
# The single file releases before 0.3 wrote for every source; a new write removes it when it holds our own source.
LEGACY_FILE = "gpufleet_preflight.prom"
STATUSES = ("ok", "failed", "unknown", "skipped")
# The README's word for the checks every profile runs; "common" is what results said before (kept readable).
ALWAYS = "always"
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
_SOURCE = re.compile(r"[a-z][a-z0-9_]{0,31}\Z")


def default_file(source):
    """``gpufleet_preflight_<source>.prom``: the file each source writes unless told another name."""
    validate_source(source)
    return "gpufleet_preflight_%s.prom" % source


def validate_source(source):
    if not isinstance(source, str) or not _SOURCE.match(source):
        raise ValueError("source %r must be a lower-case word like playbook or health_check (letters, digits, _)"
                         % (source,))
    return source


def profile_label(profile):
    """The ``profile`` label: ``always`` for the checks every profile runs (older results said ``common``)."""
    profile = str(profile or ALWAYS)
    return ALWAYS if profile == "common" else profile


def escape_label(value):
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


class _Writer(object):
    def __init__(self):
        self.lines = []
        self.declared = set()

    def sample(self, name, kind, help_text, value, labels=None):
        if not _NAME.match(name):
            raise ValueError("not a metric name: %r" % name)
        if name not in self.declared:
            self.declared.add(name)
            self.lines.append("# HELP %s %s" % (name, help_text.replace("\\", "\\\\").replace("\n", " ")))
            self.lines.append("# TYPE %s %s" % (name, kind))
        label_text = ""
        if labels:
            label_text = "{%s}" % ",".join('%s="%s"' % (key, escape_label(labels[key])) for key in sorted(labels))
        self.lines.append("%s%s %s" % (name, label_text, _number(value)))


def render(verdict, source="playbook"):
    """The metrics text for one node's verdict.

    ``verdict``: dict with ``ready`` (bool; None = unknown), ``checks`` (list of name/status/profile),
    ``facts`` (the gathered subsets without the ``gpufleet_`` prefix, any may be absent), ``checked_at_epoch``
    (seconds) and ``duration_seconds``. ``source`` labels who wrote it (``playbook`` or ``health_check``).
    """
    out = _Writer()
    base = {"source": validate_source(source)}
    ready = verdict.get("ready")
    out.sample("gpufleet_preflight_ready", "gauge", "1 when the node passed every readiness check, 0 when not, "
               "absent when it could not be checked", 1 if ready else 0, base)
    out.sample("gpufleet_preflight_unknown", "gauge", "1 when a check could not gather its facts (unknown)",
               1 if any(c.get("status") == "unknown" for c in verdict.get("checks") or []) else 0, base)
    for check in verdict.get("checks") or []:
        name = str(check.get("name") or "unnamed")
        for status in STATUSES:
            labels = dict(base, check=name, profile=profile_label(check.get("profile")), status=status)
            out.sample("gpufleet_preflight_check_status", "gauge", "1 for the status each readiness check has now "
                       "(ok, failed, unknown, skipped), 0 for the others", 1 if check.get("status") == status else 0, labels)
    facts = verdict.get("facts") or {}
    effective = ((facts.get("memory") or {}).get("effective") or {})
    if effective.get("available_bytes") is not None:
        out.sample("gpufleet_preflight_effective_available_memory_bytes", "gauge", "Effective available memory: the "
                   "tighter of the host's MemAvailable and the memory cgroup's limit less usage",
                   int(effective["available_bytes"]), base)
    if effective.get("total_bytes") is not None:
        out.sample("gpufleet_preflight_effective_total_memory_bytes", "gauge", "Effective total memory (host or cgroup limit)",
                   int(effective["total_bytes"]), base)
    procs = facts.get("build_processes") or {}
    if procs.get("count") is not None:
        out.sample("gpufleet_preflight_build_processes", "gauge", "Build processes (cmake, ninja, nvcc, cicc, ...) running",
                   int(procs["count"]), base)
        orphans = sum(1 for proc in procs.get("processes") or [] if proc.get("orphaned"))
        out.sample("gpufleet_preflight_orphaned_build_processes", "gauge", "Build processes whose parent is gone",
                   orphans, base)
    ooms = oom_kills(facts.get("memory") or {})
    for scope in sorted(ooms):
        out.sample("gpufleet_preflight_oom_kills_total", "counter", "OOM kills counted by the kernel (scope host: "
                   "/proc/vmstat since boot; cgroup: the node's memory cgroup)", ooms[scope], dict(base, scope=scope))
    if verdict.get("drain_held_back") is not None:
        out.sample("gpufleet_preflight_drain_held_back", "gauge", "1 when the node was not ready but not drained: the "
                   "drain circuit breaker held (too many nodes of its partition drained by the collection already)",
                   1 if verdict["drain_held_back"] else 0, base)
    if verdict.get("checked_at_epoch") is not None:
        out.sample("gpufleet_preflight_last_check_timestamp_seconds", "gauge", "Unix time of the last readiness check",
                   float(verdict["checked_at_epoch"]), base)
    if verdict.get("duration_seconds") is not None:
        out.sample("gpufleet_preflight_check_duration_seconds", "gauge", "Seconds the last readiness check took",
                   float(verdict["duration_seconds"]), base)
    return "\n".join(out.lines) + "\n"


def oom_kills(memory):
    """``{'host': n, 'cgroup': m}`` from the memory facts' ``oom_kills``, whichever are known."""
    counters = memory.get("oom_kills") or {}
    return dict((scope, counters[scope]) for scope in ("host", "cgroup")
                if isinstance(counters.get(scope), int) and not isinstance(counters.get(scope), bool))


def validate_file_name(name):
    if not name or "/" in name or not name.endswith(".prom") or name.startswith("."):
        raise ValueError("metrics file name %r must be a plain file name ending in .prom (node_exporter reads only those)"
                         % (name,))
    return name


def write_atomic(directory, text, name):
    """Write text as directory/name via a temp file in the same directory and a rename (0644). Returns the path.

    Whoever can write the textfile directory (node_exporter's own user on Debian) must not be able to hang or
    redirect this write (_atomic.write_file): the temp name is unpredictable and created with O_EXCL|O_NOFOLLOW, so a
    FIFO or symlink planted anywhere is never opened; the rename replaces a FIFO or symlink at the target itself
    (the directory entry, never what it points to). A directory at the target fails with a ValueError naming it.
    """
    validate_file_name(name)
    if not os.path.isdir(directory):
        raise ValueError("metrics directory %s does not exist or is not a directory (node_exporter's "
                         "--collector.textfile.directory)" % directory)
    path = os.path.join(directory, name)
    if os.path.isdir(path) and not os.path.islink(path):
        raise ValueError("metrics file %s is a directory: remove it (node_exporter reads a plain file there)" % path)
    # UTF-8 whatever the locale (cron's C locale was ASCII): node_exporter reads UTF-8; a lone surrogate -> '?'
    write_file(path, text, mode=0o644, errors="replace")
    if name != LEGACY_FILE:
        remove_legacy(directory, text)
    return path


def read_current(path):
    """The text of the metrics file now there, or None: absent, or not a plain file (a FIFO planted there would
    block a plain ``open``; a symlink is never followed), or unreadable."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None
        return handle.read(1 << 24).decode("utf-8", "replace")


def remove_legacy(directory, text):
    """Remove the pre-0.3 shared ``gpufleet_preflight.prom`` when it holds the same source's series as ``text``
    (node_exporter would see that source twice); one that another source wrote is left to that source."""
    match = re.search(r'source="([^"]*)"', text)
    path = os.path.join(directory, LEGACY_FILE)
    old = read_current(path) if match else None
    if old is not None and 'source="%s"' % match.group(1) in old:
        try:
            os.unlink(path)
        except OSError:
            pass
