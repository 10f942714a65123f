# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""node_exporter textfile rendering: HELP/TYPE once, no timestamps, escaped labels, atomic write."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import signal

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _metrics

VERDICT = dict(
    ready=False,
    checks=[dict(name="available_memory", status="failed", profile="always"),
            dict(name='we"ird\\\nname', status="ok", profile="custom")],
    facts=dict(memory=dict(effective=dict(available_bytes=1024, total_bytes=4096), oom_kills=dict(host=3, cgroup=1)),
               build_processes=dict(count=2, processes=[dict(orphaned=True), dict(orphaned=False)])),
    checked_at_epoch=1764619200.5,
    duration_seconds=0.25,
)


def test_render_lines():
    text = _metrics.render(VERDICT, "health_check")
    lines = text.splitlines()
    assert 'gpufleet_preflight_ready{source="health_check"} 0' in lines
    assert 'gpufleet_preflight_check_status{check="available_memory",profile="always",source="health_check",status="failed"} 1' in lines
    assert 'gpufleet_preflight_check_status{check="we\\"ird\\\\\\nname",profile="custom",source="health_check",status="ok"} 1' in lines
    assert 'gpufleet_preflight_effective_available_memory_bytes{source="health_check"} 1024' in lines
    assert 'gpufleet_preflight_build_processes{source="health_check"} 2' in lines
    assert 'gpufleet_preflight_orphaned_build_processes{source="health_check"} 1' in lines
    assert 'gpufleet_preflight_oom_kills_total{scope="host",source="health_check"} 3' in lines
    assert 'gpufleet_preflight_last_check_timestamp_seconds{source="health_check"} 1764619200.5' in lines
    assert 'gpufleet_preflight_check_duration_seconds{source="health_check"} 0.25' in lines
    names = [line.split()[2] for line in lines if line.startswith("# TYPE")]
    assert len(names) == len(set(names))
    for line in lines:
        if not line.startswith("#"):
            # name{labels} value -- never a third field (a timestamp makes node_exporter skip the file)
            assert re.match(r'^[a-z_:]+(\{.*\})? \S+$', line), line


def test_render_missing_facts():
    text = _metrics.render(dict(ready=True, checks=[]))
    assert "gpufleet_preflight_ready{source=\"playbook\"} 1" in text
    assert "memory_bytes" not in text and "oom" not in text


def test_write_atomic(tmp_path):
    path = _metrics.write_atomic(str(tmp_path), "x 1\n", "gpufleet_preflight.prom")
    assert open(path).read() == "x 1\n" and os.listdir(str(tmp_path)) == ["gpufleet_preflight.prom"]
    assert oct(os.stat(path).st_mode & 0o777) == "0o644"
    with pytest.raises(ValueError, match="not a directory"):
        _metrics.write_atomic(str(tmp_path / "nope"), "x", "a.prom")
    with pytest.raises(ValueError, match="ending in .prom"):
        _metrics.write_atomic(str(tmp_path), "x", "a.txt")


@pytest.fixture
def no_hang():
    """A write that would block on a FIFO fails the test after 5 s instead of hanging the run."""
    def alarm(_signum, _frame):
        raise AssertionError("write_atomic blocked (a FIFO was opened)")
    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(5)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def test_write_atomic_planted_fifo_and_symlink_at_the_old_temp_name(tmp_path, no_hang):
    """Issue 28.5: the old temp name was predictable (.<name>.tmp.<pid>) and opened without O_EXCL."""
    outside = tmp_path / "outside"
    outside.write_text("precious\n")
    textdir = tmp_path / "textfile"
    textdir.mkdir()
    os.mkfifo(str(textdir / (".gpufleet_preflight.prom.tmp.%d" % os.getpid())))
    os.symlink(str(outside), str(textdir / (".other.prom.tmp.%d" % os.getpid())))
    path = _metrics.write_atomic(str(textdir), "x 1\n", "gpufleet_preflight.prom")
    assert open(path).read() == "x 1\n"
    _metrics.write_atomic(str(textdir), "y 1\n", "other.prom")
    assert outside.read_text() == "precious\n"
    assert sorted(os.listdir(str(textdir))) == sorted([".gpufleet_preflight.prom.tmp.%d" % os.getpid(),
                                                       ".other.prom.tmp.%d" % os.getpid(), "gpufleet_preflight.prom",
                                                       "other.prom"])


def test_write_atomic_planted_fifo_symlink_directory_at_the_target(tmp_path, no_hang):
    outside = tmp_path / "outside"
    outside.write_text("precious\n")
    textdir = tmp_path / "textfile"
    textdir.mkdir()
    os.mkfifo(str(textdir / "a.prom"))
    os.symlink(str(outside), str(textdir / "b.prom"))
    (textdir / "c.prom").mkdir()
    for name in ("a.prom", "b.prom"):
        path = _metrics.write_atomic(str(textdir), "x 1\n", name)
        assert os.path.isfile(path) and not os.path.islink(path) and open(path).read() == "x 1\n"
    assert outside.read_text() == "precious\n"
    with pytest.raises(ValueError, match="c.prom is a directory: remove it"):
        _metrics.write_atomic(str(textdir), "x 1\n", "c.prom")
    assert sorted(os.listdir(str(textdir))) == ["a.prom", "b.prom", "c.prom"]  # no temp file left behind


def test_one_file_per_source_and_the_legacy_file():
    """Issue 27.3: the playbook and the node-local check wrote the same file; the last writer won."""
    assert _metrics.default_file("playbook") == "gpufleet_preflight_playbook.prom"
    assert _metrics.default_file("health_check") == "gpufleet_preflight_health_check.prom"
    with pytest.raises(ValueError, match="lower-case word"):
        _metrics.default_file("../x")


def test_legacy_file_removed_only_for_its_own_source(tmp_path):
    legacy = tmp_path / "gpufleet_preflight.prom"
    legacy.write_text(_metrics.render(dict(ready=True, checks=[]), "playbook"))
    _metrics.write_atomic(str(tmp_path), _metrics.render(VERDICT, "health_check"), _metrics.default_file("health_check"))
    assert legacy.exists()  # the playbook's: left to it
    _metrics.write_atomic(str(tmp_path), _metrics.render(VERDICT, "playbook"), _metrics.default_file("playbook"))
    assert sorted(os.listdir(str(tmp_path))) == ["gpufleet_preflight_health_check.prom", "gpufleet_preflight_playbook.prom"]


def test_profile_label_is_the_readmes_word():
    text = _metrics.render(dict(ready=True, checks=[dict(name="a", status="ok", profile="common"),
                                                    dict(name="b", status="ok")]))
    assert 'check="a",profile="always"' in text and 'check="b",profile="always"' in text and "common" not in text


def test_read_current_never_blocks_on_a_fifo(tmp_path, no_hang):
    os.mkfifo(str(tmp_path / "f.prom"))
    assert _metrics.read_current(str(tmp_path / "f.prom")) is None
    assert _metrics.read_current(str(tmp_path / "absent.prom")) is None
