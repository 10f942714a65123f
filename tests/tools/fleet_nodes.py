# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet: N nodes (fleet_node.Node) on a loopback address block of their own, their keys and their inventory;
start(n) brings them up, heal() restarts the ones a test broke, stop() removes every trace."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fcntl
import os
import shutil
import socket
import subprocess
import tempfile
import time

import yaml

from fleet_base import DEFAULT_FLEET_SIZE, NODE_PYTHON, RUN_ID_PREFIX, FleetError, kill_quietly, processes_mentioning
from fleet_cgroups import MemoryCgroups, reap_stale_fleets, remove_cgroup_tree
from fleet_node import Node, find_sshd, missing_prerequisites, sshd_version


def fleet_size_from_env(default=DEFAULT_FLEET_SIZE):
    raw = os.environ.get("GPUFLEET_FLEET_SIZE", "")
    if not raw:
        return default
    try:
        size = int(raw)
    except ValueError:
        raise FleetError("GPUFLEET_FLEET_SIZE must be a whole number, got %r" % raw)
    if not 1 <= size <= 200:
        raise FleetError("GPUFLEET_FLEET_SIZE must be between 1 and 200, got %d" % size)
    return size


def address_free(address, port):
    """True when nothing listens on address:port (a connect is refused)."""
    try:
        socket.create_connection((address, port), timeout=1).close()
    except ConnectionRefusedError:
        return True
    except OSError:
        return False
    return False


def acquire_slot(port, lock_dir=None, max_slots=255):
    """Reserve an address block 127.0.<slot>.11.. for one fleet: (slot, locked fd).

    Slot 0 (127.0.0.11..) first; fleets alive at the same time (a fresh fleet beside the
    session one, pytest-xdist workers) take the next free slot.  The flock dies with the
    process, so a crashed run never blocks a slot.
    """
    lock_dir = lock_dir or tempfile.gettempdir()
    for slot in range(max_slots):
        path = os.path.join(lock_dir, "gpufleet-slot-%d.lock" % slot)
        fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            # A holder may have unlinked the file between our open and flock: retry then.
            if os.fstat(fd).st_ino == os.stat(path).st_ino and address_free("127.0.%d.11" % slot, port):
                return slot, fd, path
        except OSError:
            pass
        os.close(fd)
    raise FleetError("no free loopback address block 127.0.N.11.. for a fleet on port %d" % port)


def release_slot(fd, path):
    try:
        os.unlink(path)
    except OSError:
        pass
    os.close(fd)


def _in_fleet_dir(name):
    """A read-only attribute: ``name`` inside the fleet's directory (made by start())."""
    return property(lambda fleet: os.path.join(fleet.dir, name))


class Fleet:
    """N nodes; start(n) brings them up and writes the inventory, stop() removes every trace."""

    def __init__(self, port=None):
        problems = missing_prerequisites()
        if problems:
            raise FleetError("; ".join(problems))
        self.port = int(port if port is not None else os.environ.get("GPUFLEET_FLEET_PORT", "22"))
        self.sshd = find_sshd()
        self.sshd_ver = sshd_version(self.sshd)
        self.cgroups = MemoryCgroups.detect()
        self.run_id = "%s%d-%s" % (RUN_ID_PREFIX, os.getpid(), os.urandom(4).hex())
        self.dir = None
        self.cgroup_run_dir = os.path.join(self.cgroups.base_dir, self.run_id)
        self.nodes = []
        self.timings = {}
        self.slot = None
        self._slot_lock = None

    # paths inside the fleet dir
    client_key = _in_fleet_dir("id_ed25519")
    host_key = _in_fleet_dir("ssh_host_ed25519_key")
    authorized_keys = _in_fleet_dir("authorized_keys")
    inventory_path = _in_fleet_dir("inventory.yml")
    bin_dir = _in_fleet_dir("bin")
    control_path = _in_fleet_dir("cp-%C")

    def __getitem__(self, name):
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.stop()

    def start(self, n=None, timeout=30.0):
        n = fleet_size_from_env() if n is None else int(n)
        if not 1 <= n <= 200:
            raise FleetError("fleet size must be between 1 and 200, got %d" % n)
        started = time.monotonic()
        reap_stale_fleets(self.cgroups)
        self.dir = os.path.join(tempfile.gettempdir(), self.run_id)
        os.mkdir(self.dir, 0o700)
        os.mkdir(self.bin_dir)
        try:
            self.slot, fd, path = acquire_slot(self.port)
            self._slot_lock = (fd, path)
            self._make_keys()
            if not os.path.isdir("/run/sshd"):
                os.makedirs("/run/sshd", 0o755)
            self.cgroup_run_dir = self.cgroups.make_run_dir(self.run_id)
            self.nodes = [Node(self, i) for i in range(1, n + 1)]
            for node in self.nodes:
                node.launch()
            for node in self.nodes:
                node.wait_ready(timeout)
            self._write_inventory()
        except BaseException:
            self.stop()
            raise
        self.timings["start_seconds"] = time.monotonic() - started
        return self

    def _make_keys(self):
        for path, comment in ((self.client_key, "gpufleet-client"), (self.host_key, "gpufleet-host")):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", path],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        shutil.copy(self.client_key + ".pub", self.authorized_keys)

    def ssh_args(self):
        return ("-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o IdentitiesOnly=yes "
                "-o ControlMaster=auto -o ControlPersist=30s -o ControlPath=%s" % self.control_path)

    def inventory(self):
        hosts = {}
        for node in self.nodes:
            hosts[node.name] = {"ansible_host": node.address}
            if node.port != 22:
                hosts[node.name]["ansible_port"] = node.port
        return {"all": {
            "hosts": hosts,
            "vars": {
                "ansible_user": "root",
                "ansible_ssh_private_key_file": self.client_key,
                "ansible_python_interpreter": NODE_PYTHON,
                # ansible_ssh_args replaces ansible.cfg's ssh_args, so the ControlPersist
                # masters live under the fleet dir where stop() finds them.
                "ansible_ssh_args": self.ssh_args(),
                # The fleet's host key is made fresh for every run, so this throwaway inventory (never
                # the repository's ansible.cfg, which checks host keys) turns checking off.
                "ansible_host_key_checking": False,
            },
        }}

    def _write_inventory(self):
        with open(self.inventory_path, "w") as handle:
            yaml.safe_dump(self.inventory(), handle, default_flow_style=False, sort_keys=True)

    def heal(self):
        """Restart every node a test injected a fault into (or that is down)."""
        for node in self.nodes:
            if node.dirty or not node.running:
                node.restart()

    def stop_control_masters(self):
        if not self.dir or not os.path.isdir(self.dir):
            return
        for entry in os.listdir(self.dir):
            if entry.startswith("cp-"):
                subprocess.run(["ssh", "-o", "ControlPath=%s" % os.path.join(self.dir, entry), "-O", "exit", "fleet-node"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10, check=False)
        # ssh masters retitle themselves "ssh: <ControlPath> [mux]"; end any left behind.
        for pid, _cmd in processes_mentioning(self.dir):
            kill_quietly(pid)

    def stop(self):
        """Remove every process, cgroup, mount and ssh master of the fleet, whatever state it is in."""
        started = time.monotonic()
        errors = []
        for node in self.nodes:
            node._close_client()  # pylint: disable=protected-access
            if node.sshd_pid is None and node.running:
                node.sshd_pid = node._find_init()  # pylint: disable=protected-access
            if node.sshd_pid is not None:
                kill_quietly(node.sshd_pid)
        for node in self.nodes:
            try:
                node.stop_sshd()
            except Exception as exc:  # pylint: disable=broad-except
                errors.append("%s: %s" % (node.name, exc))
        try:
            self.stop_control_masters()
        except Exception as exc:  # pylint: disable=broad-except
            errors.append("ssh control masters: %s" % exc)
        try:
            remove_cgroup_tree(self.cgroup_run_dir)
        except FleetError as exc:
            errors.append(str(exc))
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
        if self._slot_lock is not None:
            release_slot(*self._slot_lock)
            self._slot_lock = None
        self.timings["stop_seconds"] = time.monotonic() - started
        if errors:
            raise FleetError("fleet teardown incomplete: " + "; ".join(errors))
