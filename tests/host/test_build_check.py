# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""tests/build-check.sh fails on a broken tarball (issue 36). It passed one that lacked plugins/module_utils/_facts/_gpus.py:
with the checkout's collection link on PYTHONPATH (tests/env.sh), `ansible-galaxy collection install` said "Nothing to
do" and the preflight ran the checkout's code. Here a copy of the tree drops that file from its build and runs the
stage's script in the very environment tests/env.sh makes."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil
import subprocess

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DROPPED = "plugins/module_utils/_facts/_gpus.py"


def copy_tree(dest):
    listed = subprocess.check_output(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO)
    for name in listed.decode("utf-8").split("\0"):
        source = os.path.join(REPO, name)
        if not name or not os.path.lexists(source):
            continue
        target = os.path.join(dest, name)
        if not os.path.isdir(os.path.dirname(target)):
            os.makedirs(os.path.dirname(target))
        shutil.copy2(source, target, follow_symlinks=False)


def test_a_tarball_missing_a_module_util_fails_the_build_check(tmp_path):
    tree = tmp_path / "tree"
    copy_tree(str(tree))
    with open(str(tree / "galaxy.yml"), "a") as handle:
        handle.write("  - %s\n" % DROPPED)   # build_ignore is the file's last list
    env = dict(os.environ, PATH=os.path.join(REPO, ".venv", "bin") + os.pathsep + os.environ["PATH"],
               PYTHONPATH=os.path.join(REPO, ".tmp", "collections"), ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".tmp", "collections"))
    run = subprocess.run([str(tree / "tests" / "build-check.sh")], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, universal_newlines=True, timeout=300, check=False)
    assert run.returncode != 0, run.stdout[-3000:]
    assert "Nothing to do" not in run.stdout and "was installed successfully" in run.stdout, run.stdout[-3000:]
    assert "the preflight failed from the installed tarball" in run.stdout, run.stdout[-3000:]
