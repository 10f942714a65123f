# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which commit an offline source folder holds when it has no ``.git`` (issue 35 item 9): the git tree hash of its
files, computed as git computes it (blobs, modes, trees), compared with the tree hash of the commit the sgl-kernel
tree pins. An export (``git archive``, a GitHub tarball, an rsync without ``.git``) of a commit holds exactly that
commit's tracked files, so its tree hash is the commit's - except where git's own export rules change the files
(``export-ignore``/``export-subst`` in ``.gitattributes``: then no verdict) and for submodules, whose commits an export
cannot show: their paths (``.gitmodules``) are left out on both sides. A build may leave its outputs in the folder
(mscclpp copies its ``.so`` files into its own ``python/``), which git ignores: when the folder's files are not the
commit's, they are compared again without what its ``.gitignore`` files ignore. No git binary needed; stdlib only.

The known trees: ``{commit: tree hash without submodule entries}`` - the collection ships the pins of the sgl-kernel
trees it knows (roles/sgl_kernel/files/offline-trees.json, made by ``tests/tools/offline_trees.py`` from the
upstream repositories)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import os
import re
import stat

_SUBMODULE_PATH = re.compile(r"^\s*path\s*=\s*(.+?)\s*$", re.M)
_EXPORT_RULES = re.compile(r"\bexport-(ignore|subst)\b")
MAX_FILES = 200000   # a folder with more is not a source tree (a build dir, a home): no verdict


def blob_id(data):
    """git's id of a blob holding ``data`` (bytes)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def tree_id(entries):
    """git's id of the tree of ``entries`` ``[(path, mode, blob id)]`` (``/``-separated paths; modes ``100644``,
    ``100755``, ``120000``): each folder a tree object, its entries ordered as git orders them (a folder's name
    compares as if it ended in ``/``)."""
    children = {}
    for path, mode, sha in entries:
        head, _sep, rest = path.partition("/")
        children.setdefault(head, []).append((rest, mode, sha))
    records = []
    for name, items in children.items():
        if len(items) == 1 and items[0][0] == "":
            records.append((name, items[0][1], items[0][2]))
        else:
            records.append((name + "/", "40000", tree_id([item for item in items if item[0]])))
    body = b"".join(b"%s %s\0" % (mode.encode(), name.rstrip("/").encode("utf-8", "surrogateescape")) + bytes(bytearray.fromhex(sha))
                    for name, mode, sha in sorted(records, key=lambda record: record[0].encode("utf-8", "surrogateescape")))
    return hashlib.sha1(b"tree %d\0" % len(body) + body).hexdigest()


def submodule_paths(gitmodules_text):
    """The ``path =`` entries of a ``.gitmodules`` file."""
    return [match.strip().strip("/") for match in _SUBMODULE_PATH.findall(gitmodules_text or "")]


def without_submodules(entries, submodules):
    """``entries`` less those at or under a submodule path (and git's own gitlink entries, mode 160000)."""
    return [(path, mode, sha) for path, mode, sha in entries if mode != "160000"
            and not any(path == sub or path.startswith(sub + "/") for sub in submodules)]


def _glob_regex(pattern):
    """A .gitignore glob as a regex over ``/``-separated paths: ``*`` and ``?`` stop at ``/``, ``**`` crosses it."""
    out, index = [], 0
    while index < len(pattern):
        char = pattern[index]
        if pattern.startswith("**/", index):
            out.append("(?:.*/)?")
            index += 3
            continue
        if pattern.startswith("**", index):
            out.append(".*")
            index += 2
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[" and "]" in pattern[index + 2:]:
            end = pattern.index("]", index + 2)
            body = pattern[index + 1:end]
            out.append("[" + ("^" + body[1:] if body[:1] == "!" else body).replace("\\", "\\\\") + "]")
            index = end
        elif char == "\\" and index + 1 < len(pattern):
            index += 1
            out.append(re.escape(pattern[index]))
        else:
            out.append(re.escape(char))
        index += 1
    return re.compile("".join(out) + r"\Z")


def ignore_rules(text, base=""):
    """The rules of one ``.gitignore`` in the folder ``base`` (``/``-separated, ``""`` at the top), in order:
    ``(regex, negated, directories only, anchored to base, base)``. git's rules: ``#`` comments, ``!`` re-includes, a
    trailing ``/`` matches folders only, a ``/`` elsewhere anchors the pattern to the file's folder, else it matches
    a name at any depth."""
    rules = []
    for line in (text or "").splitlines():
        line = line.rstrip(" \t\r")
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        line = line[1:] if negated else line
        directories = line.endswith("/")
        line = line.rstrip("/")
        if line:
            rules.append((_glob_regex(line.lstrip("/")), negated, directories, "/" in line, base))
    return rules


def ignored(path, is_dir, rules):
    """Whether git ignores ``path`` (relative to the top) by ``rules`` (those of the ``.gitignore`` files of its
    folders, the top's first): the last rule that matches decides."""
    verdict = False
    for regex, negated, directories, anchored, base in rules:
        if (base and not path.startswith(base + "/")) or (directories and not is_dir):
            continue
        relative = path[len(base) + 1:] if base else path
        if regex.match(relative if anchored else relative.rsplit("/", 1)[-1]):
            verdict = not negated
    return verdict


def _read_text(path, limit=1 << 20):
    try:
        with open(path, "rb") as handle:
            return handle.read(limit).decode("utf-8", "replace")
    except (IOError, OSError):
        return ""


def _join(folder, name):
    return folder + "/" + name if folder else name


def folder_entries(folder, honour_ignores=False):
    """``[(path, mode, blob id)]`` of the files under ``folder`` as git would record them (``.git`` left out; empty
    folders are nothing to git), or None with more than ``MAX_FILES``. Symlinks are recorded, never followed. With
    ``honour_ignores``, what the folder's ``.gitignore`` files ignore is left out, as ``git add`` would (a folder
    ignored is not entered: nothing below it can be re-included)."""
    found, rules = [], {"": []}
    for top, dirs, files in os.walk(folder):
        here = os.path.relpath(top, folder).replace(os.sep, "/")
        here = "" if here == "." else here
        mine = rules.pop(here, [])
        if honour_ignores and ".gitignore" in files:
            mine = mine + ignore_rules(_read_text(os.path.join(top, ".gitignore")), here)
        dirs[:] = [d for d in dirs if d != ".git" and not os.path.islink(os.path.join(top, d))
                   and not (honour_ignores and ignored(_join(here, d), True, mine))]
        for name in dirs:
            rules[_join(here, name)] = mine
        for name in files + [d for d in os.listdir(top) if os.path.islink(os.path.join(top, d)) and d not in files]:
            if name == ".git" or (honour_ignores and ignored(_join(here, name), False, mine)):
                continue
            full = os.path.join(top, name)
            info = os.lstat(full)
            if stat.S_ISLNK(info.st_mode):
                mode, data = "120000", os.readlink(full).encode("utf-8", "surrogateescape")
            elif stat.S_ISREG(info.st_mode):
                mode = "100755" if info.st_mode & stat.S_IXUSR else "100644"
                with open(full, "rb") as handle:
                    data = handle.read()
            else:
                continue
            found.append((_join(here, name), mode, blob_id(data)))
            if len(found) > MAX_FILES:
                return None
    return found


def check_folder(folder, expected):
    """``(verdict, why)`` of an offline copy against the tree hash ``expected`` of its pinned commit: ``match``,
    ``mismatch`` (its files differ from the commit's), or ``unverified`` with why (export rules in
    ``.gitattributes``, too many files, an unreadable file)."""
    if _EXPORT_RULES.search(_read_text(os.path.join(folder, ".gitattributes"))):
        return "unverified", "its .gitattributes changes what an export holds (export-ignore/export-subst)"
    subs = submodule_paths(_read_text(os.path.join(folder, ".gitmodules")))
    for honour_ignores in (False, True):   # as exported; then less a build's ignored outputs (a tracked file may match an ignore)
        try:
            entries = folder_entries(folder, honour_ignores)
        except (IOError, OSError) as exc:
            return "unverified", "a file could not be read (%s)" % (exc.strerror or exc)
        if entries is None and honour_ignores:
            return "unverified", "more than %d files" % MAX_FILES
        if entries is not None and tree_id(without_submodules(entries, subs)) == expected:
            return "match", None
    return "mismatch", None
