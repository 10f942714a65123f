# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every role variable of every role: defaults/main.yml and meta/argument_specs.yml say the same (issue 10).

- a variable in defaults/main.yml is an option of at least one entry point, with that default;
- an option with a default in the argument specs has that default in defaults/main.yml;
- an option that several entry points take is declared the same way in each (type, default, elements, choices);
- build_deps and sgl_kernel: defaults/main.yml is generated from meta/argument_specs.yml (the one declaration) by
  tests/tools/gen_role_defaults.py, and every ``<role>_*`` name the role's tasks use is declared there.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import sys

import pytest
import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ROLES = sorted(name for name in os.listdir(os.path.join(REPO, "roles"))
               if os.path.isfile(os.path.join(REPO, "roles", name, "meta", "argument_specs.yml")))
KEYS = ("type", "default", "elements", "choices")

sys.path.insert(0, os.path.join(REPO, "tests", "tools"))
import gen_role_defaults  # noqa: E402

# Names with a role's prefix that are not its variables: facts and results the role sets, a module, a playbook's
# host pattern.
NOT_VARIABLES = {"build_deps_env", "sgl_kernel_result", "sgl_kernel_tree", "sgl_kernel_hosts"}


def load(role, *path):
    full = os.path.join(REPO, "roles", role, *path)
    if not os.path.isfile(full):
        return {}
    with open(full) as handle:
        return yaml.safe_load(handle) or {}


def declarations(role):
    """{variable: [(entry point, option dict)]}."""
    found = {}
    for point, spec in (load(role, "meta", "argument_specs.yml").get("argument_specs") or {}).items():
        for name, option in (spec.get("options") or {}).items():
            found.setdefault(name, []).append((point, option))
    return found


def test_all_three_roles_are_covered():
    assert set(ROLES) >= {"preflight", "build_deps", "sgl_kernel"}


@pytest.mark.parametrize("role", ROLES)
def test_every_default_is_declared_with_that_default(role):
    defaults = load(role, "defaults", "main.yml")
    declared = declarations(role)
    problems = []
    for name, value in sorted(defaults.items()):
        if name not in declared:
            problems.append("%s is set in roles/%s/defaults/main.yml but no entry point of "
                            "roles/%s/meta/argument_specs.yml declares it: add it to the entry points that use it"
                            % (name, role, role))
            continue
        for point, option in declared[name]:
            if option.get("default") != value:
                problems.append("%s: roles/%s/defaults/main.yml says %r, argument_specs.yml entry point %s says "
                                "default %r: make them equal" % (name, role, value, point, option.get("default")))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("role", ROLES)
def test_every_declared_default_is_in_defaults(role):
    defaults = load(role, "defaults", "main.yml")
    problems = []
    for name, points in sorted(declarations(role).items()):
        for point, option in points:
            if "default" in option and option["default"] is not None and name not in defaults:
                problems.append("%s: argument_specs.yml entry point %s declares default %r but "
                                "roles/%s/defaults/main.yml does not set it: add `%s: %r` there"
                                % (name, point, option["default"], role, name, option["default"]))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("role", ROLES)
def test_an_option_of_several_entry_points_is_declared_alike(role):
    problems = []
    for name, points in sorted(declarations(role).items()):
        first_point, first = points[0]
        for point, option in points[1:]:
            for key in KEYS:
                if option.get(key) != first.get(key):
                    problems.append("%s: %s is %r in entry point %s but %r in %s (roles/%s/meta/argument_specs.yml)"
                                    % (name, key, first.get(key), first_point, option.get(key), point, role))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("role", ROLES)
def test_every_variable_is_named_for_its_role(role):
    prefix = role + "_"
    wrong = [name for name in declarations(role) if not name.startswith(prefix)]
    assert not wrong, "roles/%s declares %s: role variables start with %s" % (role, ", ".join(wrong), prefix)


def test_generated_role_defaults_match_their_argument_specs():
    stale = gen_role_defaults.differing()
    assert not stale, ("%s: a variable's default was changed or added outside meta/argument_specs.yml; declare it in "
                       "roles/<role>/meta/argument_specs.yml (type, default, description) and run "
                       "python tests/tools/gen_role_defaults.py" % ", ".join(stale))


@pytest.mark.parametrize("role", gen_role_defaults.ROLES)
def test_every_variable_the_role_uses_is_declared(role):
    declared = set(declarations(role))
    pattern = re.compile(r"\b%s_[a-z0-9]+(?:_[a-z0-9]+)*\b" % role)
    used = {}
    for folder in ("tasks", "templates", "handlers", "vars"):
        top = os.path.join(REPO, "roles", role, folder)
        for dirpath, _dirs, files in os.walk(top):
            for name in files:
                with open(os.path.join(dirpath, name)) as handle:
                    for found in pattern.findall(handle.read()):
                        used.setdefault(found, os.path.relpath(os.path.join(dirpath, name), REPO))
    missing = sorted(name for name in set(used) - declared - NOT_VARIABLES)
    assert not missing, "\n".join(
        "%s is used in %s but not declared: add it to roles/%s/meta/argument_specs.yml (type, default, description), "
        "then run python tests/tools/gen_role_defaults.py (a fact or result the role sets: NOT_VARIABLES in this test)"
        % (name, used[name], role) for name in missing)
