# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sweep's case table (tests/sweep/cases/*.yml, tests/sweep/README.md): loaded, each group expanded into cases,
checked (unique ids, known kinds and entry points, reaping for real only of the sweep's own stub), xfail marks
applied."""

from __future__ import annotations

import copy
import json
import os
import re

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
