# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""guarded_build's status while a build runs, for real (issue 17 item 4, issue 20 item 4): ninja's [N/M] survives a
flood of compiler output; the ETA is learned from the previous build's .ninja_log; the memory timeline reaches the
peak the attempt recorded."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from conftest import finish_module, start_module, wait_for_status

# a ninja project whose steps print like nvcc + ptxas: a [N/M] line, then thousands of ptxas lines
NINJA = """rule flood
  command = sh -c 'i=0; while [ $$i -lt 40000 ]; do echo "ptxas info    : Used 168 registers, used 1 barriers, $
98304 bytes smem for sm_120a kernel $$i"; i=$$((i+1)); done; sleep $secs; touch $out'
  description = Building CUDA object $out
"""


def flood_project(tmp_path, steps, seconds):
    project = tmp_path / "flood"
    (project / "build").mkdir(parents=True)
    lines = [NINJA]
    for index in range(steps):
        lines.append("build unit_%d.cu.o: flood\n  secs = %s\n" % (index, seconds))
    (project / "build" / "build.ninja").write_text(u"".join(lines))
    return project


def test_progress_survives_a_ptxas_flood_and_the_eta_is_learned(tmp_path):
    project = flood_project(tmp_path, 6, 1)
    args = {"cmd": "ninja -C build -j1", "chdir": str(project), "jobs": 1, "memory_limit": "1GiB",
            "memory_per_thread": "64MiB", "status_interval": 0.5, "confinement": "none"}
    first = finish_module(start_module(args))
    assert not first["failed"], first["_output"][-3000:]
    assert os.path.exists(str(project / "build" / ".ninja_log"))
    for index in range(6):
        os.unlink(str(project / "build" / ("unit_%d.cu.o" % index)))
    status_path = str(project / "build" / "gpufleet-build.status.json")
    proc = start_module(dict(args, force=True))
    try:
        # each step writes ~4 MB of ptxas lines after its [N/M]: an 8 KiB tail never holds one
        status = wait_for_status(status_path, lambda s: s.get("state") == "running"
                                 and (s.get("progress") or {}).get("done", 0) >= 2, timeout=120)
        assert status["progress"]["total"] == 6 and status["step"].startswith("Building CUDA object unit_")
        assert isinstance(status.get("eta_seconds"), (int, float)), status
    finally:
        second = finish_module(proc)
    assert not second["failed"], second["_output"][-3000:]


HUNGRY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "projects", "hungry")


def test_the_timeline_reaches_the_peak_the_attempt_recorded(tmp_path):
    """build.html drew a line under its own table's peak: a 0.3 s spike between two status writes was missed."""
    import shutil  # pylint: disable=import-outside-toplevel
    project = str(tmp_path / "hungry")
    shutil.copytree(HUNGRY, project)
    args = {"cmd": "cmake -S . -B build -G Ninja -DHOG_MIB=200 -DHOG_SECONDS=0.3 -DHOG_STEPS=3 >/dev/null && "
                   "cmake --build build && sleep 5", "chdir": project, "jobs": 1, "memory_limit": "1GiB",
            "memory_per_thread": "64MiB", "status_interval": 3}
    result = finish_module(start_module(args))
    assert not result["failed"], result["_output"][-3000:]
    peak = result["attempts"][-1]["peak_memory_bytes"]
    with open(os.path.join(project, "build", "gpufleet-build.status.json")) as handle:
        import json  # pylint: disable=import-outside-toplevel
        timeline = json.load(handle)["timeline"]
    assert peak >= 200 * 1024 ** 2
    assert max(sample[1] for sample in timeline) >= 0.98 * peak, (peak, timeline)
