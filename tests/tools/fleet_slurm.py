# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A real Slurm cluster on the test fleet, inside the private network namespace (fleet_netns.py): munged and
slurmctld on the namespace's host side, one slurmd inside each fleet node."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil
import signal
import subprocess
import time

from fleet_base import CommandResult, FleetError, kill_quietly, nspids, pid_alive, read_text, write_text
from fleet_cgroups import cgroup_pids
from fleet_netns import netns_missing_prerequisites


SLURM_BINARIES = ("munged", "slurmctld", "slurmd", "scontrol", "sinfo", "sbatch")


def slurm_missing_prerequisites():
    reasons = netns_missing_prerequisites()
    for tool in SLURM_BINARIES:
        if not shutil.which(tool) and not os.path.exists("/usr/sbin/" + tool):
            reasons.append("%s is not installed (apt-get install slurm-wlm munge; see tests/system-deps.sh)" % tool)
    return reasons


class SlurmCluster:
    """munged + slurmctld on the host side of the namespace, one slurmd inside each fleet node (its own PID, mount
    and UTS namespace and cgroup, so a HealthCheckProgram sees what that node sees); every daemon stopped by pid."""

    CTLD_PORT = 16817

    def __init__(self, fleet, health_check_interval=0):
        self.fleet = fleet
        self.dir = os.path.join(fleet.dir, "slurm")
        self.conf = os.path.join(self.dir, "slurm.conf")
        self.socket = os.path.join(self.dir, "munge.sock")
        # slurmd runs this at start and every interval: a wrapper that runs the installed check when there is one.
        self.health_check_wrapper = os.path.join(self.dir, "healthcheck.sh")
        self.health_check_target = os.path.join(self.dir, "hc", "gpufleet-health-check")
        # Slurm's Prolog: runs prolog_target when a test made it executable, else does nothing (issue 38.3).
        self.prolog_wrapper = os.path.join(self.dir, "prolog.sh")
        self.prolog_target = os.path.join(self.dir, "hc", "gpufleet-prolog")
        # Slurm's RebootProgram (``scontrol reboot``): runs reboot_target when a test made it executable (issue 38.2).
        self.reboot_wrapper = os.path.join(self.dir, "reboot.sh")
        self.reboot_target = os.path.join(self.dir, "hc", "gpufleet-reboot")
        self.interval = int(health_check_interval)
        self.pids = {}
        self.env = dict(os.environ, SLURM_CONF=self.conf)

    def node_port(self, node):
        return 17010 + node.index

    def config_text(self):
        lines = [
            "ClusterName=gpufleet",
            "SlurmctldHost=localhost(127.0.0.1)",
            "SlurmctldPort=%d" % self.CTLD_PORT,
            "AuthType=auth/munge", "CredType=cred/munge", "AuthInfo=socket=%s" % self.socket,
            "SlurmUser=root", "SlurmdUser=root",
            "StateSaveLocation=%s/ctld" % self.dir, "SlurmdSpoolDir=%s/spool-%%n" % self.dir,
            "SlurmctldPidFile=%s/slurmctld.pid" % self.dir, "SlurmdPidFile=%s/slurmd-%%n.pid" % self.dir,
            "SlurmctldLogFile=%s/slurmctld.log" % self.dir, "SlurmdLogFile=%s/slurmd-%%n.log" % self.dir,
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none", "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core", "ReturnToService=2", "MpiDefault=none", "MailProg=/bin/true",
            "SlurmdTimeout=10", "SlurmctldTimeout=30", "MessageTimeout=5",
        ]
        if self.interval:
            lines += ["HealthCheckProgram=%s" % self.health_check_wrapper, "HealthCheckInterval=%d" % self.interval,
                      "HealthCheckNodeState=ANY"]
        lines.append("Prolog=%s" % self.prolog_wrapper)
        lines += ["RebootProgram=%s" % self.reboot_wrapper, "ResumeTimeout=60"]
        for node in self.fleet.nodes:
            lines.append("NodeName=%s NodeHostname=%s NodeAddr=%s Port=%d CPUs=1 RealMemory=100"
                         % (node.name, node.name, node.address, self.node_port(node)))
        lines.append("PartitionName=build Nodes=ALL Default=YES State=UP MaxTime=INFINITE")
        return "\n".join(lines) + "\n"

    def start(self, timeout=30.0):
        started = time.monotonic()
        os.makedirs(os.path.join(self.dir, "ctld"))
        os.makedirs(os.path.dirname(self.health_check_target))
        write_text(self.conf, self.config_text())
        write_text(self.health_check_wrapper, '#!/bin/sh\n[ -x "%s" ] || exit 0\nexec "%s"\n'
                   % (self.health_check_target, self.health_check_target))
        os.chmod(self.health_check_wrapper, 0o755)
        write_text(self.prolog_wrapper, '#!/bin/sh\n[ -x "%s" ] || exit 0\nexec "%s"\n' % (self.prolog_target, self.prolog_target))
        os.chmod(self.prolog_wrapper, 0o755)
        write_text(self.reboot_wrapper, '#!/bin/sh\n[ -x "%s" ] || exit 0\nexec "%s"\n' % (self.reboot_target, self.reboot_target))
        os.chmod(self.reboot_wrapper, 0o755)
        key = os.path.join(self.dir, "munge.key")
        with open(key, "wb") as handle:
            handle.write(os.urandom(1024))
        os.chmod(key, 0o600)
        try:
            self._daemon("munged", ["munged", "-F", "--force", "--socket=%s" % self.socket, "--key-file=%s" % key,
                                    "--pid-file=%s/munged.pid" % self.dir, "--log-file=%s/munged.log" % self.dir,
                                    "--seed-file=%s/munged.seed" % self.dir])
            self._wait(lambda: os.path.exists(self.socket), timeout, "munged socket")
            self._daemon("slurmctld", ["slurmctld", "-D", "-f", self.conf])
            self._wait(lambda: "UP" in self.scontrol("ping").stdout, timeout, "slurmctld (scontrol ping)")
            for node in self.fleet.nodes:
                self.start_slurmd(node)
            self.wait_states(dict((n.name, "idle") for n in self.fleet.nodes), timeout)
        except BaseException:
            self.stop()
            raise
        self.fleet.timings["slurm_start_seconds"] = time.monotonic() - started
        return self

    def _daemon(self, name, argv):
        log = open(os.path.join(self.dir, "%s.out" % name), "ab")
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=self.env,
                                start_new_session=True, close_fds=True)
        log.close()
        self.pids[name] = proc

    def start_slurmd(self, node):
        """slurmd -D -N <node> inside the node (over its sshd: its namespaces and cgroup); its host pid recorded."""
        cmd = ("SLURM_CONF=%s setsid slurmd -D -N %s -f %s </dev/null >>%s/slurmd-%s.out 2>&1 & echo $!"
               % (self.conf, node.name, self.conf, self.dir, node.name))
        inner = int(node.run(cmd, check=True).stdout.strip())
        for pid in cgroup_pids(node.cgroup_dir):
            ids = nspids(pid)
            if ids and ids[-1] == inner:
                self.pids["slurmd-" + node.name] = pid
                return pid
        raise FleetError("%s: slurmd (pid %d in the node) not found in its cgroup" % (node.name, inner))

    def adopt_slurmd(self, node, timeout=30.0):
        """The slurmd a node started itself (a stand-in reboot restarts it) as the one stopped at the end."""
        found = []

        def started():
            for pid in cgroup_pids(node.cgroup_dir):
                try:
                    with open("/proc/%d/comm" % pid) as handle:
                        if handle.read().strip() == "slurmd" and pid != self.pids.get("slurmd-" + node.name):
                            found.append(pid)
                            return True
                except (IOError, OSError):
                    continue
            return False
        self._wait(started, timeout, "a new slurmd on %s" % node.name)
        self.pids["slurmd-" + node.name] = found[0]
        return found[0]

    def stop_slurmd(self, node):
        pid = self.pids.pop("slurmd-" + node.name, None)
        if pid is not None:
            kill_quietly(pid, signal.SIGTERM)
            self._wait(lambda: not pid_alive(pid), 10, "slurmd of %s to exit" % node.name, raise_=False)
            kill_quietly(pid, signal.SIGKILL)

    def _end_daemon(self, name):
        """A daemon this cluster started (slurmctld, munged): SIGTERM, 10 s, then SIGKILL."""
        proc = self.pids.pop(name, None)
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)

    def stop_slurmctld(self):
        self._end_daemon("slurmctld")

    def start_slurmctld(self, timeout=30.0):
        self._daemon("slurmctld", ["slurmctld", "-D", "-f", self.conf])
        self._wait(lambda: "UP" in self.scontrol("ping").stdout, timeout, "slurmctld (scontrol ping)")

    def ensure_running(self, nodes):
        """slurmctld and each node's slurmd up again when a test stopped one and failed before starting it (its
        later tests would otherwise wait on a node that stays down*)."""
        if self.pids.get("slurmctld") is None or self.pids["slurmctld"].poll() is not None:
            self.pids.pop("slurmctld", None)
            self.start_slurmctld()
        for node in nodes:
            pid = self.pids.get("slurmd-" + node.name)
            if pid is None or not pid_alive(pid):
                self.pids.pop("slurmd-" + node.name, None)
                self.start_slurmd(node)

    def stop(self):
        for name in [key for key in self.pids if key.startswith("slurmd-")]:
            self.stop_slurmd(self.fleet[name[len("slurmd-"):]])
        self.stop_slurmctld()
        self._end_daemon("munged")

    @staticmethod
    def _wait(predicate, timeout, what, raise_=True):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return True
            time.sleep(0.1)
        if raise_:
            raise FleetError("timed out after %.0fs waiting for %s" % (timeout, what))
        return False

    def command(self, argv, timeout=30):
        started = time.monotonic()
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env, timeout=timeout,
                              check=False)
        return CommandResult(proc.returncode, proc.stdout.decode("utf-8", "replace"),
                             proc.stderr.decode("utf-8", "replace"), time.monotonic() - started)

    def scontrol(self, *args):
        return self.command(["scontrol"] + list(args))

    def node_info(self, name):
        """dict(state, time, user, reason) as sinfo prints them."""
        out = self.command(["sinfo", "-h", "-N", "-n", name, "-o", "%T|%H|%u|%E"]).stdout.splitlines()
        if not out:
            return None
        state, when, user, reason = out[0].split("|", 3)
        return dict(state=state, time=when, user=user, reason=reason)

    def wait_states(self, wanted, timeout=30.0):
        """Wait until each node's state (sinfo %T) is the one wanted; {name: state}."""
        last = {}

        def done():
            for name, state in wanted.items():
                last[name] = (self.node_info(name) or {}).get("state")
            return all(last[name] == state for name, state in wanted.items())
        if not self._wait(done, timeout, "", raise_=False):
            raise FleetError("Slurm node states %s, wanted %s; slurmctld log tail:\n%s"
                             % (last, wanted, read_text(os.path.join(self.dir, "slurmctld.log"))[-3000:]))
        return last

    def reset_node(self, name):
        """Back to idle with no reason, whoever drained it (test cleanup)."""
        self.scontrol("update", "NodeName=%s" % name, "State=RESUME")
