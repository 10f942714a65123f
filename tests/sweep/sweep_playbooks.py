# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""From cases to ansible-playbook runs: placeholders made real (@TMP@, @CASE@, generated huge values), Jinja-looking
strings protected as !unsafe, one playbook per batch (a task per plugin case, a play per role case), a
collection playbook alone per playbook case; each run in a session of its own, its results read back from the
recording callback."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time

import yaml

from sweep_cases import COLLECTION, HERE, REPO, STUB_NAME, CaseError


def make_fixtures(root):
    """The paths cases refer to as @TMP@/...: a dir, a file, symlinks, a dangling link, an unwritable dir."""
    os.makedirs(os.path.join(root, "dir"))
    with open(os.path.join(root, "file"), "w") as handle:
        handle.write("not a directory\n")
    os.symlink(os.path.join(root, "dir"), os.path.join(root, "link-to-dir"))
    os.symlink(os.path.join(root, "file"), os.path.join(root, "link-to-file"))
    os.symlink(os.path.join(root, "nowhere"), os.path.join(root, "dangling"))
    os.symlink("loop-b", os.path.join(root, "loop-a"))
    os.symlink("loop-a", os.path.join(root, "loop-b"))
    os.makedirs(os.path.join(root, "venv-not-venv", "keep"))
    with open(os.path.join(root, "venv-not-venv", "keep", "precious.txt"), "w") as handle:
        handle.write("a user's file\n")
    os.makedirs(os.path.join(root, "cases"))


def realize(value, root, case_dir):
    """Placeholders -> real values: @TMP@ and @CASE@ in strings, {__gen__: str|list} for huge values."""
    if isinstance(value, dict):
        if "__gen__" in value:
            n = int(value["n"])
            if value["__gen__"] == "str":
                return str(value["text"]) * n
            if value["__gen__"] == "list":
                return [realize(value["item"], root, case_dir) for dummy in range(n)]
            if value["__gen__"] == "dict":
                return dict(("%s%d" % (value.get("prefix", "k"), i), realize(value["item"], root, case_dir))
                            for i in range(n))
            raise CaseError("unknown __gen__ %r" % value["__gen__"])
        return dict((realize(k, root, case_dir), realize(v, root, case_dir)) for k, v in value.items())
    if isinstance(value, list):
        return [realize(v, root, case_dir) for v in value]
    if isinstance(value, str):
        return value.replace("@TMP@", root).replace("@CASE@", case_dir).replace("@STUB@", STUB_NAME)
    return value


class Unsafe(str):
    """A string that must reach the plugin verbatim: dumped with Ansible's ``!unsafe`` tag."""


class _Dumper(yaml.SafeDumper):
    pass


def _represent_unsafe(dumper, data):
    return dumper.represent_scalar("!unsafe", str(data), style='"')


def _represent_str(dumper, data):
    # control characters and odd whitespace survive only double-quoted
    style = '"' if any(ord(c) < 32 or ord(c) == 127 for c in data) or data != data.strip() else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(Unsafe, _represent_unsafe)
_Dumper.add_representer(str, _represent_str)


def protect(value):
    """A string with Jinja markers becomes ``!unsafe``: a value like ``{{ x }}`` is data here, never a template.

    (Only those: Ansible re-resolves an ``!unsafe`` scalar's plain tag, and some, like ``*``, do not resolve to str.)"""
    if isinstance(value, dict):
        return dict((k, protect(v)) for k, v in value.items())
    if isinstance(value, list):
        return [protect(v) for v in value]
    if isinstance(value, str) and any(mark in value for mark in ("{{", "{%", "{#")):
        return Unsafe(value)
    return value


# ---------------------------------------------------------------- playbooks

def task_for(case, root):
    """The task (module, action or filter) that runs one case."""
    case_dir = os.path.join(root, "cases", re.sub(r"[^A-Za-z0-9_.-]+", "_", case["id"])[:80] + "-%d" % case["index"])
    os.makedirs(case_dir, exist_ok=True)
    args = realize(case["args"], root, case_dir)
    task = {"name": case["id"], "ignore_errors": True, "ignore_unreachable": True, "timeout": case["timeout"],
            "tags": ["sweep"]}
    if case["check_mode"]:
        task["check_mode"] = True
    if case["kind"] in ("module", "action"):
        task["%s.%s" % (COLLECTION, case["plugin"])] = protect(args)
    else:
        kwargs = args.get("kwargs") or {}
        task["ansible.builtin.debug"] = {
            "msg": "{{ _sweep_in | %s.%s(**_sweep_kw) }}" % (COLLECTION, case["plugin"])
            if args.get("_nokw") is None else "{{ _sweep_in | %s.%s }}" % (COLLECTION, case["plugin"])}
        task["vars"] = {"_sweep_in": protect(args.get("input")), "_sweep_kw": protect(kwargs)}
    return task


def play_for_role(case, root):
    """A play of its own for one role case: the role's entry point with the bad variables as play vars.

    With ``--tags sweep`` only the entry point's argument validation (tagged always) and the role's own
    validate.yml run: nothing is installed or built whatever the variables say.
    """
    case_dir = os.path.join(root, "cases", re.sub(r"[^A-Za-z0-9_.-]+", "_", case["id"])[:80] + "-%d" % case["index"])
    os.makedirs(case_dir, exist_ok=True)
    variables = protect(realize(case["args"], root, case_dir))
    role = "%s.%s" % (COLLECTION, case["plugin"])
    include = {"name": role}
    if case["entry"] != "main":
        include["tasks_from"] = case["entry"]
    steps = [{"name": "sweep-step entry point", "ansible.builtin.include_role": include, "tags": ["sweep"]}]
    if case["plugin"] in ("build_deps", "sgl_kernel") and case.get("validate", True):
        steps.append({"name": "sweep-step validate.yml",
                      "ansible.builtin.include_role": {"name": role, "tasks_from": "validate",
                                                       "apply": {"tags": ["sweep"]}},
                      "tags": ["sweep"]})
    elif case["plugin"] == "preflight":
        # preflight is read-only (readiness, reports into the temp dir, a fail task): the whole entry point runs
        include["apply"] = {"tags": ["sweep"]}
    play = {
        "name": "sweep-case %s" % case["id"],
        "hosts": "localhost",
        "gather_facts": False,
        "timeout": case["timeout"],  # every task of the role, as for the plugin cases
        "vars": variables,
        "tasks": [{
            "name": "sweep-block",
            "block": steps,
            "rescue": [{"name": "sweep-rescued", "ansible.builtin.meta": "noop", "tags": ["always"]}],
            # no tags on the block: a block's tags reach every task included under it, and the role would run
        }],
    }
    if case["check_mode"]:
        play["check_mode"] = True
    return play


def write_batch(path, cases, root):
    """A playbook for a batch: one play of tasks for plugins, one play per case for roles."""
    plays = []
    tasks = [task_for(case, root) for case in cases if case["kind"] != "role"]
    if tasks:
        plays.append({"name": "sweep-plugins", "hosts": "localhost", "gather_facts": False, "tasks": tasks})
    plays.extend(play_for_role(case, root) for case in cases if case["kind"] == "role")
    with open(path, "w") as handle:
        yaml.dump(plays, handle, Dumper=_Dumper, sort_keys=False, allow_unicode=False, width=1 << 20)


def run_playbook_case(name, case, root, budget):
    """A playbook of the collection, alone, with the case's variables as extra vars (``--check`` when asked)."""
    case_dir = os.path.join(root, "cases", re.sub(r"[^A-Za-z0-9_.-]+", "_", case["id"])[:80] + "-%d" % case["index"])
    os.makedirs(case_dir, exist_ok=True)
    extra = os.path.join(case_dir, "extra-vars.json")
    with open(extra, "w") as handle:
        json.dump(realize(case["args"], root, case_dir), handle)
    argv = ["nice", "-n", "10", "ansible-playbook", "-i", os.path.join(root, "inventory.yml"),
            os.path.join(REPO, "playbooks", case["plugin"] + ".yml"), "-e", "@" + extra]
    if case["check_mode"]:
        argv.append("--check")
    return _run(name, argv, case_dir, root, budget)


def environment(record, root):
    env = dict(os.environ)
    venv = os.environ.get("VENV") or os.path.join(REPO, ".venv")
    env.update(
        PATH=os.path.join(venv, "bin") + os.pathsep + env.get("PATH", ""),
        ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"),
        ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".tmp", "collections"),
        ANSIBLE_CALLBACK_PLUGINS=os.path.join(HERE, "callback_plugins"),
        ANSIBLE_CALLBACKS_ENABLED="sweep_record",
        ANSIBLE_STDOUT_CALLBACK="ansible.builtin.minimal",
        ANSIBLE_DISPLAY_TRACEBACK="always",
        ANSIBLE_LOCAL_TEMP=os.path.join(root, "ansible-local"),
        ANSIBLE_REMOTE_TEMP=os.path.join(root, "ansible-remote"),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_PIPELINING="1",
        ANSIBLE_FORCE_COLOR="0",
        ANSIBLE_RETRY_FILES_ENABLED="0",
        SWEEP_RECORD=record,
        TMPDIR=os.path.join(root, "tmp"),
    )
    env.pop("ANSIBLE_INVENTORY", None)
    return env


def run_batch(name, cases, root, batch_timeout):
    """One ansible-playbook run in its own session; every process left over is ended by the session's group."""
    playbook = os.path.join(root, "%s.yml" % name)
    inventory = os.path.join(root, "inventory.yml")
    write_batch(playbook, cases, root)
    # --tags sweep: the role plays run only their entry point's validation (see play_for_role); every task is tagged
    argv = ["nice", "-n", "10", "ansible-playbook", "-i", inventory, playbook, "--tags", "sweep"]
    return _run(name, argv, root, root, batch_timeout)


def _run(name, argv, cwd, root, batch_timeout):
    record = os.path.join(root, "%s.jsonl" % name)
    log = os.path.join(root, "%s.log" % name)
    started = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.Popen(argv, cwd=cwd, env=environment(record, root), stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            rc = proc.wait(timeout=batch_timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            rc, timed_out = None, True
        finally:
            # the run's own process group only: module processes a task timeout left behind
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            proc.wait()
    records = []
    if os.path.exists(record):
        with open(record) as handle:
            for line in handle:
                if line.strip():
                    records.append(json.loads(line))
    return dict(name=name, rc=rc, timed_out=timed_out, seconds=time.monotonic() - started, records=records, log=log)
