# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""setup-style ``gather_subset`` resolution: ``all``, names, ``!name`` exclusions."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def resolve_subsets(requested, known):
    """Return the ordered list of subsets to gather; ValueError naming unknown ones.

    ``['all', '!gpus']`` -> every known subset but gpus; ``['!gpus']`` alone means all but gpus,
    as in ansible.builtin.setup.
    """
    requested = list(requested or ["all"])
    unknown = sorted(
        {item.lstrip("!") for item in requested} - set(known) - {"all"}
    )
    if unknown:
        raise ValueError(
            "unknown subset%s %s; choose from all, %s (prefix ! to exclude)"
            % ("s" if len(unknown) > 1 else "", ", ".join(unknown), ", ".join(known))
        )
    include = set()
    exclude = set()
    only_exclusions = all(item.startswith("!") for item in requested)
    for item in requested:
        target, name = (exclude, item[1:]) if item.startswith("!") else (include, item)
        target.update(known if name == "all" else [name])
    if only_exclusions:
        include.update(known)
    return [name for name in known if name in include and name not in exclude]
