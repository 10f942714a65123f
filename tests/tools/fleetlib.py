# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
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

The harness lives in modules of one concern each, beside this one; this module is their front door (every name the
tests and bench/ import from it):

    fleet_base.py     the checkout's paths, the run id, CommandResult, FleetError, file and process helpers
    fleet_cgroups.py  the memory cgroups of a fleet and its nodes; stale fleets reaped
    fleet_node.py     one node: its namespaces, its sshd, commands over paramiko, injected faults
    fleet_nodes.py    the fleet: N nodes on a loopback address block, keys, inventory, start/heal/stop
    fleet_ansible.py  ansible-playbook and ansible from the venv; reading reports and ad-hoc output
    fleet_gpus.py     the stub nvidia-smi replaying recorded GPUs on one node
    fleet_netns.py    a private network namespace for the test process
    fleet_slurm.py    a real Slurm cluster (munged, slurmctld, a slurmd per node) in it
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from fleet_base import (ANSIBLE_CONFIG, COLLECTIONS_PATH, DEFAULT_FLEET_SIZE, NODE_PYTHON, REPO_ROOT, RUN_ID_PREFIX,
                        RUN_ID_RE, TIMINGS, VENV_BIN, CommandResult, FleetError, kill_quietly, nspids, pid_alive,
                        processes_mentioning, read_text, write_text)
from fleet_cgroups import MemoryCgroups, cgroup_pids, empty_cgroup, reap_stale_fleets, remove_cgroup_tree
from fleet_node import Node, find_sshd, missing_prerequisites, sshd_config_text, sshd_version
from fleet_nodes import Fleet, acquire_slot, address_free, fleet_size_from_env, release_slot
from fleet_ansible import (ansible_env, flagged, paramiko_connection_available, parse_adhoc_status, report_hosts,
                           run_adhoc, run_playbook)
from fleet_gpus import BLACKWELL, SBIN, STUB, blackwell_rows, install_gpus
from fleet_netns import CLONE_NEWNET, NETNS_EXTRA_ADDRESS, NetNamespace, netns_missing_prerequisites
from fleet_slurm import SLURM_BINARIES, SlurmCluster, slurm_missing_prerequisites

__all__ = ["ANSIBLE_CONFIG", "COLLECTIONS_PATH", "DEFAULT_FLEET_SIZE", "NODE_PYTHON", "REPO_ROOT", "RUN_ID_PREFIX",
           "RUN_ID_RE", "TIMINGS", "VENV_BIN", "CommandResult", "FleetError", "kill_quietly", "nspids", "pid_alive",
           "processes_mentioning", "read_text", "write_text", "MemoryCgroups", "cgroup_pids", "empty_cgroup",
           "reap_stale_fleets", "remove_cgroup_tree", "Node", "find_sshd", "missing_prerequisites", "sshd_config_text",
           "sshd_version", "Fleet", "acquire_slot", "address_free", "fleet_size_from_env", "release_slot",
           "ansible_env", "flagged", "paramiko_connection_available", "parse_adhoc_status", "report_hosts", "run_adhoc",
           "run_playbook", "BLACKWELL", "SBIN", "STUB", "blackwell_rows", "install_gpus", "CLONE_NEWNET",
           "NETNS_EXTRA_ADDRESS", "NetNamespace", "netns_missing_prerequisites", "SLURM_BINARIES", "SlurmCluster",
           "slurm_missing_prerequisites"]
