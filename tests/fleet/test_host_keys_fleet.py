# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The repository's ansible.cfg checks host keys (issue 12 item 8), against a real sshd node: an unknown key
is refused; after the README's procedure (ssh-keyscan, fingerprint compared) the same node answers."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import configparser
import os
import re
import subprocess

import yaml

from fleetlib import ANSIBLE_CONFIG, NODE_PYTHON, REPO_ROOT, ansible_env, parse_adhoc_status, run_adhoc


def test_the_shipped_ansible_cfg_checks_host_keys():
    config = configparser.ConfigParser()
    config.read(ANSIBLE_CONFIG)
    assert config.getboolean("defaults", "host_key_checking", fallback=True) is True
    ssh_args = config.get("ssh_connection", "ssh_args", fallback="")
    assert "StrictHostKeyChecking=no" not in ssh_args and "UserKnownHostsFile=/dev/null" not in ssh_args


def inventory(fleet, node, known_hosts, path):
    """An operator's inventory: nothing about host keys, so ansible.cfg decides; its own known_hosts file."""
    with open(path, "w") as handle:
        yaml.safe_dump({"all": {"hosts": {"gpu-a": {"ansible_host": node.address}}, "vars": {
            "ansible_user": "root", "ansible_ssh_private_key_file": fleet.client_key,
            "ansible_python_interpreter": NODE_PYTHON,
            # masters under the fleet dir, where fleet.stop() ends them; never prompt (no tty in CI)
            "ansible_control_path_dir": fleet.dir,
            "ansible_ssh_extra_args": "-o BatchMode=yes -o IdentitiesOnly=yes -o UserKnownHostsFile=%s" % known_hosts,
        }}}, handle)
    return path


def documented_scan():
    """The controller half of the shell block in docs/fleet-preflight.md that runs ssh-keyscan."""
    with open(os.path.join(REPO_ROOT, "docs", "fleet-preflight.md")) as handle:
        blocks = re.findall(r"```sh\n(.*?)```", handle.read(), re.S)
    block = next(text for text in blocks if "ssh-keyscan" in text)
    return block[block.index("for name in"):]


def fingerprint(text_or_path, stdin=None):
    argv = ["ssh-keygen", "-l", "-f", "-" if stdin is not None else text_or_path]
    out = subprocess.run(argv, input=stdin, stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout
    return out.split()[1]


def test_an_unknown_host_key_is_refused_until_accepted(fresh_fleet, tmp_path):
    fleet = fresh_fleet(1)
    node = fleet.nodes[0]
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("")
    hosts = inventory(fleet, node, str(known_hosts), str(tmp_path / "inventory.yml"))

    refused = run_adhoc("all", hosts, "ansible.builtin.ping", timeout=120)
    assert parse_adhoc_status(refused.stdout) == {"gpu-a": "UNREACHABLE"}, refused.stdout + refused.stderr
    assert "Host key verification failed" in refused.stdout + refused.stderr

    # docs/fleet-preflight.md's procedure as written: the inventory names the node gpu-a and connects through
    # ansible_host (scanning "gpu-a" would find nothing); the fingerprint compared, then the keys kept
    snippet = documented_scan()
    assert "ssh-keyscan" in snippet and "ansible_host" in snippet, snippet
    os.symlink(hosts, str(tmp_path / "inventory"))
    script = snippet.replace("/tmp/fleet_keys", str(tmp_path / "fleet_keys")).replace("~/.ssh/known_hosts", str(known_hosts))
    subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=str(tmp_path), env=ansible_env(), timeout=120, check=True,
                   stdout=subprocess.DEVNULL)
    scanned = known_hosts.read_text()
    assert scanned.split()[0] == node.address, scanned
    assert fingerprint(None, stdin=scanned) == fingerprint(fleet.host_key + ".pub")

    accepted = run_adhoc("all", hosts, "ansible.builtin.ping", timeout=120)
    assert parse_adhoc_status(accepted.stdout) == {"gpu-a": "SUCCESS"}, accepted.stdout + accepted.stderr
    assert os.path.getsize(str(known_hosts)) == len(scanned)
