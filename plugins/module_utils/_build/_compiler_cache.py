# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The compiler cache of a guarded build (ccache or sccache), set up so that it never returns a stale object.

ccache's default mode hashes ``nvcc -E``, which preprocesses for the lowest ``-gencode`` only, with
``__CUDA_ARCH__`` defined: an edit in host-only code (``#ifndef __CUDA_ARCH__``) or in a block only a higher
architecture compiles (``#if __CUDA_ARCH__ >= 1200``) hashes the same and the OLD object comes back. Depend mode
(``CCACHE_DEPEND``) never preprocesses: the key is the source's own bytes, the arguments and the headers of the
``-MD`` file CMake + Ninja already ask for. ccache shares depend-mode entries between object names (a fresh build
directory) since 4.0, so 4.0 is the oldest accepted. sccache (0.10 or newer) splits nvcc per architecture
itself and is correct as it is; its server is private to the build (a socket of its own), started inside the
build's confinement (its compilers are the server's children) and stopped after it.

Pure: versions, environments, launcher arguments and statistics from text; the module runs the programs.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import re
import shlex
import tempfile

try:
    from urllib.parse import unquote, urlsplit
except ImportError:  # Python 2 (ansible-test's compile check)
    from urllib import unquote
    from urlparse import urlsplit

from ansible_collections.gpufleet.preflight.plugins.module_utils._build._cache_safety import POLICIES, check_cache_directory
from ansible_collections.gpufleet.preflight.plugins.module_utils._human import human

KINDS = ("auto", "ccache", "sccache", "none")
MINIMUM = {
    # depend mode came in 3.6, but before 4.0 an -MD build hashed the object's name: a fresh build dir never hit
    "ccache": ((4, 0), "depend mode that shares entries between object names (fresh build directories) came in "
                       "ccache 4.0"),
    # nvcc per architecture in the cache key since 0.9, CUDA 12.8 fixes in 0.10
    "sccache": ((0, 10, 0), "sccache caches nvcc per architecture, with the CUDA 12.8 fixes, from 0.10.0"),
}
# what depend mode needs and what keeps a fresh build directory hitting; always set together, reported
CCACHE_SETTINGS = (
    ("CCACHE_DEPEND", "1"),            # no preprocessor: nvcc -E sees one architecture only
    ("CCACHE_NOHASHDIR", "true"),      # the build directory is not part of the key
    ("CCACHE_COMPILERCHECK", "content"),  # a reinstalled nvcc of another version misses, same mtime or not
)
# sccache splits one nvcc compile into these steps; the hit rate counts whole compiles
SCCACHE_SUBSTEPS = frozenset(("CUDA (Device code)", "PTX", "CUBIN"))
_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")


def parse_version(text):
    """``ccache version 4.7.5`` / ``sccache 0.16.0`` (first line) -> ``(4, 7, 5)``; None when there is none."""
    for line in (text or "").splitlines():
        if line.strip():
            match = _VERSION.search(line)
            if not match:
                return None
            return tuple(int(part) for part in match.groups() if part is not None)
    return None


def dotted(version):
    return ".".join(str(part) for part in version)


def check_version(kind, path, output):
    """The version of ``kind`` at ``path`` from its ``--version`` ``output``; ValueError naming the version needed
    when it is older than that or cannot be read."""
    minimum, why = MINIMUM[kind]
    version = parse_version(output)
    if version is None:
        raise ValueError("compiler_cache=%s: cannot read a version from '%s --version' (%r); %s %s or newer is "
                         "needed" % (kind, path, (output or "").strip()[:80], kind, dotted(minimum)))
    if version < minimum:
        raise ValueError("compiler_cache=%s: %s at %s is too old: %s %s or newer is needed (%s); install a newer one "
                         "(build_deps_compiler_cache) or set compiler_cache=none" % (
                             kind, dotted(version), path, kind, dotted(minimum), why))
    return version


def choose(requested, found, redis=False):
    """The cache to use: ``(kind, note)``. ``found``: ``{"ccache": path or None, "sccache": path or None}``.
    ``auto``: sccache when a shared store (``redis``) is given, else ccache, else sccache, else none (noted).
    ValueError when the one asked for is not there."""
    if requested == "none":
        return "none", None
    if requested in ("ccache", "sccache"):
        if not found.get(requested):
            raise ValueError("compiler_cache=%s: %s was not found on the build's PATH; install it (the build_deps role "
                             "does) or set compiler_cache=none" % (requested, requested))
        return requested, None
    order = ("sccache", "ccache") if redis else ("ccache", "sccache")
    for kind in order:
        if found.get(kind):
            return kind, None
    return "none", "compiler_cache=auto: neither ccache nor sccache was found on the build's PATH; building uncached"


def server_socket(build_dir, directory=None):
    """The sccache server's socket for one build directory: short (sun_path holds 108 bytes) and its own, so
    two builds on a node never share a server or its statistics."""
    digest = hashlib.sha256(os.path.abspath(build_dir).encode("utf-8")).hexdigest()[:16]
    return os.path.join(directory or tempfile.gettempdir(), "gpufleet-sccache-%s.sock" % digest)


def environment(kind, cache_dir=None, source_dir=None, max_bytes=None, redis=None, socket=None):
    """The variables that make the build's compiles go through ``kind`` correctly (not the launcher)."""
    env = {}
    if kind == "ccache":
        env.update(CCACHE_SETTINGS)
        if source_dir:
            env["CCACHE_BASEDIR"] = source_dir
        if cache_dir:
            env["CCACHE_DIR"] = cache_dir
        if max_bytes:
            env["CCACHE_MAXSIZE"] = "%dKi" % max(1, max_bytes // 1024)
    elif kind == "sccache":
        env["SCCACHE_IDLE_TIMEOUT"] = "0"  # the module stops it; a long compile must not outlive its server
        if socket:
            env["SCCACHE_SERVER_UDS"] = socket
        if cache_dir:
            env["SCCACHE_DIR"] = cache_dir
        if max_bytes:
            env["SCCACHE_CACHE_SIZE"] = str(max_bytes)
        if redis:
            env.update(redis_variables(redis))
        if source_dir:
            env["SCCACHE_BASEDIRS"] = source_dir
    return env


def redis_variables(url):
    """``redis://[user[:password]@]host[:port][/db]`` -> sccache's variables: the endpoint without the
    credentials (sccache 0.16 does not start with a password in SCCACHE_REDIS_ENDPOINT), the password in
    ``SCCACHE_REDIS_PASSWORD``. ValueError naming compiler_cache_redis for anything else."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ValueError("compiler_cache_redis: not a redis:// URL (%s)" % exc)
    if parts.scheme not in ("redis", "rediss", "tcp") or not parts.hostname or parts.query or parts.fragment:
        raise ValueError("compiler_cache_redis: expected redis://[user[:password]@]host[:port][/db], got a %s URL"
                         % (parts.scheme or "scheme-less"))
    host = "[%s]" % parts.hostname if ":" in parts.hostname else parts.hostname
    env = {"SCCACHE_REDIS_ENDPOINT": "%s://%s:%d" % ("tcp" if parts.scheme == "redis" else parts.scheme, host,
                                                     port or 6379)}
    database = parts.path.strip("/")
    if database:
        if not database.isdigit():
            raise ValueError("compiler_cache_redis: the database after the host must be a number, got %r" % database)
        env["SCCACHE_REDIS_DB"] = database
    if parts.username:
        env["SCCACHE_REDIS_USERNAME"] = unquote(parts.username)
    if parts.password is not None:
        env["SCCACHE_REDIS_PASSWORD"] = unquote(parts.password)
    return env


def check_directory_option(name, value):
    """ValueError naming ``name`` unless ``value`` (when given) is an absolute path that is not a file."""
    if value is None:
        return
    if not os.path.isabs(value):
        raise ValueError("%s: %r is not an absolute path; a relative one would depend on where the module runs"
                         % (name, value))
    if os.path.exists(value) and not os.path.isdir(value):
        raise ValueError("%s: %s exists and is not a directory" % (name, value))


def launcher_arguments(chain):
    """CMake arguments that put ``chain`` (programs, outermost first) in front of every CUDA, C++ and C compile.
    A project that adds ccache itself (sgl-kernel's RULE_LAUNCH_COMPILE) then runs ``ccache ccache nvcc``,
    which ccache reduces to one."""
    if not chain:
        return []
    joined = ";".join(chain)
    return ["-DCMAKE_%s_COMPILER_LAUNCHER=%s" % (language, joined) for language in ("CUDA", "CXX", "C")]


SCCACHE_WRAPPER = ('"$GPUFLEET_SCCACHE" --start-server >/dev/null 2>&1 || echo "gpufleet: sccache --start-server '
                   'failed" >&2; "$@"; rc=$?; "$GPUFLEET_SCCACHE" --show-stats --stats-format json '
                   '>"$GPUFLEET_SCCACHE_STATS" 2>/dev/null; "$GPUFLEET_SCCACHE" --stop-server >/dev/null 2>&1; exit $rc')


def sccache_command(command):
    """``command`` run between the build's own sccache server's start and stop, inside the confinement: the
    compilers are the server's children, so they are in the build's cgroup. The statistics land in the file
    ``GPUFLEET_SCCACHE_STATS`` names."""
    return ["/bin/sh", "-c", SCCACHE_WRAPPER, "gpufleet-sccache"] + list(command)


def parse_ccache_stats(text):
    """``ccache --print-stats`` (tab-separated, ccache >= 3.7) -> ``{counter: int}``."""
    counters = {}
    for line in (text or "").splitlines():
        parts = line.split("\t")
        if len(parts) == 2 and parts[1].strip().lstrip("-").isdigit():
            counters[parts[0].strip()] = int(parts[1].strip())
    return counters


def _delta(before, after, *names):
    return sum(max(0, after.get(name, 0) - before.get(name, 0)) for name in names)


def summary(kind, hits, misses, uncacheable=0, size_bytes=None, max_bytes=None, location=None, settings=None):
    compiles = hits + misses
    return {"kind": kind, "hits": hits, "misses": misses, "compiles": compiles, "uncacheable": uncacheable,
            "hit_rate": round(float(hits) / compiles, 3) if compiles else None,
            "size_bytes": size_bytes, "max_size_bytes": max_bytes, "location": location, "settings": settings or {}}


def ccache_summary(before, after, location=None, max_bytes=None, settings=None):
    """What this build did with the cache: the counters of ``--print-stats`` after minus before (the cache
    directory is shared over builds; its counters are not this build's alone)."""
    hits = _delta(before, after, "direct_cache_hit", "preprocessed_cache_hit",   # 4.5 and later
                  "cache_hit_direct", "cache_hit_preprocessed")                  # 4.0-4.4
    misses = _delta(before, after, "cache_miss")
    failed = _delta(before, after, "compile_failed", "unsupported_compiler_option", "unsupported_source_language",
                    "could_not_use_precompiled_header", "preprocessor_error", "internal_error")
    size = after.get("cache_size_kibibyte")
    return summary("ccache", hits, misses, failed, size * 1024 if size is not None else None, max_bytes, location,
                   settings)


def parse_sccache_stats(text, settings=None):
    """``sccache --show-stats --stats-format json`` -> the summary; whole compiles only (a CUDA compile's
    device, PTX and cubin steps are cached too and counted in ``steps``). ValueError when it is not that JSON."""
    try:
        data = json.loads(text)
        stats = data["stats"]
        hits = stats["cache_hits"]["counts"]
        misses = stats["cache_misses"]["counts"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError("not sccache's JSON statistics (%s)" % exc)
    top_hits = sum(count for name, count in hits.items() if name not in SCCACHE_SUBSTEPS)
    top_misses = sum(count for name, count in misses.items() if name not in SCCACHE_SUBSTEPS)
    result = summary("sccache", top_hits, top_misses, stats.get("non_cacheable_compilations", 0),
                     data.get("cache_size"), data.get("max_cache_size"), data.get("cache_location"), settings)
    result["steps"] = {"hits": sum(count for name, count in hits.items() if name in SCCACHE_SUBSTEPS),
                       "misses": sum(count for name, count in misses.items() if name in SCCACHE_SUBSTEPS)}
    result["errors"] = stats.get("cache_read_errors", 0) + stats.get("cache_write_errors", 0)
    return result


def describe(result):
    """One line for people: ``ccache: 40 of 42 compiles from the cache (95%), cache 1.2Gi``."""
    if not result or result.get("kind") in (None, "none"):
        return "no compiler cache"
    text = "%s: %d of %d compiles from the cache" % (result["kind"], result["hits"], result["compiles"])
    if result.get("hit_rate") is not None:
        text += " (%d%%)" % round(100 * result["hit_rate"])
    if result.get("size_bytes") is not None:
        text += ", cache %s" % human(result["size_bytes"])
        if result.get("max_size_bytes"):
            text += " of %s" % human(result["max_size_bytes"])
    return text


_LAUNCHER = re.compile(r"^-DCMAKE_(CUDA|CXX|C)_COMPILER_LAUNCHER(?::[A-Za-z]+)?=(.*)$")


def with_launcher(cmake_args, program):
    """``cmake_args`` (the ``CMAKE_ARGS`` string) with ``program`` last in the CUDA, C++ and C compiler launchers:
    a launcher already there (the memory-admission launcher) stays in front, ``[admission] + [cache]``;
    ``program`` None clears the launchers nobody set (a cache left in a reused build dir's CMakeCache.txt).
    The CMake arguments are split and joined as the shell would."""
    words = shlex.split(cmake_args or "")
    last = {}
    for index, word in enumerate(words):
        match = _LAUNCHER.match(word)
        if match:
            last[match.group(1)] = index
    for language in ("CUDA", "CXX", "C"):
        if language in last:
            if program is None:
                continue
            index = last[language]
            value = _LAUNCHER.match(words[index]).group(2)
            chain = [part for part in value.split(";") if part]
            if not chain or os.path.basename(chain[-1]) != os.path.basename(program):
                chain.append(program)
            words[index] = "-DCMAKE_%s_COMPILER_LAUNCHER=%s" % (language, ";".join(chain))
        else:
            words.append("-DCMAKE_%s_COMPILER_LAUNCHER=%s" % (language, program or ""))
    return " ".join(shlex.quote(word) for word in words)


class BuildCache(object):
    """The compiler cache of one build. ``params``: guarded_build's options; ``run(argv, timeout, env) ->
    (rc, out, err)``; ``find(name, env) -> path or None``. ``prepare`` changes the build's environment,
    ``command`` wraps the build for sccache, ``begin``/``finish`` read the statistics."""

    SECRET_NAMES = ("SCCACHE_REDIS_PASSWORD", "SCCACHE_REDIS_USERNAME")

    def __init__(self, params, source_dir, build_dir, run, find):
        self.params = params
        self.source_dir = source_dir
        self.build_dir = build_dir
        self.run = run
        self.find = find
        self.kind = "none"
        self.path = None
        self.version = None
        self.notes = []
        self.warnings = []
        self.env = None
        self.settings = {}
        self.before = {}
        self.max_bytes = None
        self.stats_path = os.path.join(build_dir, "gpufleet-sccache-stats.json")

    def _version(self, kind, path, env):
        rc, out, err = self.run([path, "--version"], 30, env)
        return check_version(kind, path, out if rc == 0 else (out or err))

    def prepare(self, env, max_bytes=None):
        """Decide and set up; ``env`` (the build's) is changed in place. ValueError with the message to fail on."""
        params = self.params
        requested, legacy = params.get("compiler_cache"), params.get("ccache_dir")
        cache_dir, redis = params.get("compiler_cache_dir"), params.get("compiler_cache_redis")
        self.env, self.max_bytes = env, max_bytes
        check_directory_option("compiler_cache_dir", cache_dir)
        if redis:
            redis_variables(redis)  # refused now, whatever the cache turns out to be
        if requested is None and (cache_dir or redis):
            requested = "auto"  # where to cache was given: the cache is asked for
        if requested is None:  # as before this option: ccache when ccache_dir (or CCACHE_DIR) asks for it
            requested = "ccache" if (legacy or env.get("CCACHE_DIR")) and self.find("ccache", env) else "none"
            if requested == "none":
                return self
            self.notes.append("CCACHE_DIR is set: the build may go through ccache, so ccache runs in depend mode")
            explicit = False
        else:
            explicit = True
        if legacy and requested == "sccache":
            raise ValueError("ccache_dir is ccache's directory; with compiler_cache=sccache use compiler_cache_dir")
        if redis and requested == "ccache":
            raise ValueError("compiler_cache_redis is for compiler_cache=sccache (or auto)")
        found = dict((name, self.find(name, env)) for name in ("ccache", "sccache"))
        self.kind, note = choose(requested, found, redis=bool(redis))
        if note:
            self.notes.append(note)
        if self.kind == "none":
            if explicit:  # nothing of a cache: not sgl-kernel's own ccache, not a launcher left in CMakeCache.txt
                env.pop("CCACHE_DIR", None)
                env["CCACHE_DISABLE"] = "1"
                env["CMAKE_ARGS"] = with_launcher(env.get("CMAKE_ARGS"), None)
            return self
        self.path = found[self.kind]
        self.version = self._version(self.kind, self.path, env)
        directory = cache_dir or (legacy if self.kind == "ccache" else None)
        socket = server_socket(self.build_dir) if self.kind == "sccache" else None
        self.settings = environment(self.kind, directory, self.source_dir, max_bytes, redis, socket)
        if self.kind == "sccache":
            env.pop("CCACHE_DIR", None)  # sgl-kernel would add ccache in front of sccache
            env["GPUFLEET_SCCACHE"] = self.path
            env["GPUFLEET_SCCACHE_STATS"] = self.stats_path
        env.update(self.settings)
        self._check_store(env)
        env["CMAKE_ARGS"] = with_launcher(env.get("CMAKE_ARGS"), self.path)
        return self

    def _check_store(self, env):
        """The cache directory the compiles will use (ours, or CCACHE_DIR from the environment) is the build user's
        and writable by nobody else (issue 28 item 8); a Redis store cannot be checked from here (README)."""
        directory = env.get("SCCACHE_DIR" if self.kind == "sccache" else "CCACHE_DIR")
        if not directory or (self.kind == "sccache" and env.get("SCCACHE_REDIS_ENDPOINT")):
            return
        policy = self.params.get("compiler_cache_dir_policy") or "refuse"
        if policy not in POLICIES:
            raise ValueError("compiler_cache_dir_policy: expected one of %s, got %r" % (", ".join(POLICIES), policy))
        warning = check_cache_directory(directory, policy)
        if warning:
            self.warnings.append(warning)
            self.notes.append(warning)

    def command(self, command):
        return sccache_command(command) if self.kind == "sccache" else list(command)

    def shown_settings(self):
        """The settings for the result, a redis URL (it may hold a password) masked."""
        return dict((key, "********" if key in self.SECRET_NAMES else value)
                    for key, value in self.settings.items())

    def begin(self):
        """Before the first attempt: ccache's counters (the cache directory outlives this build)."""
        if self.kind == "ccache":
            rc, out, dummy = self.run([self.path, "--print-stats"], 60, self.env)
            self.before = parse_ccache_stats(out) if rc == 0 else {}
        elif self.kind == "sccache":
            try:
                os.unlink(self.stats_path)
            except OSError:
                pass

    def plan(self):
        """What the build goes through: kind, program, version, the settings made and notes."""
        return {"kind": self.kind, "path": self.path, "version": dotted(self.version) if self.version else None,
                "notes": list(self.notes), "settings": self.shown_settings(), "summary": "%s, not run yet" % self.kind}

    def finish(self):
        """After the attempts: the result's ``compiler_cache`` (kind, version, settings, hits, size)."""
        result = self.plan()
        if self.kind == "ccache":
            rc, out, err = self.run([self.path, "--print-stats"], 60, self.env)
            if rc == 0:
                result.update(ccache_summary(self.before, parse_ccache_stats(out), self.env.get("CCACHE_DIR"),
                                             self.max_bytes, result["settings"]))
            else:
                result["notes"].append("ccache --print-stats failed: %s" % (err or out).strip()[:200])
        elif self.kind == "sccache":
            # a killed attempt leaves its server (sccache detaches it): stop it, then take the last attempt's numbers
            self.run([self.path, "--stop-server"], 60, self.env)
            socket = self.settings.get("SCCACHE_SERVER_UDS")
            if socket and os.path.exists(socket):
                try:
                    os.unlink(socket)
                except OSError:
                    pass
            try:
                with open(self.stats_path) as handle:
                    result.update(parse_sccache_stats(handle.read(), result["settings"]))
                if self.settings.get("SCCACHE_REDIS_ENDPOINT"):  # sccache names the store: never its credentials
                    result["location"] = "redis %s" % self.settings["SCCACHE_REDIS_ENDPOINT"]
            except (IOError, OSError, ValueError) as exc:
                result["notes"].append("no sccache statistics from the last attempt (%s)" % exc)
        result["summary"] = describe(result)
        return result
