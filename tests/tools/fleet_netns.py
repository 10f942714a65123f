# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A private network namespace for the test process: slurmctld and slurmd bind 0.0.0.0 whatever slurm.conf says, so
the test process enters a network namespace of its own (setns on its main thread) and the fleet's sshd nodes,
ansible-playbook, ssh, the Slurm daemons and node_exporter started from it all live there; nothing listens on
the host's interfaces."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil
import subprocess

from fleet_base import FleetError
from fleet_node import missing_prerequisites


CLONE_NEWNET = 0x40000000
NETNS_EXTRA_ADDRESS = "127.0.62.1/32"  # glibc's AI_ADDRCONFIG needs an address besides 127.0.0.1 (else Slurm retries)


def _setns(fd, nstype):
    import ctypes  # pylint: disable=import-outside-toplevel
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, nstype) != 0:
        err = ctypes.get_errno()
        raise FleetError("setns: %s" % os.strerror(err))


def netns_missing_prerequisites():
    reasons = missing_prerequisites()
    for tool in ("ip", "nsenter"):
        if not shutil.which(tool):
            reasons.append("%s is not installed" % tool)
    return reasons


class NetNamespace:
    """A network namespace held by a sleeping process; enter() moves this process's main thread into it."""

    def __init__(self):
        self.holder = None
        self._home_fd = None

    def start(self):
        script = 'ip link set lo up && ip addr add %s dev lo && echo up && exec sleep 86400' % NETNS_EXTRA_ADDRESS
        self.holder = subprocess.Popen(["unshare", "--net", "sh", "-c", script], stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, start_new_session=True)
        line = self.holder.stdout.readline().decode().strip()
        if line != "up":
            err = self.holder.stderr.read().decode("utf-8", "replace") if self.holder.poll() is not None else ""
            self.stop()
            raise FleetError("network namespace did not come up: %r %s" % (line, err))
        # the holder is `sleep` now (exec), in the namespace
        return self

    def enter(self):
        self._home_fd = os.open("/proc/self/ns/net", os.O_RDONLY)
        fd = os.open("/proc/%d/ns/net" % self.holder.pid, os.O_RDONLY)
        try:
            _setns(fd, CLONE_NEWNET)
        finally:
            os.close(fd)
        return self

    def leave(self):
        if self._home_fd is not None:
            try:
                _setns(self._home_fd, CLONE_NEWNET)
            finally:
                os.close(self._home_fd)
                self._home_fd = None

    def stop(self):
        self.leave()
        if self.holder is not None and self.holder.poll() is None:
            self.holder.kill()
            self.holder.wait(10)
        self.holder = None
