# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""guarded_build's options declared once (_build/_build_option_table.py): the module's spec, the doc fragment, the
checks, the sgl_kernel role's variables and the admission launcher's defaults all follow from or agree with it. Each
half-done change fails here naming the file and the fix (issue 40)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import os
import re
import sys

import pytest
import yaml

from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _admission_settings
from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _build_option_table as table
from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _build_options
from ansible_collections.gpufleet.preflight.plugins.module_utils._human import parse_size_option
from ansible_collections.gpufleet.preflight.plugins.modules.guarded_build import ARGUMENT_SPEC

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
TABLE = "plugins/module_utils/_build/_build_option_table.py"
ROLE = os.path.join(REPO, "roles", "sgl_kernel")
sys.path.insert(0, os.path.join(REPO, "tests", "tools"))
import gen_build_options  # noqa: E402


def read(*path):
    with open(os.path.join(REPO, *path)) as handle:
        return handle.read()


def role_options():
    specs = yaml.safe_load(read("roles", "sgl_kernel", "meta", "argument_specs.yml"))["argument_specs"]
    out = {}
    for spec in specs.values():
        out.update(spec.get("options") or {})
    return out


def role_tasks():
    folder = os.path.join(ROLE, "tasks")
    return dict((name, read("roles", "sgl_kernel", "tasks", name)) for name in sorted(os.listdir(folder)))


def test_the_module_spec_is_the_tables():
    assert ARGUMENT_SPEC == table.argument_spec(), (
        "plugins/modules/guarded_build.py: ARGUMENT_SPEC differs from %s: declare the option there (with its "
        "description and check), not in the module" % TABLE)


def test_the_doc_fragment_is_generated_from_the_table():
    assert gen_build_options.differing() == [], (
        "plugins/doc_fragments/guarded_build_options.py differs from %s: run python tests/tools/gen_build_options.py"
        % TABLE)


@pytest.mark.parametrize("missing, says", [
    ("description", "has no description: add description=[...]"),
    ("check", "has no check: add check=dict(min=, max=) or dict(form=...)"),
])
def test_an_option_without_its_docs_or_its_check_refuses_to_load(missing, says):
    entry = copy.deepcopy(table.BY_NAME["jobs"])
    entry.update(name="new_option")
    del entry[missing]
    with pytest.raises(ValueError) as err:
        table._validate(table.OPTIONS + (entry,))
    assert TABLE in str(err.value) and "new_option %s" % says in str(err.value)


def test_an_unknown_form_or_a_by_without_a_file_refuses_to_load():
    for check, says in ((dict(form="sizes"), "check {'form': 'sizes'} is none of"), (dict(form="by"), "names no file")):
        entry = dict(table.BY_NAME["jobs"], name="new_option", check=check)
        with pytest.raises(ValueError) as err:
            table._validate((entry,))
        assert says in str(err.value)


def test_every_form_has_its_check():
    assert sorted(_build_options.FORMS) == sorted(table.FORMS), (
        "plugins/module_utils/_build/_build_options.py FORMS and %s FORMS differ: a form declared in one has no "
        "check, or a check no declaration" % TABLE)
    for name, (rule, _what) in _build_options.PATTERNS.items():
        assert rule.pattern
    for entry in table.with_form("pattern"):
        assert entry["check"]["pattern"] in _build_options.PATTERNS, (
            "%s: %s names pattern %r; add it to _build_options.PATTERNS" % (TABLE, entry["name"], entry["check"]["pattern"]))


def test_an_option_checked_elsewhere_is_checked_in_the_file_it_names():
    for entry in table.OPTIONS:
        by = entry["check"].get("by")
        if by:
            assert entry["name"] in read(by), "%s: %s is checked 'by' %s, which never names it" % (TABLE, entry["name"], by)


def test_every_option_is_read_by_the_build():
    """An option nothing reads (declared, documented, checked, ignored) fails naming it."""
    folder = os.path.join(REPO, "plugins", "module_utils", "_build")
    code = "".join(read("plugins", "module_utils", "_build", name) for name in sorted(os.listdir(folder))
                   if name.endswith(".py") and name != "_build_option_table.py")
    code += read("plugins", "modules", "guarded_build.py").split('"""\n\nfrom ', 1)[-1]
    unread = [entry["name"] for entry in table.OPTIONS
              if not re.search(r"""params(\[|\.get\(|\.pop\()\s*["']%s["']""" % entry["name"], code)]
    assert unread == [], "%s declares %s, which no guarded_build code reads (params[...]): read it or remove it" % (
        TABLE, unread)


def test_the_role_variables_that_feed_an_option_agree_with_it():
    options = role_options()
    for entry in table.OPTIONS:
        variable = entry.get("role")
        if not variable:
            continue
        assert variable in options, "roles/sgl_kernel/meta/argument_specs.yml: %s (role of %s in %s) is not declared" % (
            variable, entry["name"], TABLE)
        declared = options[variable]
        assert declared["type"] in (entry["type"], "raw"), (
            "roles/sgl_kernel/meta/argument_specs.yml: %s is a %s, guarded_build's %s a %s"
            % (variable, declared["type"], entry["name"], entry["type"]))
        expected = entry.get("default")
        if expected is None:   # the role's empty value (0, '') stands for omitted
            assert declared.get("default") in (None, 0, ""), (
                "roles/sgl_kernel/meta/argument_specs.yml: %s defaults to %r where guarded_build's %s has no default "
                "(0 or '' means omitted)" % (variable, declared.get("default"), entry["name"]))
        else:
            assert declared.get("default") == expected, (
                "roles/sgl_kernel/meta/argument_specs.yml: %s defaults to %r, %s says %s=%r: make them agree"
                % (variable, declared.get("default"), TABLE, entry["name"], expected))
        assert any(re.search(r"\b%s\b" % variable, text) for text in role_tasks().values()), (
            "roles/sgl_kernel/tasks: %s is never passed on" % variable)


def test_every_role_variable_is_used():
    """A variable declared and never used fails naming it."""
    used = "".join(role_tasks().values()) + "".join(
        read("playbooks", name) for name in sorted(os.listdir(os.path.join(REPO, "playbooks"))) if name.endswith(".yml"))
    unused = sorted(name for name in role_options() if not re.search(r"\b%s\b" % name, used))
    assert unused == [], ("roles/sgl_kernel/meta/argument_specs.yml declares %s, which no task of roles/sgl_kernel/tasks "
                          "reads: use it or remove it" % unused)


def test_the_launchers_default_per_thread_is_the_tables():
    """The admission launcher's ``default_bytes`` (a source never seen) is guarded_build's memory_per_thread."""
    assert _admission_settings.DEFAULTS["default_bytes"] == parse_size_option("x", table.default("memory_per_thread")), (
        "plugins/module_utils/_build/_admission_settings.py DEFAULTS default_bytes differs from %s memory_per_thread "
        "(and the sgl_kernel role's sgl_kernel_memory_per_thread): one per-thread default" % TABLE)


def test_the_role_sends_the_launcher_only_its_settings():
    text = role_tasks()["admission.yml"]
    block = text.split("content: >-", 1)[1].split("gpufleet.preflight.admission_config", 1)[0]
    keys = set(re.findall(r"'(\w+)':", block))
    assert keys and keys <= set(_admission_settings.DEFAULTS), (
        "roles/sgl_kernel/tasks/admission.yml passes %s, which the launcher's DEFAULTS do not know"
        % sorted(keys - set(_admission_settings.DEFAULTS)))
    assert "'default_bytes': sgl_kernel_memory_per_thread" in block, "the launcher's default_bytes is the role's per-thread"


def test_the_budget_is_chosen_once():
    """guarded_build's memory_limit and the launcher's budget_bytes are one fact, chosen in plan.yml."""
    tasks = role_tasks()
    choosing = [name for name, text in tasks.items() if "_sgl_kernel_plan.budget_bytes" in text]
    assert choosing == ["plan.yml"], "roles/sgl_kernel/tasks: the budget is chosen in %s; use _sgl_kernel_budget" % choosing
    assert "memory_limit: \"{{ _sgl_kernel_budget.bytes }}\"" in tasks["build.yml"]
    assert "'budget_bytes': _sgl_kernel_budget.bytes" in tasks["admission.yml"]


def test_the_planners_defaults_are_the_ones_documented_and_the_roles():
    """build_jobs (the filter) and the role plan with what the table and _build_plan declare."""
    from ansible_collections.gpufleet.preflight.plugins.filter import build_jobs
    from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _build_plan
    documented = yaml.safe_load(build_jobs.DOCUMENTATION)["options"]
    assert documented["memory_per_thread"]["default"] == table.default("memory_per_thread"), (
        "plugins/filter/build_jobs.py documents memory_per_thread default %r, %s declares %r"
        % (documented["memory_per_thread"]["default"], TABLE, table.default("memory_per_thread")))
    assert _build_plan.DEFAULT_MEMORY_PER_THREAD == parse_size_option("x", table.default("memory_per_thread"))
    options = role_options()
    for variable, option, value in (("sgl_kernel_measured_margin", "measured_margin", _build_plan.MEASURED_MARGIN),
                                    ("sgl_kernel_min_memory_per_thread", "min_memory_per_thread",
                                     _build_plan.MIN_MEMORY_PER_THREAD)):
        role_value = options[variable]["default"]
        as_number = parse_size_option(variable, role_value) if isinstance(role_value, str) else role_value
        assert as_number == value, (
            "roles/sgl_kernel/meta/argument_specs.yml %s=%r, plugins/module_utils/_build/_build_plan.py plans with %r"
            % (variable, role_value, value))
        documented_value = documented[option]["default"]
        assert (parse_size_option(option, documented_value) if isinstance(documented_value, str)
                else documented_value) == value, "plugins/filter/build_jobs.py documents %s=%r" % (option, documented_value)


def test_every_launcher_setting_is_documented():
    """A setting added to the launcher's DEFAULTS only (no docs) fails naming it."""
    from ansible_collections.gpufleet.preflight.plugins.filter import admission_config
    documented = admission_config.DOCUMENTATION
    missing = [name for name in _admission_settings.DEFAULTS if "C(%s)" % name not in documented]
    assert not missing, ("plugins/filter/admission_config.py DOCUMENTATION does not describe the launcher's settings %s "
                         "(plugins/module_utils/_build/_admission_settings.py DEFAULTS): add each to its 'Settings' list"
                         % missing)
