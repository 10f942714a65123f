# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bad-input sweep: every case of tests/sweep/cases/*.yml run through Ansible, judged from its result.

A case is data (see tests/sweep/README.md): a plugin, the arguments (or role variables) with one bad value,
and the option whose name the failure message must carry. Cases are batched: one ansible-playbook run holds
many tasks (``ignore_errors``, a per-task ``timeout``), a callback (``callback_plugins/sweep_record.py``)
writes every result as a JSON line, and :func:`judge` decides per case:

- ``exception``: an unhandled exception - a module that crashed with a traceback, or a controller-side
  exception of a non-Ansible type that left the collection's code (ansible-core wrapped it, not the plugin);
- ``hang``: the task ran past its timeout (or the batch past its own), or no result came back;
- ``nameless``: it failed, but the message does not name the option at fault; or it was accepted although
  the table says it must be refused;
- ``ok``: refused naming the option, or accepted as the table documents (``accept`` with a ``meaning``).

Run it with ``python tests/sweep/sweeplib.py [-k substring] [-v]`` or through ``tests/sweep/test_sweep.py``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CASES_DIR = os.path.join(HERE, "cases")
XFAIL = os.path.join(HERE, "xfail.yml")
COLLECTION = "gpufleet.preflight"
STUB_NAME = "sweepninja"  # a copy of /bin/sleep the sweep starts and ends itself; the only process it may reap
DEFAULT_TIMEOUT = 60
KINDS = ("module", "action", "filter", "role", "playbook")
# one value of the wrong type per argument_specs type, for the generated type probes
TYPE_PROBES = {"bool": "maybe", "int": "not-a-number", "float": "not-a-number", "list": {"not": "a list"},
               "dict": "not-a-dict"}


def role_specs(role):
    """``{entry point: {variable: spec}}`` from the role's meta/argument_specs.yml."""
    path = os.path.join(REPO, "roles", role, "meta", "argument_specs.yml")
    if not os.path.exists(path):
        return {}
    with open(path) as handle:
        specs = (yaml.safe_load(handle) or {}).get("argument_specs") or {}
    return dict((entry, (spec or {}).get("options") or {}) for entry, spec in specs.items())


# ---------------------------------------------------------------- the table

class CaseError(ValueError):
    """The case table itself is wrong."""


def _short(value, width=48):
    text = json.dumps(value, default=str, allow_nan=True) if not isinstance(value, str) else repr(value)
    if isinstance(value, dict) and "__gen__" in value:
        text = "%s*%s" % (value.get("item", value.get("text")), value.get("n"))
    text = re.sub(r"\s+", " ", text)
    return text if len(text) <= width else text[:width - 3] + "..."


def load_cases(directory=CASES_DIR):
    """Every case of every ``*.yml`` in ``directory``, expanded; ids are unique."""
    cases = []
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".yml"):
            continue
        with open(os.path.join(directory, name)) as handle:
            groups = yaml.safe_load(handle) or []
        for index, group in enumerate(groups):
            try:
                cases.extend(expand_group(group))
            except CaseError as exc:
                raise CaseError("%s, entry %d: %s" % (name, index + 1, exc))
    seen = set()
    for case in cases:
        if case["id"] in seen:
            raise CaseError("duplicate case id %s" % case["id"])
        seen.add(case["id"])
    for ident, reason in load_xfail().items():
        if ident not in seen:
            raise CaseError("xfail.yml names %s, which is no case of the table (renamed? fixed and removed?)" % ident)
        for case in cases:
            if case["id"] == ident:
                case["xfail"] = reason
    return cases


def load_xfail(path=XFAIL):
    """``{case id: reason}``: cases known to fail whose owner has them to fix. Reported, not counted; the lead
    decides what stays here."""
    if not os.path.exists(path):
        return {}
    with open(path) as handle:
        data = yaml.safe_load(handle) or {}
    if not isinstance(data, dict) or not all(isinstance(v, str) and v for v in data.values()):
        raise CaseError("%s must map case ids to a reason" % path)
    return data


def expand_group(group):
    """One table entry -> cases. ``reject``/``accept`` lists put each value into ``option``; ``cases`` are whole."""
    kind = group.get("kind")
    if kind not in KINDS:
        raise CaseError("kind must be one of %s, got %r" % (KINDS, kind))
    plugin = group.get("plugin")
    if not plugin:
        raise CaseError("plugin is required")
    if kind == "playbook" and not os.path.exists(os.path.join(REPO, "playbooks", plugin + ".yml")):
        raise CaseError("no playbook playbooks/%s.yml" % plugin)
    option = group.get("option")
    common = dict(
        kind=kind,
        plugin=plugin,
        entry=group.get("entry", "main"),
        check_mode=bool(group.get("check_mode", kind == "role")),
        timeout=int(group.get("timeout", DEFAULT_TIMEOUT)),
        isolate=bool(group.get("isolate", kind == "playbook")),
        xfail=group.get("xfail"),
        note=group.get("note"),
        validate=group.get("validate", True),
    )
    base = group.get("base") or {}
    label = plugin if kind != "role" or common["entry"] == "main" else "%s:%s" % (plugin, common["entry"])
    prefix = group.get("id") or "%s.%s" % (label, option or "case")
    out = []

    taken = set()

    def add(ident, args, names, expect, meaning=None, extra=None):
        base_ident, n = ident, 2
        while ident in taken:
            ident = "%s#%d" % (base_ident, n)
            n += 1
        taken.add(ident)
        case = dict(common)
        case.update(id=ident, args=args, names=names, expect=expect, meaning=meaning)
        case.update(extra or {})
        if expect == "accept" and not meaning:
            raise CaseError("%s: an accepted value needs its meaning" % ident)
        out.append(case)

    names = group.get("names") or ([option] if option else None)
    if group.get("type_probes"):
        # every variable of every entry point: a value of the wrong type (and an unknown choice) is refused naming it
        if kind != "role":
            raise CaseError("type_probes is for roles")
        for entry, variables in sorted(role_specs(plugin).items()):
            entry_label = plugin if entry == "main" else "%s:%s" % (plugin, entry)
            for variable, spec in sorted(variables.items()):
                probes = []
                if spec.get("type", "str") in TYPE_PROBES:
                    probes.append(TYPE_PROBES[spec.get("type", "str")])
                if spec.get("choices"):
                    probes.append(["no-such-choice"] if spec.get("type") == "list" else "no-such-choice")
                for value in probes:
                    args = copy.deepcopy(base)
                    args[variable] = value
                    add("%s.%s~type=%s" % (entry_label, variable, _short(value)), args, [variable], "reject",
                        extra={"entry": entry})
    for value in group.get("reject") or []:
        if option is None:
            raise CaseError("reject needs option")
        args = copy.deepcopy(base)
        _put(args, option, value)
        add("%s=%s" % (prefix, _short(value)), args, names, "reject")
    for item in group.get("accept") or []:
        if option is None or not isinstance(item, dict) or "value" not in item:
            raise CaseError("accept entries are {value, meaning} and need option")
        args = copy.deepcopy(base)
        _put(args, option, item["value"])
        add("%s=%s" % (prefix, _short(item["value"])), args, names, "accept", item.get("meaning"),
            dict((k, item[k]) for k in ("xfail", "note", "failure_ok") if k in item))
    # matrix: {option: [rejected values]} - one option per key, each value refused naming that option
    # (or the option without ``strip_prefix``, as the plugin under a role names it)
    for matrix_option, values in (group.get("matrix") or {}).items():
        matrix_names = [matrix_option]
        if group.get("strip_prefix") and matrix_option.startswith(group["strip_prefix"]):
            matrix_names.append(matrix_option[len(group["strip_prefix"]):])
        for value in values:
            args = copy.deepcopy(base)
            _put(args, matrix_option, value)
            add("%s.%s=%s" % (label, matrix_option, _short(value)), args, matrix_names, "reject")
    for item in group.get("cases") or []:
        if "id" not in item or "args" not in item:
            raise CaseError("each of cases needs id and args")
        args = copy.deepcopy(base)
        args.update(copy.deepcopy(item["args"]))
        extra = dict((k, item[k]) for k in ("check_mode", "timeout", "isolate", "xfail", "note", "entry", "failure_ok",
                                            "validate")
                     if k in item)
        add("%s.%s" % (label, item["id"]), args, item.get("names") or names,
            item.get("expect", "reject"), item.get("meaning"), extra)
    # per-value xfail marks: {xfail: {case-id: reason}}
    for case in out:
        if isinstance(group.get("xfail_ids"), dict) and case["id"] in group["xfail_ids"]:
            case["xfail"] = group["xfail_ids"][case["id"]]
    for case in out:
        if case["expect"] not in ("reject", "accept"):
            raise CaseError("%s: expect is reject or accept" % case["id"])
        if case["expect"] == "reject" and not case["names"]:
            raise CaseError("%s: a rejected case needs the option name(s) its message must carry" % case["id"])
        if kind == "role" and case["entry"] not in role_specs(plugin):
            raise CaseError("%s: unknown role or entry point %s/%s" % (case["id"], plugin, case["entry"]))
        _check_safe(case)
    return out


def _put(args, option, value):
    """``option`` may be dotted (``kwargs.cpus``) to reach into nested dicts."""
    keys = option.split(".")
    target = args
    for key in keys[:-1]:
        target = target.setdefault(key, {})
    target[keys[-1]] = value


def _check_safe(case):
    """Reaping for real is allowed only for the sweep's own stub process; every other reap runs in check mode."""
    if case["kind"] == "playbook" and case["plugin"] in ("reap", "prepare_offline_sources") and not case["check_mode"]:
        raise CaseError("%s: %s.yml runs in check mode only" % (case["id"], case["plugin"]))
    if case["kind"] == "module" and case["plugin"] == "build_processes":
        args = case["args"]
        if args.get("state") == "absent" and not case["check_mode"]:
            if args.get("names") not in ([STUB_NAME], ["@STUB@"]) or args.get("extra_names") or args.get("patterns"):
                raise CaseError("%s: state=absent outside check mode may only select names: [%s]" % (case["id"], STUB_NAME))


# ---------------------------------------------------------------- values and fixtures

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


# ---------------------------------------------------------------- judging

_EXC_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_.]*)(?::\s|:$|$)")
_FILE_LINE = re.compile(r'^\s*File "([^"]+)", line \d+')
_CHAIN = re.compile(r"^(The above exception was the direct cause of the following exception:|"
                    r"During handling of the above exception, another exception occurred:)\s*$", re.MULTILINE)
_MODULE_BOUNDARY = re.compile(r"^The above target exception was the direct cause of the following controller exception:\s*$",
                              re.MULTILINE)
_COLLECTION_PATH = ("/ansible_collections/gpufleet/preflight/", REPO + "/plugins/")


def _segments(text):
    """A chained traceback -> [(exception type, raise site path)], oldest first."""
    out = []
    for part in _CHAIN.split(text):
        if part.startswith("The above") or part.startswith("During handling"):
            continue
        lines = part.strip("\n").splitlines()
        files = [m.group(1) for m in (_FILE_LINE.match(line) for line in lines) if m]
        exc_type = None
        for line in reversed(lines):
            if line.startswith(" ") or not line.strip():
                continue
            match = _EXC_LINE.match(line)
            if match and match.group(1) != "Traceback":
                exc_type = match.group(1)
                break
        if exc_type or files:
            out.append((exc_type, files[-1] if files else None))
    return out


def _is_ansible(exc_type):
    return bool(exc_type) and (exc_type.startswith("ansible.") or exc_type.startswith("Ansible"))


def _in_collection(path):
    return bool(path) and any(marker in path for marker in _COLLECTION_PATH)


def unhandled(result):
    """Why a result shows an unhandled exception, or None."""
    stderr = "%s\n%s" % (result.get("module_stderr") or "", result.get("module_stdout") or "")
    msg = str(result.get("msg") or "")
    if "Traceback (most recent call last)" in stderr or msg.startswith("MODULE FAILURE"):
        last = [line for line in stderr.strip().splitlines() if line.strip()]
        return "module crashed: %s" % (last[-1] if last else msg)
    text = result.get("exception")
    if isinstance(text, list):
        text = "\n".join(str(t) for t in text)
    text = str(text or "")
    if not text:
        return None
    boundary = _MODULE_BOUNDARY.search(text)
    if boundary:
        # the module's own side: fail_json called in an except block carries the handled error's traceback (fine);
        # an exception that reached AnsiballZ's runner left main() unhandled
        module_side = text[:boundary.start()]
        last = [line for line in module_side.strip().splitlines() if line.strip() and not line.startswith(" ")]
        last = last[-1] if last else ""
        # fail_json's own call stack ends with "Message: ..."; an escaped exception with its type
        if "in run_module" in module_side and not last.startswith("Message:"):
            return "module raised %s" % last
        text = text[boundary.end():]
    if "task_executor.py" not in text:
        return None
    segments = _segments(text)
    for position, (exc_type, where) in enumerate(segments):
        if _is_ansible(exc_type) or exc_type is None:
            continue
        following = segments[position + 1] if position + 1 < len(segments) else (None, None)
        if following[0] is None or not _in_collection(following[1]):
            return "%s escaped the plugin (raised at %s)" % (exc_type, where)
    return None


_WRAPPERS = (
    re.compile(r"^Task failed: "),
    re.compile(r"^Finalization of task args for '[^']*' failed: "),
    re.compile(r"^Error while resolving value for '[^']*': "),
    re.compile(r"^The filter plugin '[^']*' failed: "),
)


def message_of(result):
    """The failure message a person reads, without ansible-core's wrapping (which names the plugin, not the option)."""
    msg = result.get("msg")
    if msg is None and isinstance(result.get("results"), list):
        msg = "; ".join(str(r.get("msg")) for r in result["results"] if isinstance(r, dict))
    text = str(msg or "")
    changed = True
    while changed:
        changed = False
        for pattern in _WRAPPERS:
            new = pattern.sub("", text)
            if new != text:
                text, changed = new, True
    return text


def _names_option(message, names):
    low = message.lower()
    return any(str(name).lower() in low for name in names or [])


def _log_error(path):
    """The first ``[ERROR]`` of an ansible-playbook log, with the lines that continue it."""
    try:
        with open(path) as handle:
            text = handle.read()
    except (IOError, OSError, TypeError):
        return ""
    match = re.search(r"^\[ERROR\]: (.*?)(?:\n\n|\Z)", text, re.MULTILINE | re.DOTALL)
    return match.group(1).strip() if match else text.strip()[-500:]


def judge(case, records, batch):
    """``(verdict, detail, message)`` with verdict one of ok, exception, hang, nameless, harness."""
    if case["kind"] in ("role", "playbook"):
        if case["kind"] == "playbook":
            mine = list(records)
            if batch.get("rc") not in (0, None) and not any(r["status"] == "failed" for r in mine):
                # refused before any task ran (a play keyword, an undefined variable): the log says why
                message = _log_error(batch.get("log"))
                if _names_option(message, case["names"]):
                    return "ok", "refused before any task", message
                return "nameless", "refused before any task without naming %s" % "/".join(case["names"] or []), message
        else:
            mine = [r for r in records if r.get("play") == "sweep-case %s" % case["id"]]
        real = [r for r in mine if not r["task"].startswith("sweep-rescued")]
        for record in mine:
            why = unhandled(record["result"])
            if why:
                return "exception", why, message_of(record["result"])
        failed = [r for r in real if r["status"] in ("failed", "unreachable")]
        if not mine and case["kind"] == "playbook" and batch.get("rc") == 0:
            if case["expect"] == "accept":
                return "ok", "accepted: %s" % case["meaning"], ""
            return "nameless", "accepted silently: nothing ran and the run exited 0", _log_error(batch.get("log"))[-200:]
        if not mine:
            return ("hang", "no result (batch timed out)", "") if batch["timed_out"] else ("harness", "no result", "")
        if any("timed out" in message_of(r["result"]).lower() for r in failed):
            return "hang", "timed out", message_of(failed[0]["result"])
        if failed:
            result = failed[0]["result"]
            message = message_of(result)
            if _names_option(message, case["names"]):
                return "ok", "refused in %r" % failed[0]["task"], message
            return "nameless", "refused in %r without naming %s" % (failed[0]["task"], "/".join(case["names"] or [])), message
        if case["expect"] == "accept":
            return "ok", "accepted: %s" % case["meaning"], ""
        return "nameless", "accepted silently", ""
    mine = [r for r in records if r["task"] == case["id"]]
    if not mine:
        return ("hang", "no result (batch timed out)", "") if batch["timed_out"] else ("harness", "no result", "")
    record = mine[0]
    result = record["result"]
    message = message_of(result)
    seconds = (record["ended"] - record["started"]) if record.get("started") is not None else None
    if (result.get("timedout") or "timed out after" in message.lower()
            or (seconds is not None and seconds > case["timeout"])):
        return "hang", "ran past %d s" % case["timeout"], message
    why = unhandled(result)
    if why:
        return "exception", why, message
    if record["status"] == "skipped":
        return "harness", "skipped", message
    if record["status"] in ("failed", "unreachable"):
        if "python3." in message and "command not found" in str(result.get("module_stderr")):
            return "harness", "interpreter", message
        if _names_option(message, case["names"]):
            return "ok", "refused", message
        if case["expect"] == "accept" and case.get("failure_ok"):
            return "ok", "accepted, failed for another reason as the table expects: %s" % case["meaning"], message
        return "nameless", "refused without naming %s" % "/".join(str(n) for n in case["names"] or []), message
    if case["expect"] == "accept":
        return "ok", "accepted: %s" % case["meaning"], message
    return "nameless", "accepted silently", message


# ---------------------------------------------------------------- the run

def plan_batches(cases, workers):
    """Isolated cases alone; the rest split into ``workers`` x 2 batches balanced by kind."""
    alone = [c for c in cases if c["isolate"]]
    rest = [c for c in cases if not c["isolate"]]
    count = max(1, workers * 2)
    batches = [[] for dummy in range(count)]
    for position, case in enumerate(rest):
        batches[position % count].append(case)
    out = [("batch%02d" % i, batch) for i, batch in enumerate(batches) if batch]
    out.extend(("alone%03d" % i, [case]) for i, case in enumerate(alone))
    return out


def start_stub(root):
    """A copy of /bin/sleep named like a build tool, the only process reaping cases may end for real."""
    path = os.path.join(root, STUB_NAME)
    shutil.copy("/bin/sleep", path)
    return subprocess.Popen([path, "900"], start_new_session=True)


def run_sweep(cases, workers=3, keep=False, log=print):
    root = tempfile.mkdtemp(prefix="gpufleet-sweep-")
    for sub in ("tmp", "ansible-local", "ansible-remote"):
        os.makedirs(os.path.join(root, sub))
    make_fixtures(root)
    with open(os.path.join(root, "inventory.yml"), "w") as handle:
        yaml.safe_dump({"all": {"hosts": {"localhost": {
            "ansible_connection": "local",
            "ansible_python_interpreter": "{{ ansible_playbook_python }}"}}}}, handle)
    for index, case in enumerate(cases):
        case["index"] = index
    stub = start_stub(root)
    started = time.monotonic()
    outcomes = []
    try:
        batches = plan_batches(cases, workers)

        def one(item):
            name, batch = item
            # a safety net only: each task has its own timeout, which is what counts a hang
            budget = min(sum(case["timeout"] for case in batch) + 120, 1800)
            if batch[0]["kind"] == "playbook":
                return batch, run_playbook_case(name, batch[0], root, budget)
            return batch, run_batch(name, batch, root, budget)

        with ThreadPoolExecutor(max_workers=workers) as pool:
            for batch, ran in pool.map(one, batches):
                for case in batch:
                    verdict, detail, message = judge(case, ran["records"], ran)
                    outcomes.append(dict(case=case, verdict=verdict, detail=detail, message=message,
                                         batch=ran["name"], log=ran["log"]))
                log("%s: %d cases, %.1f s, rc=%s%s" % (ran["name"], len(batch), ran["seconds"], ran["rc"],
                                                       " TIMED OUT" if ran["timed_out"] else ""))
    finally:
        stub.kill()
        stub.wait()
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
    order = dict((case["id"], case["index"]) for case in cases)
    outcomes.sort(key=lambda o: order[o["case"]["id"]])
    return dict(outcomes=outcomes, seconds=time.monotonic() - started, root=root)


def summarize(outcomes):
    counted = [o for o in outcomes if not o["case"].get("xfail")]
    count = dict((v, sum(1 for o in counted if o["verdict"] == v)) for v in ("exception", "hang", "nameless", "harness"))
    xfailed = [o for o in outcomes if o["case"].get("xfail")]
    line = "%d cases, %d unhandled exceptions, %d hangs, %d messages without the option name" % (
        len(outcomes), count["exception"], count["hang"], count["nameless"])
    if count["harness"]:
        line += ", %d harness errors" % count["harness"]
    still = sum(1 for o in xfailed if o["verdict"] != "ok")
    if xfailed:
        line += " (%d xfail cases not counted: %d still failing, %d now pass)" % (len(xfailed), still, len(xfailed) - still)
    return line, count


def per_plugin(cases):
    counts = {}
    for case in cases:
        key = "%s %s" % (case["kind"], case["plugin"])
        counts[key] = counts.get(key, 0) + 1
    return counts


def report(outcomes, verbose=False):
    lines = []
    for outcome in outcomes:
        if outcome["verdict"] == "ok" and not verbose:
            continue
        case = outcome["case"]
        mark = "XFAIL " if case.get("xfail") else ""
        lines.append("%s%-9s %s [%s] %s | %s" % (mark, outcome["verdict"].upper(), case["id"], case["kind"],
                                                 outcome["detail"], outcome["message"][:300].replace("\n", " ")))
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", action="append", default=[], help="only cases whose id contains this (repeatable)")
    parser.add_argument("-v", action="store_true", help="list passing cases too")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (playbooks, logs, records)")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--json", help="write the outcomes here")
    options = parser.parse_args(argv)
    cases = load_cases()
    if options.k:
        cases = [c for c in cases if any(k in c["id"] for k in options.k)]
    ran = run_sweep(cases, workers=options.workers, keep=options.keep)
    print(report(ran["outcomes"], options.v))
    for key, value in sorted(per_plugin(cases).items()):
        print("  %-28s %d" % (key, value))
    line, count = summarize(ran["outcomes"])
    print("%s in %.0f s%s" % (line, ran["seconds"], (" (kept %s)" % ran["root"]) if options.keep else ""))
    if options.json:
        with open(options.json, "w") as handle:
            json.dump([dict(id=o["case"]["id"], verdict=o["verdict"], detail=o["detail"], message=o["message"],
                            xfail=o["case"].get("xfail")) for o in ran["outcomes"]], handle, indent=1)
    return 1 if any(count.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
