# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function
__metaclass__ = type

"""A fleet of N real nodes on this one machine, for tests.

Each node is its own PID + mount + UTS namespace (own /proc, own hostname), its own memory
cgroup, and a real sshd on its own loopback address 127.0.0.(10+N) (127.0.S.(10+N) for the S-th
fleet alive at the same time, e.g. under pytest-xdist), port 22, so to Ansible (ssh and
paramiko) it is a separate host.  Faults are injected for real and per node: a stopped
sshd (the node is gone), a memory limit, an orphaned process, a tmpfs over a path, a stub
binary on a private tmpfs.

    fleet = Fleet().start(8)
    try:
        fleet.nodes[0].run("hostname").stdout   # "node1\n"
    finally:
        fleet.stop()                             # every process, cgroup, mount, ssh master

Controller-side test code: needs root, unshare(1), sshd(8), ssh-keygen(1), paramiko, PyYAML.
"""

import collections
import errno
import fcntl
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import paramiko
import yaml

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV_BIN = os.path.join(REPO_ROOT, ".venv", "bin")
ANSIBLE_CONFIG = os.path.join(REPO_ROOT, "ansible.cfg")
COLLECTIONS_PATH = os.path.join(REPO_ROOT, ".tmp", "collections")

RUN_ID_PREFIX = "gpufleet-test-"   # the policy default oom_ignore_cgroups leaves the fleet's kills out of the host's verdict
RUN_ID_RE = re.compile(r"^gpufleet-(\d+)-[0-9a-f]{8}$")
DEFAULT_FLEET_SIZE = 8
NODE_PYTHON = "/usr/bin/python3"

# Seconds measured by the fixtures and tests, printed in the pytest summary.
TIMINGS = {}

CommandResult = collections.namedtuple("CommandResult", "rc stdout stderr duration")


class FleetError(Exception):
    """The fleet could not be brought up (or down); the message says why."""


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


# ---------------------------------------------------------------- cgroups

class MemoryCgroups:
    """Where memory cgroups live for this process: v1 (memory controller hierarchy) or v2."""

    def __init__(self, version, base_dir):
        self.version = version
        self.base_dir = base_dir

    @property
    def limit_file(self):
        return "memory.limit_in_bytes" if self.version == 1 else "memory.max"

    @property
    def unlimited(self):
        return "-1" if self.version == 1 else "max"

    @classmethod
    def detect(cls, proc_self_cgroup="/proc/self/cgroup", root="/sys/fs/cgroup"):
        with open(proc_self_cgroup) as handle:
            lines = handle.read().splitlines()
        v2_path = None
        for line in lines:
            hierarchy, controllers, path = line.split(":", 2)
            if "memory" in controllers.split(","):
                return cls(1, os.path.join(root, "memory") + path.rstrip("/"))
            if hierarchy == "0" and controllers == "":
                v2_path = path
        controllers_file = os.path.join(root, "cgroup.controllers")
        if v2_path is not None and os.path.exists(controllers_file):
            with open(controllers_file) as handle:
                if "memory" in handle.read().split():
                    return cls(2, root + v2_path.rstrip("/"))
        raise FleetError("no memory cgroup controller found (neither v1 %s/memory nor v2 %s with memory in cgroup.controllers)"
                         % (root, root))

    def make_run_dir(self, run_id):
        """Create the fleet's cgroup (v2: with memory delegated to the node cgroups); its path."""
        if self.version == 1:
            run_dir = os.path.join(self.base_dir, run_id)
            os.mkdir(run_dir)
            return run_dir
        # v2: the no-internal-processes rule forbids enabling memory below a cgroup that
        # holds processes (ours), so when our own cgroup cannot delegate, try its parent.
        problems = []
        for base in (self.base_dir, os.path.dirname(self.base_dir)):
            run_dir = os.path.join(base, run_id)
            try:
                os.mkdir(run_dir)
                if "memory" not in read_text(os.path.join(run_dir, "cgroup.controllers")).split():
                    write_text(os.path.join(base, "cgroup.subtree_control"), "+memory")
                write_text(os.path.join(run_dir, "cgroup.subtree_control"), "+memory")
                self.base_dir = base
                return run_dir
            except (IOError, OSError) as exc:
                problems.append("%s: %s" % (base, exc))
                if os.path.isdir(run_dir):
                    os.rmdir(run_dir)
        raise FleetError("cgroup v2: cannot delegate the memory controller to a fleet cgroup (%s); run the tests "
                         "from a cgroup whose parent enables memory in cgroup.subtree_control" % "; ".join(problems))

    def stale_search_dirs(self):
        return [self.base_dir] if self.version == 1 else [self.base_dir, os.path.dirname(self.base_dir)]


def read_text(path):
    with open(path) as handle:
        return handle.read()


def write_text(path, text):
    with open(path, "w") as handle:
        handle.write(text)


def cgroup_pids(cgroup_dir):
    """Every pid in a cgroup (cgroup.procs and, on v1, tasks); [] when the cgroup is gone."""
    pids = set()
    for name in ("cgroup.procs", "tasks"):
        try:
            pids.update(int(p) for p in read_text(os.path.join(cgroup_dir, name)).split())
        except (IOError, OSError):
            pass
    return sorted(pids)


def empty_cgroup(cgroup_dir, timeout=10.0):
    """Kill everything in a cgroup and wait until it is empty."""
    deadline = time.monotonic() + timeout
    while True:
        pids = cgroup_pids(cgroup_dir)
        if not pids:
            return
        if time.monotonic() > deadline:
            raise FleetError("cgroup %s still holds pids %s after %.0fs" % (cgroup_dir, pids, timeout))
        for pid in pids:
            kill_quietly(pid, signal.SIGKILL)
        time.sleep(0.02)


def remove_cgroup_tree(top, timeout=10.0):
    """Empty and rmdir a cgroup and everything below it, bottom-up."""
    if not os.path.isdir(top):
        return
    for dirpath, dirnames, _files in os.walk(top, topdown=False):
        del dirnames
        empty_cgroup(dirpath, timeout)
        deadline = time.monotonic() + timeout
        while True:
            try:
                os.rmdir(dirpath)
                break
            except OSError as exc:
                if exc.errno == errno.ENOENT:
                    break
                if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                    raise FleetError("cannot remove cgroup %s: %s" % (dirpath, exc))
                empty_cgroup(dirpath, timeout)
                time.sleep(0.02)


# ---------------------------------------------------------------- processes

def kill_quietly(pid, sig=signal.SIGKILL):
    try:
        os.kill(pid, sig)
    except OSError:
        pass


def pid_alive(pid):
    """True for a live process; a zombie (dead, not yet reaped) counts as gone."""
    try:
        os.kill(pid, 0)
    except OSError as exc:
        if exc.errno != errno.EPERM:
            return False
    try:
        return not re.search(r"^State:\s+Z", read_text("/proc/%d/status" % pid), re.M)
    except (IOError, OSError):
        return False


def nspids(pid):
    """The NSpid line of /proc/<pid>/status: [host pid, ..., innermost pid]."""
    try:
        for line in read_text("/proc/%d/status" % pid).splitlines():
            if line.startswith("NSpid:"):
                return [int(p) for p in line.split()[1:]]
    except (IOError, OSError):
        pass
    return []


def processes_mentioning(needle):
    """Host pids whose command line contains needle (e.g. a fleet dir)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % entry, "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except (IOError, OSError):
            continue
        if needle in cmdline:
            found.append((int(entry), cmdline.strip()))
    return found


def reap_stale_fleets(cgroups, tmp_root=None):
    """Remove cgroups and dirs left by fleets whose owning process died without teardown."""
    tmp_root = tmp_root or tempfile.gettempdir()
    reaped = []
    cgroup_bases = cgroups.stale_search_dirs()
    for base in cgroup_bases + [tmp_root]:
        try:
            entries = os.listdir(base)
        except OSError:
            continue
        for entry in entries:
            match = RUN_ID_RE.match(entry)
            if not match or pid_alive(int(match.group(1))):
                continue
            path = os.path.join(base, entry)
            if base in cgroup_bases:
                remove_cgroup_tree(path)
            else:
                for pid, _cmd in processes_mentioning(path):
                    kill_quietly(pid)
                shutil.rmtree(path, ignore_errors=True)
            reaped.append(path)
    return reaped


# ---------------------------------------------------------------- address slots

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


# ---------------------------------------------------------------- ssh

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


# ---------------------------------------------------------------- nodes

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


# ---------------------------------------------------------------- the fleet

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
    @property
    def client_key(self):
        return os.path.join(self.dir, "id_ed25519")

    @property
    def host_key(self):
        return os.path.join(self.dir, "ssh_host_ed25519_key")

    @property
    def authorized_keys(self):
        return os.path.join(self.dir, "authorized_keys")

    @property
    def inventory_path(self):
        return os.path.join(self.dir, "inventory.yml")

    @property
    def bin_dir(self):
        return os.path.join(self.dir, "bin")

    @property
    def control_path(self):
        return os.path.join(self.dir, "cp-%C")

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


# ---------------------------------------------------------------- ansible

def ansible_env(env=None):
    merged = dict(os.environ)
    merged.update({
        "ANSIBLE_CONFIG": ANSIBLE_CONFIG,
        "ANSIBLE_COLLECTIONS_PATH": COLLECTIONS_PATH,
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_DEPRECATION_WARNINGS": "0",
        "PATH": VENV_BIN + os.pathsep + merged.get("PATH", ""),
    })
    if env:
        merged.update(env)
    return merged


def _run_ansible_tool(argv, env, timeout):
    started = time.monotonic()
    # A directory of its own, not the checkout: the playbooks write reports/ into the directory they start in unless
    # told otherwise, and `make test` left the checkout's reports/ behind (tests/tools/checkout_clean.py).
    cwd = tempfile.mkdtemp(prefix="gpufleet-ansible-cwd-")
    try:
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ansible_env(env),
                              cwd=cwd, timeout=timeout, check=False)
    finally:
        shutil.rmtree(cwd, ignore_errors=True)
    return CommandResult(proc.returncode, proc.stdout.decode("utf-8", "replace"),
                         proc.stderr.decode("utf-8", "replace"), time.monotonic() - started)


def run_playbook(playbook, inventory, extra_vars=None, env=None, args=(), timeout=900):
    """ansible-playbook from the project venv with the project's ansible.cfg; CommandResult back."""
    argv = [os.path.join(VENV_BIN, "ansible-playbook"), "-i", inventory]
    if extra_vars:
        argv += ["-e", json.dumps(extra_vars)]
    argv += list(args) + [playbook]
    return _run_ansible_tool(argv, env, timeout)


def run_adhoc(pattern, inventory, module, module_args=None, env=None, args=(), timeout=300):
    """`ansible <pattern> -m <module>` from the project venv; CommandResult back."""
    argv = [os.path.join(VENV_BIN, "ansible"), pattern, "-i", inventory, "-m", module]
    if module_args:
        argv += ["-a", module_args if isinstance(module_args, str) else json.dumps(module_args)]
    argv += list(args)
    return _run_ansible_tool(argv, env, timeout)


def report_hosts(report_dir):
    """The ``hosts`` of the preflight.json a preflight run wrote in ``report_dir``."""
    with open(os.path.join(str(report_dir), "preflight.json")) as handle:
        return json.load(handle)["hosts"]


def flagged(hosts):
    """{host: its failed checks} for every host of a report that is not ready."""
    return dict((name, entry["failed_checks"]) for name, entry in hosts.items() if entry["status"] != "ready")


def parse_adhoc_status(stdout):
    """Map host -> SUCCESS | CHANGED | FAILED | UNREACHABLE from the default callback's output."""
    statuses = {}
    for match in re.finditer(r"^(\S+) \| (SUCCESS|CHANGED|FAILED!?|UNREACHABLE!?)", stdout, re.M):
        statuses[match.group(1)] = match.group(2).rstrip("!")
    return statuses


def paramiko_connection_available():
    """(True, '') when this ansible-core still ships ansible.builtin.paramiko_ssh, else (False, why)."""
    try:
        import ansible.plugins.connection.paramiko_ssh  # noqa: F401 pylint: disable=unused-import,import-outside-toplevel
    except ImportError as exc:
        return False, "ansible.builtin.paramiko_ssh is not in this ansible-core (removed in 2.21): %s" % exc
    return True, ""


# ---- stub GPUs: a per-node nvidia-smi replaying captured Blackwell output (tests and bench/) -----------------------

STUB = os.path.join(REPO_ROOT, "tests", "fleet", "stubs", "nvidia-smi")
BLACKWELL = os.path.join(REPO_ROOT, "tests", "unit", "plugins", "module_utils", "fixtures", "gpus", "rtx_pro_6000_x8")
SBIN = "/usr/local/sbin"


def blackwell_rows():
    with open(os.path.join(BLACKWELL, "query-gpu.csv")) as handle:
        lines = [line for line in handle.read().splitlines() if line.strip()]
    return lines[0], lines[1:]


def install_gpus(node, rows=None, hang=False, scenario=None, files=None):
    """The stub as /usr/local/sbin/nvidia-smi on this node only, with its replay files beside it.

    ``scenario``: another fixture folder (tests/unit/.../fixtures/gpus/<name>) replayed whole instead of the
    Blackwell one; ``files``: {name: text} written over it (a changed ``q.txt``, a ``sleep-q`` that hangs a probe).
    """
    with open(STUB) as handle:
        node.put_stub(SBIN + "/nvidia-smi", handle.read())
    data = SBIN + "/nvidia-smi.d/"
    if scenario:
        folder = os.path.join(os.path.dirname(BLACKWELL), scenario)
        for name in sorted(os.listdir(folder)):
            with open(os.path.join(folder, name)) as handle:
                node.put_stub(data + name, handle.read(), 0o644)
        node.put_stub(data + "compute-apps.csv", "", 0o644)
        with open(os.path.join(os.path.dirname(STUB), "dcgmi")) as handle:
            node.put_stub(SBIN + "/dcgmi", handle.read())
    else:
        header, healthy = blackwell_rows()
        node.put_stub(data + "query-gpu.csv", "\n".join([header] + (healthy if rows is None else rows)) + "\n", 0o644)
        node.put_stub(data + "compute-apps.csv", "", 0o644)
        with open(os.path.join(BLACKWELL, "version.txt")) as handle:
            node.put_stub(data + "version.txt", handle.read(), 0o644)
    for name, text in sorted((files or {}).items()):
        node.put_stub(data + name, text, 0o644)
    if hang:
        node.put_stub(data + "hang", "", 0o644)


# ---- a private network namespace, and a real Slurm cluster (munged, slurmctld, one slurmd per node) in it ----------
# slurmctld and slurmd bind 0.0.0.0 whatever slurm.conf says: the test process enters a network namespace of its own
# (setns on its main thread), so the fleet's sshd nodes, ansible-playbook, ssh, the Slurm daemons and node_exporter
# started from it all live there, and nothing listens on the host's interfaces.

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

    def stop_slurmctld(self):
        proc = self.pids.pop("slurmctld", None)
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)

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
        proc = self.pids.pop("munged", None)
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)

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
