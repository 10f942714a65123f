# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every role variable of every role: defaults/main.yml and meta/argument_specs.yml say the same (issue 10).

- a variable in defaults/main.yml is an option of at least one entry point, with that default;
- an option with a default in the argument specs has that default in defaults/main.yml;
- an option that several entry points take is declared the same way in each (type, default, elements, choices).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ROLES = sorted(name for name in os.listdir(os.path.join(REPO, "roles"))
               if os.path.isfile(os.path.join(REPO, "roles", name, "meta", "argument_specs.yml")))
KEYS = ("type", "default", "elements", "choices")


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
