# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_guarded_build: the whole attempt loop with real processes (confinement none, so no root or cgroup needed);
the confined runs are in tests/build."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._build._confinement import Confinement, Unavailable
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._guarded_build import (
    BuildError,
    GuardedBuild,
    Interrupted,
    auto_order,
    choose,
    strategy_names,
)
from ansible_collections.gpufleet.preflight.plugins.module_utils._facts._kernel_events import (
    kmsg_message,
    oom_lines_in_cgroup,
)
from ansible_collections.gpufleet.preflight.plugins.module_utils._run import find_executable, run_with_timeout, search_path
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._timeline import Timeline
from ansible_collections.gpufleet.preflight.plugins.modules.guarded_build import ARGUMENT_SPEC

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "guarded_build")
BUILD_CGROUP = "/process_api/node1/gpufleet-build-hungrytest-2e9490f7"
MEMORY = {"effective": {"available_bytes": 16 << 30, "total_bytes": 24 << 30}}


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def find(name, env):
    return find_executable(name, search_path([], environ=env))


def params(**options):
    """The module's options as AnsibleModule hands them over: every default from the module's own spec."""
    values = dict((key, spec.get("default")) for key, spec in ARGUMENT_SPEC.items())
    values.update(confinement="none", memory_facts=MEMORY, cpus=2, status_interval=0.1)
    values.update(options)
    return values


def test_kernel_lines_keep_only_the_build_cgroups_kills():
    messages = [kmsg_message(line) for line in fixture("kmsg_records.txt").splitlines()]
    lines = oom_lines_in_cgroup(messages, BUILD_CGROUP)
    assert len(lines) == 6
    assert all("gpufleet-oomtest-manual" not in line for line in lines)   # another cgroup's OOM is not ours
    assert lines[1].startswith("Memory cgroup out of memory: Killed process 13006 (hog)")
    assert oom_lines_in_cgroup(messages, "/other/cgroup") == []


def test_oom_killed_on_all_attempts(tmp_path):
    """Every attempt dies of SIGKILL (what an unconfined OOM looks like): 8, 4, 2, then the failure."""
    build = GuardedBuild(params(cmd="echo jobs=$MAX_JOBS; kill -9 $$", chdir=str(tmp_path), jobs=8,
                                memory_limit="1GiB", memory_per_thread="64MiB", max_attempts=3),
                         run_with_timeout, find)
    with pytest.raises(BuildError) as err:
        build.execute()
    assert str(err.value).startswith("OOM-killed on all 3 attempts (last at jobs=2)")
    attempts = err.value.result["attempts"]
    assert [(a["jobs"], a["rc"], a["kind"]) for a in attempts] == [(8, 137, "oom"), (4, 137, "oom"), (2, 137, "oom")]
    assert err.value.result["confinement"]["strategy"] == "none"
    with open(os.path.join(str(tmp_path), "build", "gpufleet-build.status.json")) as handle:
        assert '"state": "failed"' in handle.read()


def test_a_timeout_is_not_retried_as_an_oom(tmp_path):
    build = GuardedBuild(params(cmd="sleep 30", chdir=str(tmp_path), jobs=4, memory_limit="1GiB",
                                memory_per_thread="64MiB", timeout=1), run_with_timeout, find)
    with pytest.raises(BuildError) as err:
        build.execute()
    assert "timed out after 1 seconds (attempt 1, jobs=4)" in str(err.value)
    assert [a["kind"] for a in err.value.result["attempts"]] == ["timeout"]


def test_success_writes_a_stamp_and_hides_environment_values(tmp_path):
    options = dict(cmd="mkdir -p dist && echo built > dist/out.txt", chdir=str(tmp_path), jobs=2, memory_limit="1GiB",
                   memory_per_thread="64MiB", artifacts=["dist/out.txt"], environment={"PIP_INDEX_URL": "https://u:tok@x"})
    result = GuardedBuild(params(**options), run_with_timeout, find).execute()
    assert result["changed"] and result["env"]["PIP_INDEX_URL"] == "********" and result["env"]["MAX_JOBS"] == "2"
    with open(result["stamp"]) as handle:
        assert "tok@" not in handle.read()
    assert oct(os.stat(result["stamp"]).st_mode & 0o777) == "0o600"
    again = GuardedBuild(params(**options), run_with_timeout, find).execute()
    assert again["up_to_date"] and not again["changed"]


def role_launcher_config(tmp_path):
    """What the sgl_kernel role writes for its own launcher: a tree (version 2.0) with no census of its own, and the
    census of its version 1.0 beside it."""
    census = tmp_path / "other-census.json"
    census.write_text(json.dumps({"format": "gpufleet-admission-census/1", "tree": "demo@1.0/120", "sources": {
        "csrc/light.cu": {"peak_bytes": 1 << 28, "seconds": 10.0},
        "csrc/heavy.cu": {"peak_bytes": 1 << 30, "seconds": 1000.0},
        "csrc/mid.cu": {"peak_bytes": 1 << 29, "seconds": 100.0}}}))
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"tree": "demo@2.0/120", "census": [str(census)], "state_dir": str(tmp_path / "state"),
                                  "peaks_path": str(tmp_path / "peaks.json")}))
    return str(config)


@pytest.mark.parametrize("with_config, basis", [(True, "learned"), (False, None)])
def test_the_roles_launcher_config_weighs_the_eta_from_the_first_step(tmp_path, with_config, basis):
    """The sgl_kernel role puts its launcher in the CMake arguments and passes only its settings file: the ETA of a
    cold build of a version without a census still weighs the heavy source to come by its other version's times (the
    real tree through the role showed the rate's 1m38s with 100 CUDA objects to go)."""
    steps = ["[%d/3] Building CUDA object CMakeFiles/demo.dir/csrc/%s.cu.o" % (n, name) for n, name in ((1, "light"),)]
    status = tmp_path / "status.json"
    # ninja's own log of the step done: light.cu took 5 s here, its other version's census says 10 - half the pace
    ninja_log = "printf '# ninja log v7\\n0\\t5000\\t0\\tCMakeFiles/demo.dir/csrc/light.cu.o\\t0\\n' > build/.ninja_log"
    cmd = "echo '%s'; %s; sleep 1.5; cp %s seen.json; echo '[3/3] Linking demo'" % (steps[0], ninja_log, status)
    options = dict(cmd=cmd, chdir=str(tmp_path), jobs=2, memory_limit="1GiB", memory_per_thread="64MiB",
                   status_path=str(status), admission_config=role_launcher_config(tmp_path) if with_config else None)
    result = GuardedBuild(params(**options), run_with_timeout, find).execute()
    assert not result.get("failed"), result
    with open(str(tmp_path / "seen.json")) as handle:
        seen = json.load(handle)
    assert seen["eta_basis"] == basis and seen["progress"]["done"] == 1, seen
    # 1,100 census seconds to go at half their pace: minutes (550 s over the CPUs); without them nothing yet (one
    # count: no rate)
    assert 250 <= seen["eta_seconds"] <= 550 if with_config else seen["eta_seconds"] is None, seen


@pytest.mark.parametrize("content, said", [
    (None, "cannot read"), ("fifo", "not a regular file"), ("{", "is not the launcher's JSON settings"), ("[1]", "holds a list"),
    ("", "is empty"),
    ('{"colour": 1}', "unknown admission setting(s) colour"), ('{"margin": 0.5}', "margin: 0.5 is not a number >= 1"),
])
def test_a_bad_launcher_config_is_refused_naming_the_file(tmp_path, content, said):
    config = tmp_path / "config.json"
    if content == "fifo":   # planted: read, it would block the module for ever
        os.mkfifo(str(config))
    elif content is not None:
        config.write_text(content)
    build = GuardedBuild(params(cmd="true", chdir=str(tmp_path), jobs=1, memory_limit="1GiB", memory_per_thread="64MiB",
                                admission_config=str(config)), run_with_timeout, find)
    with pytest.raises(BuildError) as err:
        build.prepare()
    assert "admission_config: " in str(err.value) and str(config) in str(err.value) and said in str(err.value), str(err.value)
    both = GuardedBuild(params(cmd="true", chdir=str(tmp_path), jobs=1, memory_limit="1GiB", memory_per_thread="64MiB",
                               admission={}, admission_config=str(config)), run_with_timeout, find)
    with pytest.raises(BuildError) as err:
        both.prepare()
    assert "admission and admission_config" in str(err.value)


def test_a_limit_above_the_node_is_refused(tmp_path):
    build = GuardedBuild(params(cmd="true", chdir=str(tmp_path), jobs=1, memory_limit="64GiB",
                                memory_per_thread="64MiB"), run_with_timeout, find)
    with pytest.raises(BuildError) as err:
        build.prepare()
    assert "memory_limit 64Gi is above the node's memory (24Gi)" in str(err.value)


# ---------------------------------------------------------------- the confinement registry (issue 21 item 2)

def test_the_modules_choices_are_the_registry():
    assert tuple(ARGUMENT_SPEC["confinement"]["choices"]) == strategy_names()
    assert [method.name for method in auto_order()] == ["systemd", "cgroupfs", "watchdog"]
    assert len(set(strategy_names())) == len(strategy_names()), "every method names itself once"


def fake_method(method_name, rank, why=None, poll=None):
    class Fake(Confinement):
        name = method_name
        auto_rank = rank
        poll_seconds = poll
        made = []

        def prepare(self):
            Fake.made.append((self.unit, self.limit_bytes, self.find, self.run))
            if why:
                raise Unavailable(why)
    return Fake


def test_choose_with_fake_methods():
    """auto tries the ranked methods in rank order (not list order), skips an unranked one, and says why each
    earlier one could not; a named method that cannot run is refused naming it."""
    late = fake_method("late", 2)
    early = fake_method("early", 1, why="no early here")
    manual = fake_method("manual", None)
    methods = (late, manual, early)
    chosen, skipped = choose("auto", "u", 1 << 30, 0, "find", "run", methods=methods)
    assert isinstance(chosen, late) and skipped == {"early": "no early here"}
    assert late.made == [("u", 1 << 30, "find", "run")] and manual.made == []
    assert isinstance(choose("manual", "u", 1, 0, None, None, methods=methods)[0], manual)
    with pytest.raises(Unavailable) as err:
        choose("early", "u", 1, 0, None, None, methods=methods)
    assert "confinement=early is not possible here: no early here" in str(err.value)
    with pytest.raises(Unavailable) as err:
        choose("auto", "u", 1, 0, None, None, methods=(early,))
    assert "no confinement is possible here (early: no early here)" in str(err.value)
    assert strategy_names(methods) == ("auto", "late", "manual", "early")


def test_the_poll_interval_comes_from_the_method(tmp_path):
    """No isinstance special case: a method with a short poll_seconds is looked at that often."""
    watched = fake_method("fast", 1, poll=0.01)
    build = GuardedBuild(params(cmd="sleep 0.3", chdir=str(tmp_path), jobs=1, memory_limit="1GiB",
                                memory_per_thread="64MiB", status_interval=2), run_with_timeout, find)
    build.prepare()
    build.fingerprint()
    os.mkdir(build.build_dir)
    looks = []
    watched.guard = lambda self, pgid: looks.append(pgid)
    build.confinement = watched("u", 1 << 30, 0)
    build.lock, build.started, build.status_path = None, 0, str(tmp_path / "status.json")
    build.timeline = Timeline()
    build.run_attempt(1, 1, None)
    assert len(looks) >= 5, "looked %d times in 0.3 s at a 10 ms poll" % len(looks)


def test_a_signal_burst_is_acted_on_once(tmp_path):
    """Finding 5: the second SIGTERM of a burst raised again inside the cleanup of the first."""
    build = GuardedBuild(params(cmd="true", chdir=str(tmp_path), jobs=1, memory_limit="1GiB",
                                memory_per_thread="64MiB"), run_with_timeout, find)
    previous = build._trap_signals()
    try:
        build._interruptible = True
        with pytest.raises(Interrupted):
            os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)  # the burst: ignored while the first is acted on
        os.kill(os.getpid(), signal.SIGINT)
        assert build.stop_signal == signal.SIGTERM
    finally:
        build._restore_signals(previous)


def test_a_long_signal_burst_still_gets_the_stopped_answer(tmp_path):
    """SIGTERMs every few ms until the module exits (a supervisor retrying, Ctrl-C held down): once the first one's
    cleanup was done the default action came back, and the next one killed the module before it reported - Ansible
    saw rc -15 and no result, though the build was stopped. The module must answer "stopped" whatever follows."""
    (tmp_path / "args.json").write_text(u"%s" % json.dumps({"ANSIBLE_MODULE_ARGS": dict(
        cmd="sleep 60", chdir=str(tmp_path), confinement="none", jobs=1, memory_limit="256MiB",
        memory_per_thread="16MiB")}))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path for path in sys.path if path))
    proc = subprocess.Popen([sys.executable, "-m", "ansible_collections.gpufleet.preflight.plugins.modules.guarded_build",
                             str(tmp_path / "args.json")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    status_path = tmp_path / "build" / "gpufleet-build.status.json"
    deadline = time.time() + 60
    try:
        while time.time() < deadline and proc.poll() is None:
            try:
                if json.loads(status_path.read_text()).get("state") == "running":
                    break
            except (IOError, OSError, ValueError):
                pass
            time.sleep(0.1)
        while proc.poll() is None and time.time() < deadline:
            os.kill(proc.pid, signal.SIGTERM)
            time.sleep(0.005)
        out, err = proc.communicate()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, (proc.returncode, err[-2000:])
    result = json.loads(out)
    assert result["msg"].startswith("stopped by SIGTERM"), result["msg"]
    assert json.loads(status_path.read_text())["state"] == "stopped"


def test_a_live_owner_named_only_by_the_status_is_not_built_beside(tmp_path):
    """A run whose lock this one cannot see (taken under the lock's former key, by path, before an upgrade; or in
    another user's registry) still names itself in the status: refused naming it, its status left as it was."""
    from ansible_collections.gpufleet.preflight.plugins.module_utils._build._build_process import process_start_time
    owner = subprocess.Popen(["sleep", "60"])
    try:
        build_dir = tmp_path / "build"
        build_dir.mkdir(mode=0o700)
        status = {"state": "running", "run_id": "older", "module_pid": owner.pid,
                  "module_start_time": process_start_time(owner.pid)}
        (build_dir / "gpufleet-build.status.json").write_text(u"%s" % json.dumps(status))
        build = GuardedBuild(params(cmd="true", chdir=str(tmp_path), jobs=1, memory_limit="256MiB",
                                    memory_per_thread="16MiB"), run_with_timeout, find)
        with pytest.raises(BuildError) as err:
            build.execute()
        assert "module pid %d (run older) is running there by its status" % owner.pid in str(err.value)
        assert json.loads((build_dir / "gpufleet-build.status.json").read_text()) == status
        # the owner gone: the same status is abandoned, and the build runs
        owner.kill()
        owner.wait()
        result = GuardedBuild(params(cmd="true", chdir=str(tmp_path), jobs=1, memory_limit="256MiB",
                                     memory_per_thread="16MiB"), run_with_timeout, find).execute()
        assert result["stale_status"] and result["attempts"][-1]["rc"] == 0
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
