# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``checkout_clean`` pytest plugin every stage runs with fails a run that leaves a file git sees in the checkout
(a stub's call log written into a fixture folder was replayed by the next stage's fleet nodes), and passes a clean one."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import subprocess
import sys

from conftest import TOOLS

WRITES = '''import os
def test_writes_beside_its_fixture():
    open(os.path.join(os.path.dirname(__file__), "fixtures", "dcgm-runs.log"), "a").write("diag -r 1\\n")
'''
CLEAN = '''def test_writes_nothing(tmp_path):
    (tmp_path / "dcgm-runs.log").write_text("diag -r 1\\n")
'''


def run_in_checkout(tmp_path, test_text):
    """A throwaway git checkout holding one test and a fixture folder; pytest run in it with the plugin."""
    checkout = tmp_path / "checkout"
    (checkout / "tests" / "fixtures").mkdir(parents=True)
    (checkout / "tests" / "fixtures" / "q.txt").write_text("replayed\n")
    (checkout / "tests" / "test_it.py").write_text(test_text)
    git = ["git", "-C", str(checkout), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git[:3] + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-qm", "fixture"], check=True)
    # the plugin judges the checkout it lives in: a copy of it at the throwaway checkout's tests/tools
    (checkout / "tests" / "tools").mkdir()
    with open(os.path.join(TOOLS, "checkout_clean.py")) as handle:
        (checkout / "tests" / "tools" / "checkout_clean.py").write_text(handle.read())
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-qm", "plugin"], check=True)
    env = dict(os.environ, PYTHONPATH=str(checkout / "tests" / "tools"))
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "checkout_clean",
                           str(checkout / "tests" / "test_it.py")], cwd=str(checkout), env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=120, check=False)


def test_a_run_that_leaves_a_file_in_the_checkout_fails_and_names_it(tmp_path):
    ran = run_in_checkout(tmp_path, WRITES)
    assert ran.returncode == 1, ran.stdout
    assert "1 passed" in ran.stdout and "left files in the checkout that git sees: tests/fixtures/dcgm-runs.log" in ran.stdout


def test_a_run_that_writes_under_tmp_path_passes(tmp_path):
    ran = run_in_checkout(tmp_path, CLEAN)
    assert ran.returncode == 0 and "checkout_clean" not in ran.stdout, ran.stdout
