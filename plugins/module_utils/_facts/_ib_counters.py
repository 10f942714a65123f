# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""InfiniBand port error counters and their growth since the previous run (issue 37 item 2).

``ib_core`` exposes each port's PortCounters as one decimal file per counter under
``/sys/class/infiniband/<dev>/ports/<n>/counters/`` (drivers/infiniband/core/sysfs.c). Only the error counters are read
(traffic counters are no fault). The previous run's values are kept on the node in a small JSON file beside the probe
cache; the growth between the two runs is a fact (``counter_growth``), judged on the controller by ``ib_counters``.
Pure parts first; ``add_counters`` (reads ``<root>/sys``, reads and writes the state file) at the bottom.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import stat
import time

from ansible_collections.gpufleet.preflight.plugins.module_utils._atomic import write_file

# The error counters of the IBA PortCounters attribute as ib_core names them; link_downed counts link flaps.
ERROR_COUNTERS = (
    "symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors", "port_rcv_remote_physical_errors",
    "port_rcv_switch_relay_errors", "port_xmit_discards", "port_xmit_constraint_errors", "port_rcv_constraint_errors",
    "local_link_integrity_errors", "excessive_buffer_overrun_errors", "VL15_dropped",
)
_NUMBER = re.compile(r"^[0-9]{1,20}$")
STATE_VERSION = 1
MAX_STATE_BYTES = 1 << 20


def parse_counter(text):
    """``"17\\n"`` -> 17; anything else (``N/A``, empty, a 5000-digit line) -> None."""
    text = (text or "").strip()
    return int(text) if _NUMBER.match(text) else None


def port_key(port):
    return "%s/%s" % (port.get("device"), port.get("port"))


def counter_growth(previous, current):
    """``(growth, reset)``: per counter, current - previous for the counters both runs read. ``reset`` is True when
    any counter went down (a reboot, a driver reload, ``perfquery -R``): then growth is None, a new baseline."""
    if previous is None:
        return None, False
    growth = {}
    for name, value in current.items():
        before = previous.get(name)
        if value is None or not isinstance(before, int):
            continue
        if value < before:
            return None, True
        growth[name] = value - before
    return growth, False


def apply_state(ports, state, now):
    """Annotate each port with ``counter_growth`` (None on the first run or after a reset) and ``counters_reset``;
    return ``(seconds since the previous run or None, the new state)``. Pure."""
    previous_ports = (state or {}).get("ports") or {}
    since = None
    if isinstance((state or {}).get("at"), (int, float)):
        since = max(0.0, round(now - state["at"], 3))
    new_state = {"version": STATE_VERSION, "at": now, "ports": {}}
    for port in ports:
        current = port.get("counters")
        if current is None:
            continue
        before = previous_ports.get(port_key(port))
        growth, reset = counter_growth(before if isinstance(before, dict) else None, current)
        port["counter_growth"], port["counters_reset"] = growth, reset
        new_state["ports"][port_key(port)] = dict((k, v) for k, v in current.items() if v is not None)
    return since, new_state


# ---- I/O below: sysfs counters, the state file ----------------------------------------------------------------


def read_port_counters(port_dir):
    """``{counter: int or None}`` for the error counters present under ``<port_dir>/counters``; None without the
    directory (a RoCE port of some drivers)."""
    top = os.path.join(port_dir, "counters")
    if not os.path.isdir(top):
        return None
    counters = {}
    for name in ERROR_COUNTERS:
        try:
            with open(os.path.join(top, name)) as handle:
                counters[name] = parse_counter(handle.read(64))
        except (IOError, OSError, UnicodeDecodeError):
            continue
    return counters


def load_state(path):
    """The previous run's state, or None (absent, not a regular file, too large, not JSON, another version)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, MAX_STATE_BYTES + 1)
    finally:
        os.close(fd)
    try:
        state = json.loads(data.decode("utf-8")) if len(data) <= MAX_STATE_BYTES else None
    except ValueError:
        return None
    return state if isinstance(state, dict) and state.get("version") == STATE_VERSION else None


def save_state(path, state):
    """Write the state atomically (``_atomic.write_file``: 0600, rename); the error text or None."""
    folder = os.path.dirname(path) or "."
    try:
        if not os.path.isdir(folder):
            os.makedirs(folder, 0o700)
        write_file(path, json.dumps(state, sort_keys=True))
    except (IOError, OSError) as exc:
        return "%s: %s" % (path, getattr(exc, "strerror", None) or exc)
    return None


def add_counters(infiniband, root="/", state_path=None, now=None):
    """Read every port's error counters into ``infiniband`` (the ``collect_infiniband`` facts), compare them with the
    state at ``state_path`` (None: no state, growth unknown) and write the new state; the errors (a list)."""
    now = time.time() if now is None else now
    top = os.path.join(root, "sys", "class", "infiniband")
    for port in infiniband.get("ports") or []:
        port["counters"] = read_port_counters(os.path.join(top, str(port["device"]), "ports", str(port["port"])))
    state = load_state(state_path) if state_path else None
    since, new_state = apply_state(infiniband.get("ports") or [], state, now)
    infiniband["counters_since_seconds"] = since
    infiniband["counters_state"] = state_path
    error = save_state(state_path, new_state) if state_path else None
    return [error] if error else []
