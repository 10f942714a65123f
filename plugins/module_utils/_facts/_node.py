# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node around the build and the GPUs, as LBNL NHC users check it -> ``gpufleet_node``: the services asked for
(running or not), CPU sockets and physical cores, InfiniBand/RoCE ports (state, physical state, rate) and whether the
kernel's clock is synchronised.

Everything is read from ``/proc`` and ``/sys`` (a ``root`` for fixture trees) plus one ``adjtimex`` read (no command
runs, nothing waits): cheap enough for a check every minute.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _hardware
from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _ib_counters
from ansible_collections.gpufleet.preflight.plugins.module_utils._process_match import NameMatcher

SERVICE_PIDS_KEPT = 5  # per service, in the facts; ``count`` is always the whole number
# adjtimex(2): TIME_ERROR is the clock state "not synchronised"; STA_UNSYNC the status bit NTP daemons clear.
TIME_ERROR = 5
STA_UNSYNC = 0x0040
# /sys/class/infiniband/<dev>/ports/<n>/state and phys_state read "4: ACTIVE", "5: LinkUp"
_NUMBERED = re.compile(r"^\s*(\d+)\s*:\s*(\S.*?)\s*$")
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*Gb/sec")
# a port directory's name as a number: '\u00b2'.isdigit() is True, but int() refuses it
_ASCII_NUMBER = re.compile(r"[0-9]+\Z")


def parse_numbered(text):
    """``'4: ACTIVE'`` -> ``(4, 'ACTIVE')``; text without a number -> ``(None, text)``."""
    match = _NUMBERED.match(text or "")
    if not match:
        return None, (text or "").strip() or None
    return int(match.group(1)), match.group(2)


def parse_rate(text):
    """``'400 Gb/sec (4X NDR)'`` -> ``400.0`` (Gb/s); None when the kernel gives no rate."""
    match = _RATE.match(text or "")
    return float(match.group(1)) if match else None


def cpu_topology(entries):
    """``[(cpu, package id, core id)]`` of the online CPUs -> ``{sockets, cores, threads}`` (a core is a package's
    core id: SMT siblings share it)."""
    packages = set(package for _cpu, package, _core in entries)
    cores = set((package, core) for _cpu, package, core in entries)
    return {"sockets": len(packages), "cores": len(cores), "threads": len(entries)}


def clock_state(state, status, maxerror_us):
    """adjtimex's answer -> ``{synchronized, state, max_error_seconds}``."""
    synchronized = state != TIME_ERROR and not status & STA_UNSYNC
    return {"synchronized": bool(synchronized), "state": state,
            "max_error_seconds": round(maxerror_us / 1e6, 6) if maxerror_us >= 0 else None}


def _read(path):
    with open(path) as handle:
        return handle.read().strip()


def collect_services(names, root="/"):
    """``{name: {running, count, pids}}`` for each name asked for, by executable name (comm, exe or argv[0]'s
    basename: the rule build processes are found by), over one scan of ``<root>/proc``."""
    if not names:
        return {}, []
    matchers = dict((name, NameMatcher([name])) for name in names)
    found = dict((name, []) for name in names)
    proc = os.path.join(root, "proc")
    try:
        pids = sorted(int(entry) for entry in os.listdir(proc) if entry.isdigit())
    except OSError as exc:
        return dict((name, {"running": None, "count": None, "pids": []}) for name in names), [
            "%s: %s" % (proc, exc.strerror or exc)]
    for pid in pids:
        base = os.path.join(proc, str(pid))
        try:
            comm = _read(os.path.join(base, "comm"))
        except (OSError, UnicodeDecodeError):
            continue  # gone, or a kernel thread's odd name
        try:
            exe = os.path.basename(os.readlink(os.path.join(base, "exe")))
        except OSError:
            exe = None  # another user's process without root, or a kernel thread
        for name, matcher in matchers.items():
            # comm keeps 15 characters (nvidia-persiste): its exe says the rest, or without root the prefix must do
            if matcher(comm) or matcher(exe) or (exe is None and comm in matcher.truncated):
                found[name].append(pid)
    return dict((name, {"running": bool(pids_of), "count": len(pids_of), "pids": pids_of[:SERVICE_PIDS_KEPT]})
                for name, pids_of in found.items()), []


def collect_topology(root="/"):
    """Sockets, physical cores and threads of the online CPUs from ``<root>/sys/devices/system/cpu``."""
    top = os.path.join(root, "sys", "devices", "system", "cpu")
    entries = []
    try:
        names = sorted(name for name in os.listdir(top) if re.match(r"^cpu\d+$", name))
    except OSError as exc:
        return None, ["%s: %s" % (top, exc.strerror or exc)]
    for name in names:
        topology = os.path.join(top, name, "topology")
        try:
            online = _read(os.path.join(top, name, "online")) if os.path.exists(os.path.join(top, name, "online")) else "1"
            if online != "1":
                continue
            entries.append((int(name[3:]), int(_read(os.path.join(topology, "physical_package_id"))),
                            int(_read(os.path.join(topology, "core_id")))))
        except (OSError, ValueError):
            continue  # an offline CPU has no topology
    if not entries:
        return None, ["%s: no CPU topology to read" % top]
    return cpu_topology(entries), []


def collect_infiniband(root="/"):
    """``{present, ports: [...]}`` from ``<root>/sys/class/infiniband`` (RoCE devices appear there too, with
    ``link_layer`` Ethernet)."""
    top = os.path.join(root, "sys", "class", "infiniband")
    if not os.path.isdir(top):
        return {"present": False, "ports": []}, []
    ports, errors = [], []
    for device in sorted(os.listdir(top)):
        ports_dir = os.path.join(top, device, "ports")
        try:
            numbers = sorted(os.listdir(ports_dir), key=lambda text: int(text) if _ASCII_NUMBER.match(text) else 0)
        except OSError as exc:
            errors.append("%s: %s" % (ports_dir, exc.strerror or exc))
            continue
        for number in numbers:
            port = os.path.join(ports_dir, number)
            entry = {"device": device, "port": int(number) if _ASCII_NUMBER.match(number) else number}
            for field in ("state", "phys_state", "rate", "link_layer"):
                try:
                    entry[field] = _read(os.path.join(port, field))
                except (OSError, UnicodeDecodeError):
                    entry[field] = None
            entry["state_code"], entry["state_name"] = parse_numbered(entry["state"])
            entry["phys_state_code"], entry["phys_state_name"] = parse_numbered(entry["phys_state"])
            entry["rate_gbps"] = parse_rate(entry["rate"])
            ports.append(entry)
    return {"present": True, "ports": ports}, errors


def _timex_type():
    """struct timex, built on first use: ctypes costs 0.005 s of CPU to import, and only ``clock_sync`` needs it."""
    import ctypes  # pylint: disable=import-outside-toplevel

    class Timex(ctypes.Structure):  # struct timex of <sys/timex.h>; only modes (0: read) and the answer are used
        _fields_ = [("modes", ctypes.c_uint), ("offset", ctypes.c_long), ("freq", ctypes.c_long),
                    ("maxerror", ctypes.c_long), ("esterror", ctypes.c_long), ("status", ctypes.c_int),
                    ("constant", ctypes.c_long), ("precision", ctypes.c_long), ("tolerance", ctypes.c_long),
                    ("time_sec", ctypes.c_long), ("time_usec", ctypes.c_long), ("tick", ctypes.c_long),
                    ("ppsfreq", ctypes.c_long), ("jitter", ctypes.c_long), ("shift", ctypes.c_int),
                    ("stabil", ctypes.c_long), ("jitcnt", ctypes.c_long), ("calcnt", ctypes.c_long),
                    ("errcnt", ctypes.c_long), ("stbcnt", ctypes.c_long), ("tai", ctypes.c_int),
                    ("_reserved", ctypes.c_int * 11)]
    return ctypes, Timex


def read_clock():
    """The kernel's clock discipline, read with ``adjtimex`` (modes 0 changes nothing and needs no privilege):
    what ``timedatectl``'s "System clock synchronized" and chrony/ntpd leave in the kernel."""
    try:
        ctypes, timex_type = _timex_type()
        libc = ctypes.CDLL(None, use_errno=True)
        timex = timex_type()
        state = libc.adjtimex(ctypes.byref(timex))
    except (OSError, AttributeError) as exc:
        return {"synchronized": None, "state": None, "max_error_seconds": None}, ["adjtimex: %s" % exc]
    if state < 0:
        return {"synchronized": None, "state": None, "max_error_seconds": None}, [
            "adjtimex: %s" % os.strerror(ctypes.get_errno())]
    return clock_state(state, timex.status, timex.maxerror), []


def collect_node(service_names=(), root="/", clock=read_clock, ib_counters=False, ib_state_path=None, now=None,
                 hardware=(), run=None):
    """``gpufleet_node``: services, CPU topology, InfiniBand ports (with ``ib_counters``: their error counters and
    growth since the run that wrote ``ib_state_path``), clock; ``errors`` names what could not be read."""
    errors = []
    services, found = collect_services(list(service_names or ()), root)
    errors.extend(found)
    topology, found = collect_topology(root)
    errors.extend(found)
    infiniband, found = collect_infiniband(root)
    errors.extend(found)
    if ib_counters and infiniband.get("present"):
        errors.extend(_ib_counters.add_counters(infiniband, root, ib_state_path, now))
    clock_facts, found = clock()
    errors.extend(found)
    facts = {"services": services, "cpu_topology": topology, "infiniband": infiniband, "clock": clock_facts,
             "errors": errors}
    if hardware:
        facts["hardware"] = _hardware.collect_hardware(hardware, run, root,
                                                       state_dir=os.path.dirname(ib_state_path) if ib_state_path else None)
    return facts
