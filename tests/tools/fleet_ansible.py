# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""ansible-playbook and ansible from the project's venv with its ansible.cfg and collection link, run from a
directory of their own; what a preflight report and the default callback's output say."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import shutil
import subprocess
import tempfile
import time

from fleet_base import ANSIBLE_CONFIG, COLLECTIONS_PATH, VENV_BIN, CommandResult


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
