# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet seed by default (issue 35 item 8): with sgl_kernel_admission_fleet_peaks_dir left at ``auto``, what a
builder learned reaches the controller's cache (~/.cache/gpufleet/fleet-peaks/<inventory id>) and seeds the next node
of the same inventory; a second inventory - another fleet, or another test - meets none of it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
from fleetlib import REPO_ROOT, run_playbook  # noqa: E402 pylint: disable=wrong-import-position

PLAYBOOK = os.path.join(REPO_ROOT, "tests", "roles", "playbooks", "sgl_kernel_fleet_peaks_default.yml")
LEARNED = {"sgl-kernel@0.3.19/120@0123456789ab:csrc/gemm.cu#sm120": {"peak_bytes": 3 * 1024 ** 3, "seconds": 120.0}}


def inventory(folder):
    folder.mkdir()
    path = folder / "hosts.ini"
    path.write_text("[fleet]\nteacher\nlearner\n\n[fleet:vars]\nansible_connection=local\nansible_python_interpreter=%s\n"
                    % sys.executable)
    return path


def exchange(inventory_path, work, home):
    result = run_playbook(PLAYBOOK, str(inventory_path), extra_vars={"work": str(work), "teacher": "teacher", "learner": "learner"},
                          env={"HOME": str(home)})
    assert result.rc == 0, (result.stdout + result.stderr)[-4000:]
    return [path for path in re.search(r"SEED \[(.*?)\] END", result.stdout).group(1).split(",") if path]


def folder_of(inventory_path, home):
    """The controller's folder of one inventory's peaks: its directory's SHA-1, 12 hex digits."""
    return home / ".cache" / "gpufleet" / "fleet-peaks" / hashlib.sha1(str(inventory_path.parent).encode()).hexdigest()[:12]


def test_what_a_node_learned_seeds_the_next_node_of_its_fleet_by_default(tmp_path):
    home, work = tmp_path / "home", tmp_path / "work"
    (work / "teacher" / "admission").mkdir(parents=True)
    (work / "teacher" / "admission" / "peaks.json").write_text(json.dumps(LEARNED))
    fleet = inventory(tmp_path / "fleet-a")
    seed = exchange(fleet, work, home)
    expected = folder_of(fleet, home)
    assert json.loads((expected / "nodes" / "teacher.json").read_text()) == LEARNED
    assert json.loads((expected / "peaks.json").read_text()) == LEARNED
    # the learner of the same inventory is seeded with what the teacher learned
    assert seed == [str(work / "learner" / "admission" / "fleet-peaks.json")]
    assert json.loads((work / "learner" / "admission" / "fleet-peaks.json").read_text()) == LEARNED

    # another inventory (another fleet, another test run) has its own folder: nothing of fleet-a's reaches it
    (work / "teacher" / "admission" / "peaks.json").unlink()
    (work / "learner" / "admission" / "fleet-peaks.json").unlink()
    other = inventory(tmp_path / "fleet-b")
    exchange(other, work, home)
    assert json.loads((work / "learner" / "admission" / "fleet-peaks.json").read_text()) == {}
    assert json.loads((folder_of(other, home) / "peaks.json").read_text()) == {}
    assert json.loads((expected / "peaks.json").read_text()) == LEARNED
