# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Recent OOM kills, GPU Xid and NVSwitch SXid errors from the kernel log -> ``gpufleet_kernel_events``.

Pure parsers turn a log (``/dev/kmsg`` records, ``dmesg --time-format iso`` or ``journalctl -k -o short-unix``
lines) into ``(epoch_seconds, message)`` entries, and entries into events. ``collect_kernel_events`` at the
bottom reads whichever log is readable and says which one it was, or why none was.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import re
import time

from ansible_collections.gpufleet.preflight.plugins.module_utils import _constants
from ansible_collections.gpufleet.preflight.plugins.module_utils._paths import is_within
from ansible_collections.gpufleet.preflight.plugins.module_utils._run import run_with_timeout

# The kernel prints an OOM kill's header (with the ``oom-kill:`` line naming its cgroups) at most 10 times per
# 5 s (oom_kill_process: __ratelimit(&oom_rs), DEFAULT_RATELIMIT_INTERVAL); later kills of a burst log only
# "Killed process". Such a kill belongs to the burst whose last header came at most this long before it.
OOM_HEADER_RATELIMIT_SECONDS = 5.0

# Xid codes GPU health checks treat as fatal: declared in _constants (the readiness table's default reads it there).
FATAL_XIDS = _constants.FATAL_XIDS

_KMSG_RE = re.compile(r"^([0-9]{1,9}),([0-9]{1,20}),([0-9]{1,20}),[^;]*;(.*)$")
_HEX_ESCAPE_RE = re.compile(r"\\x([0-9a-fA-F]{2})")
_DMESG_ISO_RE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)[,.](\d+)([+-]\d\d:?\d\d|Z)?\s(.*)$")
_DMESG_RAW_RE = re.compile(r"^\[\s*(\d+\.\d+)\]\s?(.*)$")
_JOURNAL_RE = re.compile(r"^(\d+(?:\.\d+)?)\s+\S+\s+kernel:\s?(.*)$")

# Numbers are bounded ASCII digits (int() of 5000 digits raises ValueError on Python 3.11). Every line read is
# anchored at the start of the kernel's message (after a CONFIG_PRINTK_CALLER ``[T123]`` tag at
# most): the same words inside another kernel line (an AppArmor denial quoting a file name ``NVRM: Xid (PCI:..): 79,``
# or ``Killed process 1 (x)``) are not the event.
_START = r"(?:\[\s*[TC]\d+\]\s*)?"
_OOM_PREFIX = r"(Memory cgroup out of memory|Out of memory(?: \(oom_kill_allocating_task\))?)"
_KILLED_RE = re.compile(_START + r"(?:" + _OOM_PREFIX + r": )?Killed process ([0-9]{1,10}) \((.*?)\)(?: total-vm|,|\s|$)")
_KILL_OLD_RE = re.compile(_START + _OOM_PREFIX + r": Kill process ([0-9]{1,10}) \((.*?)\) score (-?[0-9]{1,10}) or sacrifice child")
_OOM_INFO_RE = re.compile(_START + r"oom-kill:(\S+)")
_TASK_IN_RE = re.compile(_START + r"Task in (\S+) killed as a result of limit of (\S+)")
_XID_RE = re.compile(_START + r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f:.]+)\): ([0-9]{1,9}),\s*(.*)$")
# NVSwitch errors, as the Fabric Manager User Guide documents them: "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028,
# Non-fatal, Link 32 egress non-posted PRIV error (First)".
_SXID_RE = re.compile(_START + r"(nvidia-nvswitch[0-9]{1,4}): SXid \((?:PCI:)?([0-9A-Fa-f:.]+)\): ([0-9]{1,9}),\s*(.*)$")
# syslog facility 0 (LOG_KERN) is the kernel's own: a process writing to /dev/kmsg cannot take it (devkmsg_write
# turns facility 0 into LOG_USER), so only those records are read as the kernel's.
KERNEL_FACILITY = 0


def unescape_kmsg(text):
    r"""/dev/kmsg escapes unprintable bytes as ``\xNN``."""
    return _HEX_ESCAPE_RE.sub(lambda match: chr(int(match.group(1), 16)), text)


def parse_kmsg(text, boot_epoch):
    """``/dev/kmsg`` records (``prio,seq,usec,flags;message`` then `` KEY=value`` continuation lines) -> entries.

    ``usec`` counts from boot; ``boot_epoch`` (now - uptime) turns it into epoch seconds (None keeps it None).
    Records of another facility than the kernel's (``prio`` >> 3: what a process wrote) are left out.
    """
    entries = []
    for line in (text or "").splitlines():
        if not line or line.startswith(" "):
            continue
        match = _KMSG_RE.match(line)
        if not match or int(match.group(1)) >> 3 != KERNEL_FACILITY:
            continue
        usec = int(match.group(3))
        when = None if boot_epoch is None else boot_epoch + usec / 1e6
        entries.append((when, unescape_kmsg(match.group(4))))
    return entries


def kmsg_message(record):
    """One ``/dev/kmsg`` record (``6,1234,5678901,-;message`` and its `` KEY=value`` lines) -> the message, or None."""
    entries = parse_kmsg(record, None)
    return entries[0][1] if entries else None


def _iso_to_epoch(stamp, fraction, zone):
    import datetime  # pylint: disable=import-outside-toplevel  # only a journal with timestamps needs it (0.005 s of every run)
    moment = datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S")
    offset = 0
    if zone and zone != "Z":
        digits = zone.replace(":", "")
        offset = (int(digits[1:3]) * 3600 + int(digits[3:5]) * 60) * (-1 if digits[0] == "-" else 1)
    epoch = (moment - datetime.datetime(1970, 1, 1)).total_seconds() - offset
    return epoch + float("0." + fraction)


def parse_dmesg(text, boot_epoch=None):
    """``dmesg --time-format iso`` lines (absolute) or plain ``dmesg`` ``[ sec.usec]`` lines (from boot) -> entries."""
    entries = []
    for line in (text or "").splitlines():
        match = _DMESG_ISO_RE.match(line)
        if match:
            try:
                when = _iso_to_epoch(match.group(1), match.group(2), match.group(3))
            except ValueError:  # month 13, day 32: not a time dmesg prints; the line is kept, its time unknown
                when = None
            entries.append((when, match.group(4)))
            continue
        match = _DMESG_RAW_RE.match(line)
        if match:
            when = None if boot_epoch is None else boot_epoch + float(match.group(1))
            entries.append((when, match.group(2)))
    return entries


def parse_journal(text):
    """``journalctl -k -o short-unix`` lines (``1732890000.123456 host kernel: message``) -> entries."""
    entries = []
    for line in (text or "").splitlines():
        match = _JOURNAL_RE.match(line)
        if match:
            entries.append((float(match.group(1)), match.group(2)))
    return entries


def parse_oom_info(message):
    """``oom-kill:constraint=CONSTRAINT_MEMCG,...,task_memcg=/x/y,task=python3,pid=4425,uid=0`` -> dict or None."""
    match = _OOM_INFO_RE.match(message)
    if not match:
        return None
    info = {}
    for part in match.group(1).split(","):
        if "=" in part:
            key, value = part.split("=", 1)
            info[key] = value
    return info


def _in_or_under(memcg, cgroup_path):
    """``memcg`` (as the kernel prints it, from the top of the hierarchy) is ``cgroup_path`` or below it.

    The one rule, :func:`_paths.is_within`, whole path components only (``/docker/abcdef`` is not in
    ``/docker/abc``). A path seen through a cgroup namespace or a sub-tree mount lacks the top part the kernel
    prints (``/build`` for ``/docker/abc/build``): when the whole path is not within it, the same rule is asked
    of memcg's tails, so a kill in ``/a/b/c/d`` counts for ``/b/c``.
    """
    if not memcg or not cgroup_path:
        return False
    if is_within(memcg, cgroup_path):
        return True
    parts = [part for part in memcg.split("/") if part]
    return any(is_within("/" + "/".join(parts[start:]), cgroup_path) for start in range(1, len(parts)))


def oom_lines_in_cgroup(messages, cgroup_path):
    """Kernel messages about OOM kills in or under ``cgroup_path``: each ``oom-kill:`` line whose ``oom_memcg``
    or ``task_memcg`` names it and the ``Killed process`` line after it. Without a path: every
    ``Memory cgroup out of memory`` line."""
    found = []
    keep_next = False
    for message in messages:
        info = parse_oom_info(message) if cgroup_path else None
        if info is not None and (_in_or_under(info.get("oom_memcg"), cgroup_path)
                                 or _in_or_under(info.get("task_memcg"), cgroup_path)):
            found.append(message)
            keep_next = True
        elif keep_next and _KILLED_RE.match(message):
            found.append(message)
            keep_next = False
        elif not cgroup_path and "memory cgroup out of memory" in message.lower():
            found.append(message)
    return found


def _age(when, now):
    return None if when is None else max(0.0, round(now - when, 3))


def _header_of_burst(last_header, when, scope):
    """The ``oom-kill:`` details a rate-limited memory-cgroup kill at ``when`` shares with its burst, or None."""
    if not last_header or when is None or last_header[0] is None or not (scope or "").startswith("Memory cgroup"):
        return None
    if last_header[1].get("constraint") != "CONSTRAINT_MEMCG":
        return None
    return last_header[1] if 0 <= when - last_header[0] <= OOM_HEADER_RATELIMIT_SECONDS else None


def find_events(entries, now):
    """Entries (in log order) -> ``(oom_kills, xids)``, each event with its time and age."""
    oom_kills = []
    xids = []
    pending_info = {}   # pid -> oom-kill: details, printed just before the kill
    pending_scope = {}  # pid -> prefix of a pre-5.1 "Kill process ... or sacrifice child" line
    last_task_in = None
    last_header = None  # (time, oom-kill: details) of the latest kill logged with its header
    for when, message in entries:
        info = parse_oom_info(message)
        if info is not None:
            pending_info[info.get("pid")] = info
            continue
        match = _TASK_IN_RE.match(message)
        if match:
            last_task_in = match.group(1)
            continue
        match = _KILL_OLD_RE.match(message)
        if match:
            pending_scope[match.group(2)] = match.group(1)
            continue
        match = _KILLED_RE.match(message)
        if match:
            scope, pid, name = match.group(1), match.group(2), match.group(3)
            scope = scope or pending_scope.pop(pid, None)
            info = pending_info.pop(pid, None)
            if info:
                last_header = (when, info)
            inferred = not info and _header_of_burst(last_header, when, scope) is not None
            if inferred:
                info = last_header[1]
            info = info or {}
            constraint = info.get("constraint")
            if constraint:
                is_global = constraint == "CONSTRAINT_NONE"
            elif scope:
                is_global = not scope.startswith("Memory cgroup")
            else:
                is_global = None
            oom_kills.append({
                "time": when,
                "age_seconds": _age(when, now),
                "process": name,
                "pid": int(pid),
                "constraint": constraint,
                "cgroup": info.get("task_memcg") or (last_task_in if is_global is False else None),
                "oom_cgroup": info.get("oom_memcg"),
                "cgroup_inferred": inferred,
                "global": is_global,
                "message": message.strip(),
            })
            last_task_in = None
            continue
        match = _XID_RE.match(message)
        if match:
            code = int(match.group(2))
            xids.append({
                "time": when,
                "age_seconds": _age(when, now),
                "pci": match.group(1),
                "code": code,
                "fatal": code in FATAL_XIDS,
                "message": match.group(3).strip(),
            })
    return oom_kills, xids


def find_sxids(entries, now):
    """Entries (in log order) -> the NVSwitch SXid events, each with its time, age and whether it says Fatal."""
    sxids = []
    for when, message in entries:
        match = _SXID_RE.match(message)
        if match:
            rest = match.group(4).strip()
            first = rest.split(",", 1)[0].strip().lower()
            sxids.append({
                "time": when,
                "age_seconds": _age(when, now),
                "device": match.group(1),
                "pci": match.group(2),
                "code": int(match.group(3)),
                "fatal": True if first == "fatal" else False if first in ("non-fatal", "nonfatal") else None,
                "message": rest,
            })
    return sxids


def within_window(events, window_seconds):
    """Events no older than ``window_seconds``; an event whose time is unknown is kept (it may be recent)."""
    return [event for event in events if event["age_seconds"] is None or event["age_seconds"] <= window_seconds]


def empty_events(window_seconds, message):
    return {"source": None, "readable": False, "message": message, "window_seconds": window_seconds, "lines_read": 0,
            "oom_kills": [], "xids": [], "sxids": []}


# ---- I/O below: /dev/kmsg, dmesg, journalctl ---------------------------------------------------------------


def read_boot_epoch(root="/", now=None):
    """Epoch seconds of boot: now - ``/proc/uptime`` (CLOCK_BOOTTIME when /proc is not readable)."""
    now = time.time() if now is None else now
    try:
        with open(os.path.join(root, "proc/uptime")) as handle:
            return now - float(handle.read().split()[0])
    except (IOError, OSError, ValueError, IndexError):
        boottime = getattr(time, "CLOCK_BOOTTIME", None)
        if boottime is None or root not in ("/", ""):
            return None
        return now - time.clock_gettime(boottime)


def read_kmsg(root="/"):
    """Every record still in the kernel ring buffer, read non-blocking until EAGAIN: ``(text, error)``.

    Each read returns one record; EPIPE means the reader fell behind and records were overwritten (skip on).
    """
    path = os.path.join(root, "dev/kmsg")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        return None, "%s: %s" % (path, exc.strerror or exc)
    chunks = []
    try:
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError as exc:
                if exc.errno == errno.EAGAIN:
                    break
                if exc.errno == errno.EPIPE:
                    continue
                if not chunks:
                    return None, "%s: %s" % (path, exc.strerror or exc)
                break
            if not chunk:  # a regular file (fixture trees) ends here
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
    text = b"".join(chunks).decode("utf-8", "replace")
    if not text.endswith("\n") and text:
        text += "\n"
    return text, None


# Read as /dev/kmsg is: the kernel facility only (``dmesg --kernel``; ``journalctl -k`` also lists what processes
# wrote to /dev/kmsg, under their own facility, so the match on SYSLOG_FACILITY=0).
DMESG_ARGV = ("dmesg", "--kernel", "--time-format", "iso")
DMESG_OLD_ARGV = ("dmesg", "--kernel")
JOURNAL_ARGV = ("journalctl", "-k", "-o", "short-unix", "--no-pager", "SYSLOG_FACILITY=%d" % KERNEL_FACILITY)


def _read_dmesg(run, timeout, boot_epoch):
    rc, out, err = run(list(DMESG_ARGV), timeout)
    if rc == 0:
        return parse_dmesg(out), None
    # util-linux before 2.26 has no --time-format: take the seconds-since-boot form.
    rc2, out2, err2 = run(list(DMESG_OLD_ARGV), timeout)
    if rc2 == 0:
        return parse_dmesg(out2, boot_epoch), None
    why = err2 or err or out2 or "exit %s" % rc2
    return None, "dmesg: %s" % ("timed out" if rc2 is None else " ".join(why.split())[:200])


def _read_journal(run, timeout):
    rc, out, err = run(list(JOURNAL_ARGV), timeout)
    if rc != 0:
        why = err or out or "exit %s" % rc
        return None, "journalctl: %s" % ("timed out" if rc is None else " ".join(why.split())[:200])
    if "No journal files were found" in (err or "") + (out or ""):
        return None, "journalctl: no journal files were found"
    return parse_journal(out), None


def collect_kernel_events(window_seconds=86400, run=run_with_timeout, root="/", now=None,
                          sources=("kmsg", "dmesg", "journal"), timeout=15):
    """``gpufleet_kernel_events``: OOM kills and Xid errors no older than ``window_seconds``.

    The first readable of ``sources`` is used: /dev/kmsg (root, or kernel.dmesg_restrict=0), ``dmesg``,
    then ``journalctl -k``; ``message`` says which, or why none was readable.
    """
    now = time.time() if now is None else now
    boot_epoch = read_boot_epoch(root, now)
    problems = []
    for source in sources:
        entries = None
        if source == "kmsg":
            text, error = read_kmsg(root)
            entries = parse_kmsg(text, boot_epoch) if text is not None else None
        elif source == "dmesg":
            entries, error = _read_dmesg(run, timeout, boot_epoch)
        elif source == "journal":
            entries, error = _read_journal(run, timeout)
        else:
            raise ValueError("kernel_events source %r is not one of kmsg, dmesg, journal" % (source,))
        if entries is None:
            problems.append(error)
            continue
        oom_kills, xids = find_events(entries, now)
        facts = empty_events(window_seconds, "")
        facts.update(
            source=source,
            readable=True,
            lines_read=len(entries),
            oom_kills=within_window(oom_kills, window_seconds),
            xids=within_window(xids, window_seconds),
            sxids=within_window(find_sxids(entries, now), window_seconds),
        )
        facts["message"] = "read %d kernel log lines from %s; %d OOM kills, %d Xid and %d SXid errors in the last %ss" % (
            len(entries), {"kmsg": "/dev/kmsg", "dmesg": "dmesg", "journal": "journalctl -k"}[source],
            len(facts["oom_kills"]), len(facts["xids"]), len(facts["sxids"]), window_seconds)
        return facts
    return empty_events(window_seconds, "no kernel log readable (%s): run as root or set kernel.dmesg_restrict=0"
                        % "; ".join(problems))


class KmsgFollower(object):
    """The ``/dev/kmsg`` messages logged after :meth:`start` (a build attempt's OOM lines, for example);
    silent, with ``error`` set, where the log cannot be read (containers, non-root)."""

    def __init__(self, root="/"):
        self.path = os.path.join(root, "dev/kmsg")
        self.fd = None
        self.error = None

    def start(self):
        self.close()
        try:
            self.fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
            os.lseek(self.fd, 0, os.SEEK_END)  # only what comes from now on
        except OSError as exc:
            self.fd = None
            self.error = "%s: %s" % (self.path, exc.strerror or exc)

    def messages(self, limit=100000):
        """The messages since :meth:`start` (or the previous call), at most ``limit`` records."""
        found = []
        for dummy in range(limit if self.fd is not None else 0):
            try:
                record = os.read(self.fd, 8192)
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # records overwritten while we read: skip ahead
                    continue
                break
            if not record:
                break
            message = kmsg_message(record.decode("utf-8", "replace"))
            if message is not None:
                found.append(message)
        return found

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
