# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node subset on this host: the real /proc, /sys and adjtimex (issue 30 item 4)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil
import subprocess
import time

from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _node


def test_this_host():
    """The real /proc, /sys and adjtimex of this machine: this very process is a running python."""
    facts = _node.collect_node([os.path.basename(os.path.realpath("/proc/self/exe"))])
    assert list(facts["services"].values())[0]["running"] is True
    assert facts["cpu_topology"]["threads"] >= 1 and facts["cpu_topology"]["sockets"] >= 1
    assert facts["clock"]["synchronized"] in (True, False) and facts["clock"]["state"] in range(6)


def test_a_daemon_is_found_by_its_executable_name_and_gone_when_it_stops(tmp_path):
    """A copy of sleep named munged is the service; once ended, the check's facts say it is not running."""
    daemon = tmp_path / "munged"
    shutil.copy("/bin/sleep", str(daemon))
    proc = subprocess.Popen([str(daemon), "60"])
    try:
        time.sleep(0.2)
        facts = _node.collect_node(["munged"])
        assert facts["services"]["munged"]["running"] is True and proc.pid in facts["services"]["munged"]["pids"]
    finally:
        proc.kill()
        proc.wait()
    assert _node.collect_node(["munged"])["services"]["munged"]["pids"].count(proc.pid) == 0


def test_the_clock_as_the_kernel_keeps_it():
    """adjtimex says what timedatectl would; this machine has no NTP daemon (state 5, max error 16 s)."""
    clock = _node.collect_node([])["clock"]
    assert set(clock) == {"synchronized", "state", "max_error_seconds"}
    assert clock["state"] in range(6) and clock["max_error_seconds"] >= 0
    if clock["state"] == _node.TIME_ERROR:
        assert clock["synchronized"] is False
