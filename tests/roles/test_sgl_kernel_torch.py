# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sgl_kernel role installs the torch the tree builds against (issue 17): it reads the tree's pyproject build
requirement and nvcc's CUDA (real toolchain facts of a real venv without torch), and installs the torch of
sgl_kernel_torch_for_cuda for that CUDA - in check mode here, so nothing is downloaded - or refuses naming why when
no torch for this CUDA satisfies the tree (torch was only installed when the user set build_deps_torch_version)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAYBOOK = os.path.join(ROOT, "tests", "roles", "playbooks", "sgl_kernel_torch.yml")
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="the decision follows nvcc's CUDA: needs nvcc")

PYPROJECT = '[build-system]\nrequires = [\n  "scikit-build-core>=0.10",\n  "%s",\n  "wheel",\n]\n'


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("torchless") / "venv")
    subprocess.check_call([sys.executable, "-m", "venv", path])
    return path


def nvcc_major():
    out = subprocess.check_output(["nvcc", "--version"], universal_newlines=True)
    return re.search(r"release (\d+)\.", out).group(1)


def run(tmp_path, venv, requirement, **extra):
    tree = tmp_path / "tree"
    tree.mkdir(exist_ok=True)
    (tree / "pyproject.toml").write_text(PYPROJECT % requirement)
    variables = dict(test_venv=venv, test_tree=str(tree), **extra)
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=os.environ.get("ANSIBLE_COLLECTIONS_PATH", os.path.join(ROOT, ".tmp", "collections")))
    proc = subprocess.run([ANSIBLE_PLAYBOOK, "-i", "localhost,", "-c", "local", "-e",
                           "ansible_python_interpreter=%s" % sys.executable, "-e", json.dumps(variables), "--check", PLAYBOOK],
                          cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          timeout=300, check=False)
    return proc.returncode, proc.stdout


def test_installs_the_torch_for_nvccs_cuda_that_satisfies_the_tree(tmp_path, venv):
    major = nvcc_major()
    if major not in ("12", "13"):
        pytest.skip("sgl_kernel_torch_for_cuda names CUDA 12 and 13; this nvcc is %s" % major)
    rc, out = run(tmp_path, venv, "torch>=2.8.0")
    assert rc == 0, out[-4000:]
    wanted = {"13": "2.11.0", "12": "2.9.1"}[major]
    task = out.split("Install the torch the tree builds against]", 1)[1].split("TASK [", 1)[0]
    assert "changed: [localhost]" in task, task
    assert "spec=torch>=2.8.0 nvcc=%s candidate=%s" % (major, wanted) in out, out[-3000:]


def test_refuses_a_tree_whose_torch_pin_has_no_build_for_this_cuda(tmp_path, venv):
    rc, out = run(tmp_path, venv, "torch==2.0.1")
    assert rc != 0, out[-3000:]
    assert "the tree builds against torch==2.0.1 (pyproject.toml)" in out and "no torch" in out, out[-3000:]
    assert "build_deps_torch_version" in out and "Traceback" not in out


def test_none_of_it_when_told_otherwise(tmp_path, venv):
    rc, out = run(tmp_path, venv, "torch==2.0.1", sgl_kernel_torch_for_cuda={"12": "2.0.1", "13": "2.0.1"})
    assert rc == 0, out[-3000:]
    assert "candidate=2.0.1" in out


@pytest.mark.parametrize("requirement", ["ninja", "torchvision>=0.20"])
def test_a_tree_that_does_not_build_against_torch_gets_none(tmp_path, venv, requirement):
    """The mini tree of tests/build names no torch: the role installed 2.11.0 (a 2.5 GiB download) into its venv."""
    rc, out = run(tmp_path, venv, requirement)
    assert rc == 0, out[-4000:]
    for task in ("Install the torch the tree builds against]", "Refuse when no torch for this CUDA satisfies the tree]"):
        section = out.split(task, 1)[1].split("TASK [", 1)[0]
        assert "skipping: [localhost]" in section and "changed" not in section, section
