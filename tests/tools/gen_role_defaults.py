# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write roles/<role>/defaults/main.yml from roles/<role>/meta/argument_specs.yml (the one declaration).

    python tests/tools/gen_role_defaults.py          # rewrite the generated defaults
    python tests/tools/gen_role_defaults.py --check  # exit 1 naming each file that differs (the unit test does too)

For the roles whose variables are role-only (build_deps, sgl_kernel): a variable is declared once, in its entry
point's ``options`` in meta/argument_specs.yml (type, default, description, choices); its defaults/main.yml line is
generated from there. The preflight role's files come from plugins/module_utils/_readiness/_readiness_options.py instead
(tests/tools/gen_preflight_options.py), because the readiness action shares that table.
"""

from __future__ import absolute_import, division, print_function

import os
import sys

import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gen_preflight_options import dump, run, stale_files  # noqa: E402  (the preflight generator's YAML style and file handling)

ROLES = ("build_deps", "sgl_kernel")


def header(role):
    return ("# GENERATED from roles/%s/meta/argument_specs.yml by tests/tools/gen_role_defaults.py: edit there\n"
            "# (each variable's type, default and description), then run the generator.\n" % role)


def declared(role, root=REPO):
    """[(variable, default)] in the order the entry points declare them; each variable once."""
    with open(os.path.join(root, "roles", role, "meta", "argument_specs.yml")) as handle:
        specs = (yaml.safe_load(handle) or {}).get("argument_specs") or {}
    seen, out = set(), []
    for _point, spec in specs.items():
        for name, option in (spec.get("options") or {}).items():
            if name in seen or option.get("default") is None:
                continue
            seen.add(name)
            out.append((name, option["default"]))
    return out


def defaults_text(role, root=REPO):
    return "---\n" + header(role) + dump(dict(declared(role, root)))


def generated(root=REPO):
    """{path relative to the repository: content}."""
    return dict(("roles/%s/defaults/main.yml" % role, defaults_text(role, root)) for role in ROLES)


def differing(root=REPO):
    return stale_files(generated(root), root)


def main(argv):
    return run(argv, generated(), "its role's meta/argument_specs.yml (declare the variable there)",
               "python tests/tools/gen_role_defaults.py")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
