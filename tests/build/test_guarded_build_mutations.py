# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The retry rules are guarded by tests: each mutation of ``_build_engine`` that issue 10 names must turn a unit
test red. Run on a private copy of the collection; the working tree is never changed."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil
import subprocess
import sys

import pytest

from conftest import REPO

ENGINE = os.path.join("plugins", "module_utils", "_build", "_build_engine.py")
TESTS = ["tests/unit/plugins/module_utils/test_build_engine.py", "tests/unit/plugins/module_utils/test_guarded_build.py"]
MUTATIONS = {
    "last attempt: attempt == max_attempts -> >": ("    if attempt >= max_attempts:", "    if attempt > max_attempts:"),
    "timed-out branch deleted (classify)": ('    if timed_out:\n        return TIMEOUT, "stopped at the timeout"\n', ""),
    "timed-out branch deleted (decide)": (
        '    if kind == TIMEOUT:\n        return FAIL, jobs, "the build timed out after %s seconds (attempt %d, jobs=%d)" % '
        '(timeout, attempt, jobs)\n', ""),
    "timeout counted as an OOM": ('        return TIMEOUT, "stopped at the timeout"', '        return OOM, "stopped at the timeout"'),
    "one job left retried": ("    if jobs == 1 and not learned:\n", "    if jobs == 0 and not learned:\n"),
}


def run_units(tmp_path, mutation):
    root = tmp_path / "ansible_collections" / "gpufleet" / "preflight"
    for part in ("plugins", "tests"):
        shutil.copytree(os.path.join(REPO, part), str(root / part), ignore=shutil.ignore_patterns("__pycache__"))
    if mutation:
        path = str(root / ENGINE)
        with open(path) as handle:
            text = handle.read()
        old, new = mutation
        assert text.count(old) == 1, "the mutation no longer applies: %r" % old
        with open(path, "w") as handle:
            handle.write(text.replace(old, new))
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"] + TESTS, cwd=str(root),
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          timeout=300, check=False)


def test_unmutated_copy_is_green(tmp_path):
    proc = run_units(tmp_path, None)
    assert proc.returncode == 0, proc.stdout


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_mutation_turns_a_test_red(tmp_path, name):
    proc = run_units(tmp_path, MUTATIONS[name])
    print("%s: %s" % (name, proc.stdout.strip().splitlines()[-1]))
    assert proc.returncode == 1 and " failed" in proc.stdout, proc.stdout
