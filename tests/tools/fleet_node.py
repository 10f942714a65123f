# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One node of the test fleet: a PID + mount + UTS namespace whose init is a real sshd on its own loopback address,
in its own memory cgroup; commands over paramiko, and faults injected for real (a stopped sshd, a memory limit, an
OOM kill, an orphan, a tmpfs, a stub binary only this node sees)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import shlex
import shutil
import signal
import subprocess
import time

import paramiko

from fleet_base import NODE_PYTHON, CommandResult, FleetError, kill_quietly, nspids, read_text, write_text
from fleet_cgroups import cgroup_pids, empty_cgroup, remove_cgroup_tree


def missing_prerequisites():
    """Reasons this machine cannot host a fleet ([] when it can)."""
    reasons = []
    if os.geteuid() != 0:
        reasons.append("the fleet needs root (namespaces, cgroups, sshd on port 22)")
    for tool in ("unshare", "ssh-keygen", "ssh"):
        if not shutil.which(tool):
            reasons.append("%s is not installed" % tool)
    if not find_sshd():
        reasons.append("sshd is not installed (apt-get install openssh-server; see tests/system-deps.sh)")
    return reasons


def find_sshd():
    for candidate in ("/usr/sbin/sshd", shutil.which("sshd")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def sshd_version(sshd):
    proc = subprocess.run([sshd, "-V"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
    match = re.search(r"OpenSSH_(\d+)\.(\d+)", proc.stdout.decode("utf-8", "replace"))
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


def sshd_config_text(address, port, host_key, authorized_keys, sshd_ver):
    lines = [
        "ListenAddress %s:%d" % (address, port),
        "HostKey %s" % host_key,
        "PidFile none",
        "AuthorizedKeysFile %s" % authorized_keys,
        "PermitRootLogin prohibit-password",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        "StrictModes no",
        "UseDNS no",
        "PrintMotd no",
        "PrintLastLog no",
        "MaxStartups 100:30:200",
        "MaxSessions 50",
        "Subsystem sftp internal-sftp",
        "LogLevel INFO",
    ]
    if sshd_ver >= (9, 8):
        # 9.8+ penalises addresses that fail auth; all our clients come from 127.0.0.1.
        lines.append("PerSourcePenalties no")
    return "\n".join(lines) + "\n"


class Node:
    """One node of the fleet: a namespace init (sshd) in its own memory cgroup."""

    def __init__(self, fleet, index):
        self.fleet = fleet
        self.index = index
        self.name = "node%d" % index
        self.address = "127.0.%d.%d" % (fleet.slot, 10 + index)
        self.port = fleet.port
        self.cgroup_dir = os.path.join(fleet.cgroup_run_dir, self.name)
        self.config_path = os.path.join(fleet.dir, "sshd-%s.conf" % self.name)
        self.log_path = os.path.join(fleet.dir, "sshd-%s.log" % self.name)
        self.sshd_pid = None     # the namespace init (pid 1 inside), as seen from the host
        self.dirty = False       # a fault was injected; Fleet.heal() restarts the node
        self._launcher = None    # Popen of the unshare process (host side)
        self._client = None
        self._private_dirs = set()

    def __repr__(self):
        return "<Node %s %s sshd=%s>" % (self.name, self.address, self.sshd_pid)

    # --- lifecycle

    def launch(self):
        """Start the namespace + sshd; does not wait for it to accept (see wait_ready)."""
        if not os.path.isdir(self.cgroup_dir):
            os.mkdir(self.cgroup_dir)
        write_text(self.config_path, sshd_config_text(self.address, self.port, self.fleet.host_key,
                                                      self.fleet.authorized_keys, self.fleet.sshd_ver))
        write_text(self.log_path, "")
        # A node is a fresh machine, not this one: the login shell sshd starts for every command would source this
        # machine's ~/.bashrc (here `pyenv init`, whose rehash lock, left behind when a node is killed mid-rehash,
        # makes every later shell on every node wait 60 s). The node's own mount namespace hides it.
        inner = ('hostname "$1" && { [ ! -f "$HOME/.bashrc" ] || mount --bind /dev/null "$HOME/.bashrc"; } '
                 '&& exec "$2" -D -f "$3" -E "$4"')
        outer = 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"'
        argv = ["sh", "-c", outer, "sh", self.cgroup_dir,
                "unshare", "--pid", "--fork", "--mount", "--mount-proc", "--uts",
                "sh", "-c", inner, "sh", self.name, self.fleet.sshd, self.config_path, self.log_path]
        with open(self.log_path, "a") as log:
            self._launcher = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                              stderr=log, start_new_session=True, close_fds=True)
        self.sshd_pid = None

    def _find_init(self):
        for pid in cgroup_pids(self.cgroup_dir):
            ids = nspids(pid)
            if len(ids) >= 2 and ids[-1] == 1:
                return pid
        return None

    def wait_ready(self, timeout=20.0):
        """Wait until the node's init is sshd and it accepts a paramiko login."""
        deadline = time.monotonic() + timeout
        last_error = None
        while time.monotonic() < deadline:
            if self._launcher is not None and self._launcher.poll() is not None:
                raise FleetError("%s: sshd exited with %s before accepting connections; sshd log %s:\n%s"
                                 % (self.name, self._launcher.returncode, self.log_path, self.read_log()))
            if self.sshd_pid is None:
                self.sshd_pid = self._find_init()
            if self.sshd_pid is not None:
                try:
                    self._connect(timeout=2.0)
                    return self
                except (paramiko.SSHException, OSError, EOFError) as exc:
                    last_error = exc
            time.sleep(0.02)
        raise FleetError("%s: sshd on %s:%d did not accept a login within %.0fs (last error: %r); sshd log %s:\n%s"
                         % (self.name, self.address, self.port, timeout, last_error, self.log_path, self.read_log()))

    def read_log(self):
        try:
            return read_text(self.log_path)[-4000:]
        except (IOError, OSError) as exc:
            return "(unreadable: %s)" % exc

    @property
    def running(self):
        return self._launcher is not None and self._launcher.poll() is None

    def stop_sshd(self, timeout=10.0):
        """Kill the namespace init: every process of the node dies, its mounts go with it.

        The node becomes unreachable (connection refused), as a crashed host would.
        """
        self.dirty = True
        self._close_client()
        if self.sshd_pid is None and self.running:
            self.sshd_pid = self._find_init()
        if self.sshd_pid is not None:
            kill_quietly(self.sshd_pid, signal.SIGKILL)
        if self._launcher is not None:
            try:
                self._launcher.wait(timeout)
            except subprocess.TimeoutExpired:
                self._launcher.kill()
                self._launcher.wait(timeout)
        if os.path.isdir(self.cgroup_dir):
            empty_cgroup(self.cgroup_dir, timeout)
        self.sshd_pid = None
        self._private_dirs = set()

    def restart(self, timeout=20.0):
        """A brand-new node under the same name: fresh namespaces, fresh cgroup (counters reset)."""
        self.stop_sshd(timeout)
        remove_cgroup_tree(self.cgroup_dir)
        self.launch()
        self.wait_ready(timeout)
        self.dirty = False
        return self

    # --- ssh

    def _connect(self, timeout=10.0):
        client = paramiko.SSHClient()
        client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
        client.connect(self.address, port=self.port, username="root", key_filename=self.fleet.client_key,
                       timeout=timeout, banner_timeout=timeout, auth_timeout=timeout,
                       allow_agent=False, look_for_keys=False)
        self._close_client()
        self._client = client
        return client

    def _close_client(self):
        if self._client is not None:
            try:
                self._client.close()
            except Exception:  # pylint: disable=broad-except
                pass
            self._client = None

    def run(self, cmd, stdin=None, timeout=60.0, check=False):
        """Run a shell command on the node over paramiko; returns CommandResult(rc, stdout, stderr, duration)."""
        started = time.monotonic()
        client = self._client
        if client is None or client.get_transport() is None or not client.get_transport().is_active():
            client = self._connect()
        chan_in, chan_out, chan_err = client.exec_command(cmd, timeout=timeout)
        if stdin is not None:
            chan_in.write(stdin)
        chan_in.channel.shutdown_write()
        out = chan_out.read().decode("utf-8", "replace")
        err = chan_err.read().decode("utf-8", "replace")
        result = CommandResult(chan_out.channel.recv_exit_status(), out, err, time.monotonic() - started)
        if check and result.rc != 0:
            raise FleetError("%s: %r exited %d\nstdout: %s\nstderr: %s" % (self.name, cmd, result.rc, out, err))
        return result

    # --- faults

    def set_memory_limit(self, limit_bytes):
        """Host-side write of the node cgroup's memory limit (None: unlimited)."""
        self.dirty = True
        cgroups = self.fleet.cgroups
        value = cgroups.unlimited if limit_bytes is None else str(int(limit_bytes))
        write_text(os.path.join(self.cgroup_dir, cgroups.limit_file), value)

    def memory_limit_path(self):
        return os.path.join(self.cgroup_dir, self.fleet.cgroups.limit_file)

    def oom_kill_count(self):
        """OOM kills counted in the node cgroup (v1 memory.oom_control / v2 memory.events), host side."""
        name = "memory.oom_control" if self.fleet.cgroups.version == 1 else "memory.events"
        match = re.search(r"^oom_kill (\d+)$", read_text(os.path.join(self.cgroup_dir, name)), re.M)
        return int(match.group(1)) if match else 0

    def trigger_oom(self, hog_bytes=256 * 1024 ** 2, headroom_bytes=64 * 1024 ** 2):
        """A real OOM kill inside this node's cgroup.

        The limit is set to what the node uses now plus headroom_bytes, then a python3 that
        volunteers to die first (oom_score_adj 1000) fills hog_bytes.  Returns its
        CommandResult (rc 137: killed).  The limit stays; the node is restarted by heal().
        """
        self.dirty = True
        version = self.fleet.cgroups.version
        usage_file = "memory.usage_in_bytes" if version == 1 else "memory.current"
        usage = int(read_text(os.path.join(self.cgroup_dir, usage_file)))
        limit = usage + int(headroom_bytes)
        self.set_memory_limit(limit)
        swap_file = os.path.join(self.cgroup_dir, "memory.memsw.limit_in_bytes" if version == 1 else "memory.swap.max")
        if os.path.exists(swap_file):
            # No swap either, or the hog is swapped out instead of killed.
            write_text(swap_file, str(limit) if version == 1 else "0")
        hog = ("import sys; open('/proc/self/oom_score_adj', 'w').write('1000'); "
               "hog = b'x' * %d; sys.exit('not killed: limit too high')" % int(hog_bytes))
        # "; exit $?" keeps the shell as the parent, so a SIGKILL reads as rc 137.
        return self.run("%s -c %s; exit $?" % (NODE_PYTHON, shlex.quote(hog)), timeout=120)

    def spawn_orphan(self, name, seconds=600):
        """Leave a copy of /bin/sleep named `name` running as an orphan (ppid 1 in the node).

        Returns its pid inside the node.
        """
        if "/" in name or not name:
            raise ValueError("spawn_orphan: name must be a plain file name, got %r" % name)
        self.dirty = True
        binary = os.path.join(self.fleet.bin_dir, name)
        if not os.path.exists(binary):
            shutil.copy2("/bin/sleep", binary)
        # The subshell forks the sleeper and exits at once, so the sleeper's parent is gone
        # and the kernel re-parents it to the namespace init (sshd, pid 1 in the node).
        cmd = "( %s %d </dev/null >/dev/null 2>&1 & echo $! )" % (shlex.quote(binary), int(seconds))
        result = self.run(cmd, check=True)
        pid = int(result.stdout.strip())
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            status = self.run("cat /proc/%d/status" % pid)
            if re.search(r"^PPid:\s+1$", status.stdout, re.M):
                return pid
            time.sleep(0.05)
        raise FleetError("%s: orphan %s (pid %d) was not re-parented to pid 1: %s" % (self.name, name, pid, status.stdout))

    def mount_tmpfs(self, path, size):
        """Mount a tmpfs of `size` (bytes or a mount size string like 64m) at path, inside this node only."""
        self.dirty = True
        cmd = "mkdir -p %s && mount -t tmpfs -o size=%s gpufleet-%s %s" % (
            shlex.quote(path), shlex.quote(str(size)), self.name, shlex.quote(path))
        self.run(cmd, check=True)

    def _privatize_dir(self, directory):
        """Cover directory with a node-private tmpfs that starts as a copy of what was there."""
        if directory in self._private_dirs:
            return
        # fd 3 keeps the covered directory reachable so its entries can be copied on top.
        quoted = shlex.quote(directory)
        cmd = ("mkdir -p {d} && exec 3<{d} && mount -t tmpfs -o size=64m,mode=0755 gpufleet-stubs {d} && "
               "cp -a /proc/self/fd/3/. {d}/ && exec 3<&-").format(d=quoted)
        self.run(cmd, check=True)
        self._private_dirs.add(directory)

    def put_stub(self, path, content, mode=0o755):
        """Place a file (e.g. a stub nvidia-smi in /usr/local/sbin) on a tmpfs only this node sees.

        Its directory gets a private tmpfs holding a copy of the original entries, so the host
        and the other nodes keep seeing the real directory.
        """
        if not os.path.isabs(path):
            raise ValueError("put_stub: path must be absolute, got %r" % path)
        directory = os.path.dirname(path)
        if directory in ("/", "/usr/local/bin", "/usr/bin", "/bin"):
            raise ValueError("put_stub: refusing to cover %s (nvcc and the system tools live there)" % directory)
        self.dirty = True
        self._privatize_dir(directory)
        if isinstance(content, str):
            content = content.encode("utf-8")
        self.run("cat > %s && chmod %o %s" % (shlex.quote(path), mode, shlex.quote(path)), stdin=content, check=True)
