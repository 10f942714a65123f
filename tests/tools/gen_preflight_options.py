# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write every file that follows from plugins/module_utils/_readiness/_readiness_options.py (the one declaration).

    python tests/tools/gen_preflight_options.py          # rewrite the generated files
    python tests/tools/gen_preflight_options.py --check  # exit 1 naming each file that differs (the unit test does too)

Generated: the doc fragments readiness_options, active_result_options and node_facts_options, and the preflight role's
defaults/main.yml and meta/argument_specs.yml. Edit the table, then run this. (tasks/check.yml names no option:
readiness reads each from the role variable preflight_<option> itself, its variable_prefix.)
"""

from __future__ import absolute_import, division, print_function

import os
import re
import sys

import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
if os.path.join(REPO, ".tmp", "collections") not in sys.path:
    sys.path.insert(0, os.path.join(REPO, ".tmp", "collections"))

from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _readiness_options as table  # noqa: E402
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness._active_test_options import ACTIVE_TEST_OPTIONS  # noqa: E402

HEADER = "# GENERATED from plugins/module_utils/_readiness/_readiness_options.py by tests/tools/gen_preflight_options.py: edit there.\n"
ROLE_PREFIX = "preflight_"


class _Dumper(yaml.SafeDumper):
    """No anchors, sequences indented under their key, short scalar lists on one line."""

    def ignore_aliases(self, data):
        return True

    def increase_indent(self, flow=False, indentless=False):
        return super(_Dumper, self).increase_indent(flow, False)


def _represent_list(dumper, data):
    short = all(isinstance(item, int) for item in data) or all(isinstance(item, str) and len(item) <= 16 for item in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=bool(short))


_Dumper.add_representer(list, _represent_list)


def dump(data):
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=112, allow_unicode=True)


def role_text(sentences):
    """O(x) names the action option x; in the role it is the variable preflight_x."""
    return [re.sub(r"O\((\w+)\)", lambda m: "O(%s%s)" % (ROLE_PREFIX, m.group(1)) if m.group(1) in table.BY_NAME
                   else m.group(0), text) for text in sentences]


def doc_option(entry, description):
    option = dict(description=list(description), type=entry["type"])
    if entry.get("elements"):
        option["elements"] = entry["elements"]
    if entry.get("choices"):
        option["choices"] = list(entry["choices"])
    if entry["default"] is not None:
        option["default"] = entry["default"]
    return option


def fragment(class_doc, entries):
    options = dict((entry["name"], doc_option(entry, entry["description"])) for entry in entries)
    body = dump(dict(options=options))
    return ('# -*- coding: utf-8 -*-\n'
            '# Copyright: gpufleet.preflight contributors\n'
            '# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)\n'
            + HEADER +
            '\nfrom __future__ import absolute_import, division, print_function\n\n'
            '__metaclass__ = type\n\n\n'
            'class ModuleDocFragment(object):\n'
            '    """%s"""\n\n'
            '    DOCUMENTATION = r"""\n%s"""\n') % (class_doc, body)


ACTIVE_RESULT = frozenset(entry["name"] for entry in ACTIVE_TEST_OPTIONS)


def action_entries(node, active_result=False):
    """The action's options of one fragment: node_facts' shared ones, the active tests' kept results, the rest."""
    return [entry for entry in table.OPTIONS if entry.get("action", True) and bool(entry.get("node")) is node
            and (entry["name"] in ACTIVE_RESULT) is active_result]


def role_defaults():
    values = dict((ROLE_PREFIX + entry["name"], entry["default"]) for entry in table.OPTIONS if entry.get("roles"))
    return "---\n" + HEADER + dump(values)


def role_argument_specs():
    specs = {}
    for point, meta in table.ENTRY_POINTS:
        options = {}
        for entry in table.OPTIONS:
            if point in (entry.get("roles") or ()):
                options[ROLE_PREFIX + entry["name"]] = doc_option(
                    entry, role_text(entry.get("role_description") or entry["description"]))
        specs[point] = dict(short_description=meta["short_description"], description=list(meta["description"]),
                            options=options)
    return "---\n" + HEADER + dump(dict(argument_specs=specs))


def generated():
    """{path relative to the repository: content}."""
    return {
        "plugins/doc_fragments/node_facts_options.py": fragment(
            "Options that tune how node_facts gathers, shared by node_facts and the readiness action that runs it.",
            action_entries(node=True)),
        "plugins/doc_fragments/readiness_options.py": fragment(
            "The readiness policy's options (those that node_facts does not share).", action_entries(node=False)),
        "plugins/doc_fragments/active_result_options.py": fragment(
            "The readiness policy's options that require a result an active test kept on the node.",
            action_entries(node=False, active_result=True)),
        "roles/preflight/defaults/main.yml": role_defaults(),
        "roles/preflight/meta/argument_specs.yml": role_argument_specs(),
    }


def stale_files(files, root=REPO):
    """Paths of ``files`` ({path: content}) whose content on disk differs."""
    out = []
    for path, content in sorted(files.items()):
        try:
            with open(os.path.join(root, path)) as handle:
                on_disk = handle.read()
        except (IOError, OSError):
            on_disk = None
        if on_disk != content:
            out.append(path)
    return out


def run(argv, files, source, command):
    """``--check``: name each stale file and exit 1; else write them all."""
    if "--check" in argv:
        stale = stale_files(files)
        for path in stale:
            print("%s differs from %s: run %s" % (path, source, command))
        return 1 if stale else 0
    for path, content in sorted(files.items()):
        with open(os.path.join(REPO, path), "w") as handle:
            handle.write(content)
        print("wrote %s" % path)
    return 0


def differing(root=REPO):
    """Paths whose content on disk is not what the table generates."""
    return stale_files(generated(), root)


def main(argv):
    return run(argv, generated(), "plugins/module_utils/_readiness/_readiness_options.py", "python tests/tools/gen_preflight_options.py")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
