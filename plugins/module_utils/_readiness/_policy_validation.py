# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Readiness policy, validated: every option checked by the rule its row in ``_readiness_options.OPTIONS`` declares,
custom checks compiled (JMESPath, imported lazily) and the subsets each one reads found from its parsed AST.

Pure: a policy in, a checked policy (or a ValueError naming the option) out. ``_policy`` judges facts against it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.gpufleet.preflight.plugins.module_utils._human import parse_size_option
from ansible_collections.gpufleet.preflight.plugins.module_utils._process_match import compile_patterns
from ansible_collections.gpufleet.preflight.plugins.module_utils._values import non_finite
from ansible_collections.gpufleet.preflight.plugins.module_utils._versions import FORMS as VERSION_FORMS
from ansible_collections.gpufleet.preflight.plugins.module_utils._constants import SUBSETS as NODE_SUBSETS
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _readiness_options


def load_jmespath():
    """``(jmespath module, None)``, or ``(None, why)`` where the library is absent.

    Imported only when a policy has custom checks: the node-local health check runs on plain Python (stdlib only)
    and reports custom checks as not applied there instead of failing.
    """
    try:
        import jmespath  # pylint: disable=import-outside-toplevel
    except ImportError as exc:
        return None, "the jmespath Python library is not installed (%s): pip install jmespath" % exc
    return jmespath, None


CUSTOM_CHECK_KEYS = ("name", "query", "equals", "max", "min", "message")


def parse_option_size(option, value):
    """A size option in bytes (``_human.parse_size_option``: binary units or a byte count), also refusing NaN/inf."""
    if non_finite(value):
        raise ValueError("%s: %r is not a size" % (option, value))
    return parse_size_option(option, value)


# ---------------------------------------------------------------- validation


def parse_memory_requirement(value):
    """``'64GiB'`` -> ``('absolute', bytes)``; ``'0.8'`` or ``0.8`` -> ``('fraction', 0.8)``.

    A bare number at most 1 is a fraction of the effective total; anything else must be a size.
    """
    text = str(value).strip()
    try:
        number = float(text)
    except ValueError:
        number = None
    if number is not None and (0 < number <= 1):
        return ("fraction", number)
    if number is not None and (number < 0 or "." in text):
        raise ValueError(
            "min_available_memory: %r is neither a size like 64GiB nor a fraction of the effective total in (0, 1]" % (value,))
    return ("absolute", parse_option_size("min_available_memory", value))


def compile_custom_check(index, spec, require_jmespath=True):
    """Validate one JMESPath check; returns it with the compiled expression under ``compiled``.

    Without the jmespath library: a ValueError when ``require_jmespath`` (the controller), else the check is kept
    with ``compiled`` None and ``not_applied`` saying why (the node-local health check reports it as not applied).
    """
    where = "custom_checks[%d]" % index
    if not isinstance(spec, dict):
        raise ValueError("%s: must be a dict with name, query and one of equals/max/min, got %r" % (where, spec))
    extra = sorted(str(key) for key in set(spec) - set(CUSTOM_CHECK_KEYS))
    if extra:
        raise ValueError("%s: unknown key%s %s; allowed: %s" % (where, "s" if len(extra) > 1 else "", ", ".join(extra), ", ".join(CUSTOM_CHECK_KEYS)))
    if not spec.get("name") or not spec.get("query"):
        raise ValueError("%s: needs a name and a query" % where)
    if not isinstance(spec["name"], str) or not spec["name"].strip():
        raise ValueError("%s: name must be a non-empty string, got %r" % (where, spec["name"]))
    if not isinstance(spec["query"], str):
        query = spec["query"]
        kind = ("a list" if isinstance(query, (list, tuple)) else "a dict" if isinstance(query, dict)
                else "a boolean" if isinstance(query, bool) else "a number" if isinstance(query, (int, float)) else "not text")
        raise ValueError("%s (%s): query must be a JMESPath expression as a string (quote it in YAML), got %r (%s)"
                         % (where, spec["name"], query, kind))
    if spec.get("message") is not None and not isinstance(spec["message"], str):
        raise ValueError("%s (%s): message must be a string, got %r" % (where, spec["name"], spec["message"]))
    bounds = [key for key in ("equals", "max", "min") if key in spec]
    if not bounds:
        raise ValueError("%s (%s): needs one of equals, max or min to compare the query's result with" % (where, spec["name"]))
    for key in ("max", "min"):
        if key in spec and (isinstance(spec[key], bool) or not isinstance(spec[key], (int, float))
                            or non_finite(spec[key])):
            raise ValueError("%s (%s): %s must be a finite number, got %r" % (where, spec["name"], key, spec[key]))
    checked = dict(spec)
    jmespath, missing = load_jmespath()
    if jmespath is None:
        if require_jmespath:
            raise ValueError("%s (%s): custom checks need the jmespath Python library on the controller: %s" % (where, spec["name"], missing))
        checked.update(compiled=None, not_applied=missing, subsets=[])
        return checked
    failed = None
    try:
        compiled = jmespath.compile(spec["query"])
    except jmespath.exceptions.JMESPathError as exc:
        failed = str(exc)
    if failed is not None:
        raise ValueError("%s (%s): the JMESPath query %r does not parse: %s" % (where, spec["name"], spec["query"], failed))
    checked["compiled"] = compiled
    checked["subsets"] = custom_check_subsets(index, checked)
    return checked


def validate_policy(args, require_jmespath=True):
    """Return the policy with sizes parsed and expressions compiled; ValueError naming the option.

    Driven by the table: each action option's ``check`` in ``_readiness_options.OPTIONS`` says what is enforced.
    ``require_jmespath=False`` (the node-local health check): custom checks without the jmespath library are kept
    and reported as not applied instead of refusing the policy.
    """
    policy = dict(args)
    entries = [entry for entry in _readiness_options.OPTIONS if entry.get("action", True)]
    for entry in entries:
        value = args.get(entry["name"])
        # NaN compares false with everything (a wait that never ends, a timeout never reached); inf never ends.
        if entry["type"] == "float" and non_finite(value):
            raise ValueError("%s: must be a finite number, got %s" % (entry["name"], value))
    for entry in entries:
        if entry["name"] in args:
            policy[entry["name"]] = check_option(entry, args[entry["name"]], require_jmespath)
    return policy


def _number_message(name, rule, value):
    unit = " %s" % rule["unit"] if rule.get("unit") else ""
    why = " (%s)" % rule["why"] if rule.get("why") else ""
    if "above" in rule and value <= rule["above"]:
        return "%s: must be greater than %s%s%s, got %s" % (name, rule["above"], unit, why, value)
    if rule.get("what"):
        return "%s: %s between %s and %s, got %s" % (name, rule["what"], rule["min"], rule["max"], value)
    if "min" in rule and value < rule["min"] and rule["min"] == 0 and not unit:
        return "%s: must be 0 or more, got %s" % (name, value)
    if "above" in rule:
        return "%s: must be more than %s and at most %s%s%s, got %s" % (name, rule["above"], rule["max"], unit, why, value)
    return "%s: must be %s to %s%s%s, got %s" % (name, rule["min"], rule["max"], unit, why, value)


def _in_bounds(rule, value):
    if "above" in rule and not value > rule["above"]:
        return False
    return rule.get("min", value) <= value <= rule.get("max", value)


def _text(value):
    return str(value) if value is not None else ""


_FORMS = {
    "version": VERSION_FORMS["version"],
    "arch": VERSION_FORMS["gpu_arch"],
    "compute_capability": VERSION_FORMS["compute_capability"],
}
_FORM_WHAT = {
    "arch": "a GPU architecture like sm_120a or compute_120",
    "compute_capability": "a compute capability like 12.0 (Blackwell SM120) or 10.0 (B200)",
}


def check_option(entry, value, require_jmespath=True):
    """One option's value as the policy keeps it, or ValueError naming it; what is checked is the table's ``check``.

    ``None`` (unset) is always fine: it means the option's documented default behaviour.
    """
    name, rule = entry["name"], entry.get("check")
    if rule is None:
        raise ValueError("%s: the option table (_readiness_options.OPTIONS) gives it no check: add its bounds or form" % name)
    form = rule.get("form")
    if value is None or form in ("bool", "choices"):
        return value                    # the argument spec's type and choices bound these
    if form is None:
        if not _in_bounds(rule, value):
            raise ValueError(_number_message(name, rule, value))
        return value
    if form == "memory":
        return parse_memory_requirement(value)
    if form == "size":
        parse_option_size(name, value)
        return value
    if form in _FORMS:
        if rule.get("empty") and value == "":
            return value
        if not _FORMS[form].match(_text(value)):
            raise ValueError("%s: %r is not %s" % (name, value, rule.get("what") or _FORM_WHAT[form]))
        return value
    if form in ("path", "absolute_path"):
        if not _text(value).strip() or "\0" in _text(value):
            raise ValueError("%s: %r is not a path (leave it unset for the default)" % (name, value))
        if form == "absolute_path" and not os.path.isabs(value):
            # Relative to what? The node's login directory is no build directory anyone meant.
            raise ValueError("%s: %r is not an absolute path on the node" % (name, value))
        return value
    return _LIST_FORMS[form](name, value, require_jmespath)


def _names(what, one_component):
    """The validator of a list of names: each a non-blank string without NUL and, where it is one path component
    (an executable's or a cgroup's name, not a path), without /; ``what`` ends the message."""
    def check(name, values, _require_jmespath):
        for item in values:
            text = _text(item)
            if not text.strip() or "\0" in text or (one_component and "/" in text):
                raise ValueError("%s: %r is not %s" % (name, item, what))
        return values
    return check


_program_names = _names("an executable name (no path, NUL or blank)", one_component=True)
_process_names = _names("a process name or path (NUL or blank)", one_component=False)
_cgroup_names = _names("a cgroup name or glob (one path component: no /, NUL or blank)", one_component=True)


def _xids(name, values, _require_jmespath):
    for code in values:
        if not 0 < code < 2 ** 31:
            raise ValueError("%s: %r is not an NVIDIA Xid code (a positive number such as 79)" % (name, code))
    return values


def _regexes(name, values, _require_jmespath):
    compile_patterns(values, name)
    return values


def _absolute_paths(name, values, _require_jmespath):
    for item in values:
        if not _text(item).strip() or "\0" in _text(item) or not os.path.isabs(_text(item)):
            raise ValueError("%s: %r is not an absolute path on the node" % (name, item))
    return [os.path.normpath(item) if item != "/" else item for item in values]


def _custom_checks(_name, values, require_jmespath):
    return [compile_custom_check(i, spec, require_jmespath) for i, spec in enumerate(values or [])]


_LIST_FORMS = {
    "program_names": _program_names,
    "process_names": _process_names,
    "cgroup_names": _cgroup_names,
    "xids": _xids,
    "regexes": _regexes,
    "absolute_paths": _absolute_paths,
    "custom_checks": _custom_checks,
}
FORMS = ("bool", "choices", "memory", "size", "path", "absolute_path") + tuple(_FORMS) + tuple(_LIST_FORMS)


_FROM_CHILDREN = ("function_expression", "or_expression", "and_expression", "not_expression", "comparator",
                  "multi_select_list", "multi_select_dict", "key_val_pair")
_FROM_LEFT = ("subexpression", "index_expression", "pipe", "projection", "value_projection", "filter_projection", "flatten")


def root_fields(node):
    """The top-level fact names a parsed JMESPath expression reads, or None when it reads the whole (``@``, ``*``).

    Only the left side of a path, pipe or projection is evaluated against the facts themselves; the right side
    and filter conditions see its elements, and ``&expr`` arguments see list items. A shape not known here
    also answers None, so the caller gathers everything rather than too little.
    """
    kind = node.get("type")
    children = [child for child in node.get("children") or [] if isinstance(child, dict)]
    if kind == "field":
        return {node["value"]}
    if kind in ("literal", "expref", "index", "slice"):
        return set()
    if kind in _FROM_LEFT:
        return root_fields(children[0]) if children else set()
    if kind in _FROM_CHILDREN:
        found = set()
        for child in children:
            names = root_fields(child)
            if names is None:
                return None
            found |= names
        return found
    return None


def custom_check_subsets(index, spec):
    """The node_facts subsets one compiled custom check needs; ``['all']`` when its expression reads the whole."""
    names = root_fields(spec["compiled"].parsed)
    if names is None:
        return ["all"]
    unknown_names = sorted(names - set(NODE_SUBSETS))
    if unknown_names:
        raise ValueError("custom_checks[%d] (%s): the query %r reads %s, which node_facts does not gather; the facts are %s"
                         % (index, spec["name"], spec["query"], ", ".join(unknown_names), ", ".join(NODE_SUBSETS)))
    return sorted(names)
