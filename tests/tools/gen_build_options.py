# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write plugins/doc_fragments/guarded_build_options.py from plugins/module_utils/_build/_build_option_table.py.

    python tests/tools/gen_build_options.py          # rewrite the generated fragment
    python tests/tools/gen_build_options.py --check  # exit 1 naming each file that differs (the unit test does too)

The module's argument spec is built from the same table at import (guarded_build's ARGUMENT_SPEC); the sgl_kernel
role's variables that feed an option are held to it by tests/unit/plugins/test_build_option_table.py.
"""

from __future__ import absolute_import, division, print_function

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gen_preflight_options import dump, run, stale_files  # noqa: E402  (one YAML style, one file handling)

from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _build_option_table as table  # noqa: E402

SOURCE = "plugins/module_utils/_build/_build_option_table.py"
COMMAND = "python tests/tools/gen_build_options.py"
FRAGMENT = "plugins/doc_fragments/guarded_build_options.py"


def doc_option(entry):
    option = dict(description=list(entry["description"]), type=entry["type"])
    for key in ("elements", "required"):
        if entry.get(key):
            option[key] = entry[key]
    if entry.get("choices"):
        option["choices"] = list(entry["choices"])
    if entry.get("default") is not None:
        option["default"] = entry["default"]
    return option


def fragment():
    body = dump(dict(options=dict((entry["name"], doc_option(entry)) for entry in table.OPTIONS)))
    return ('# -*- coding: utf-8 -*-\n'
            '# Copyright: gpufleet.preflight contributors\n'
            '# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)\n'
            '# GENERATED from %s by tests/tools/gen_build_options.py: edit there.\n'
            '\nfrom __future__ import absolute_import, division, print_function\n\n'
            '__metaclass__ = type\n\n\n'
            'class ModuleDocFragment(object):\n'
            '    """guarded_build\'s options (the module\'s argument spec comes from the same table)."""\n\n'
            '    DOCUMENTATION = r"""\n%s"""\n') % (SOURCE, body)


def generated():
    """{path relative to the repository: content}."""
    return {FRAGMENT: fragment()}


def differing():
    return stale_files(generated())


def main(argv):
    return run(argv, generated(), SOURCE, COMMAND)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
