# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_compiler_cache: versions, choices, environments, launchers and statistics from tables (the real ccache,
sccache and nvcc are in tests/build/test_compiler_cache.py)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import shlex

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._build._compiler_cache import (
    BuildCache,
    ccache_summary,
    check_version,
    choose,
    describe,
    environment,
    parse_ccache_stats,
    parse_sccache_stats,
    parse_version,
    redis_variables,
    sccache_command,
    server_socket,
    with_launcher,
)
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._cache_safety import unsafe_cache_reason


@pytest.mark.parametrize("text, version", [
    ("ccache version 4.7.5\nFeatures: file-storage http-storage redis-storage\n", (4, 7, 5)),
    ("\nccache version 4.10\n", (4, 10)),
    ("sccache 0.16.0\n", (0, 16, 0)),
    ("sccache 0.10.0-beta\n", (0, 10, 0)),
    ("ccache version unknown", None),
    ("", None),
    (None, None),
])
def test_parse_version(text, version):
    assert parse_version(text) == version


@pytest.mark.parametrize("kind, output, message", [
    ("ccache", "ccache version 4.0\n", None),
    ("ccache", "ccache version 4.14.2\n", None),
    ("ccache", "ccache version 3.7.12\n", "3.7.12 at /x is too old: ccache 4.0 or newer is needed"),
    ("ccache", "ccache version 3.6\n", "ccache 4.0 or newer"),
    ("sccache", "sccache 0.10.0\n", None),
    ("sccache", "sccache 0.9.1\n", "0.9.1 at /x is too old: sccache 0.10.0 or newer is needed"),
    ("sccache", "garbage", "cannot read a version from '/x --version'"),
])
def test_check_version_names_the_version_needed(kind, output, message):
    if message is None:
        assert check_version(kind, "/x", output)
    else:
        with pytest.raises(ValueError, match="compiler_cache=%s: .*" % kind) as info:
            check_version(kind, "/x", output)
        assert message in str(info.value)


BOTH = {"ccache": "/usr/bin/ccache", "sccache": "/v/bin/sccache"}


@pytest.mark.parametrize("requested, found, redis, kind, note", [
    ("none", BOTH, False, "none", None),
    ("ccache", BOTH, False, "ccache", None),
    ("sccache", BOTH, False, "sccache", None),
    ("auto", BOTH, False, "ccache", None),
    ("auto", BOTH, True, "sccache", None),
    ("auto", {"sccache": "/s"}, False, "sccache", None),
    ("auto", {"ccache": "/c"}, True, "ccache", None),
    ("auto", {}, False, "none", "neither ccache nor sccache"),
])
def test_choose(requested, found, redis, kind, note):
    chosen, why = choose(requested, found, redis)
    assert chosen == kind
    assert (note is None and why is None) or note in why


@pytest.mark.parametrize("requested", ["ccache", "sccache"])
def test_choose_refuses_a_missing_tool(requested):
    with pytest.raises(ValueError, match="compiler_cache=%s: %s was not found" % (requested, requested)):
        choose(requested, {}, False)


def test_ccache_environment_is_always_depend_mode():
    env = environment("ccache", "/var/cache/c", "/srv/src", 20 << 30)
    assert env == {"CCACHE_DEPEND": "1", "CCACHE_NOHASHDIR": "true", "CCACHE_COMPILERCHECK": "content",
                   "CCACHE_BASEDIR": "/srv/src", "CCACHE_DIR": "/var/cache/c", "CCACHE_MAXSIZE": "20971520Ki"}
    # without a directory or a bound the settings that keep it correct are still there
    assert environment("ccache")["CCACHE_DEPEND"] == "1"


def test_sccache_environment():
    env = environment("sccache", "/shared/sccache", "/srv/src", 1 << 30, "redis://:pw@127.0.0.1:6380/2", "/tmp/s.sock")
    assert env == {"SCCACHE_IDLE_TIMEOUT": "0", "SCCACHE_SERVER_UDS": "/tmp/s.sock", "SCCACHE_DIR": "/shared/sccache",
                   "SCCACHE_CACHE_SIZE": str(1 << 30), "SCCACHE_REDIS_ENDPOINT": "tcp://127.0.0.1:6380",
                   "SCCACHE_REDIS_DB": "2", "SCCACHE_REDIS_PASSWORD": "pw", "SCCACHE_BASEDIRS": "/srv/src"}
    assert environment("none", "/x", "/y", 1, "redis://h") == {}


@pytest.mark.parametrize("url, expected", [
    ("redis://127.0.0.1:6379", {"SCCACHE_REDIS_ENDPOINT": "tcp://127.0.0.1:6379"}),
    ("redis://cache.example", {"SCCACHE_REDIS_ENDPOINT": "tcp://cache.example:6379"}),
    ("redis://u:p%40ss@h:1/0", {"SCCACHE_REDIS_ENDPOINT": "tcp://h:1", "SCCACHE_REDIS_DB": "0",
                                "SCCACHE_REDIS_USERNAME": "u", "SCCACHE_REDIS_PASSWORD": "p@ss"}),
    ("rediss://[::1]:7000", {"SCCACHE_REDIS_ENDPOINT": "rediss://[::1]:7000"}),
])
def test_redis_variables(url, expected):
    assert redis_variables(url) == expected


@pytest.mark.parametrize("url, message", [
    ("http://h:1", "expected redis://"),
    ("127.0.0.1:6379", "expected redis://"),
    ("redis://h:1/db", "must be a number"),
    ("redis://h:99999", "not a redis:// URL"),
    ("redis://h?x=1", "expected redis://"),
])
def test_redis_variables_refuses(url, message):
    with pytest.raises(ValueError, match="compiler_cache_redis") as info:
        redis_variables(url)
    assert message in str(info.value)


def test_server_socket_is_short_and_per_build_dir():
    one, two = server_socket("/srv/" + "x" * 300 + "/build", "/tmp"), server_socket("/srv/other/build", "/tmp")
    assert one != two and len(one) < 108 and one.startswith("/tmp/gpufleet-sccache-")
    assert server_socket("/srv/other/build", "/tmp") == two


@pytest.mark.parametrize("cmake_args, program, expected", [
    (None, "/usr/bin/ccache", ["-DCMAKE_CUDA_COMPILER_LAUNCHER=/usr/bin/ccache",
                               "-DCMAKE_CXX_COMPILER_LAUNCHER=/usr/bin/ccache",
                               "-DCMAKE_C_COMPILER_LAUNCHER=/usr/bin/ccache"]),
    # the memory-admission launcher stays in front: [admission] + [cache]
    ("-DX=1 '-DCMAKE_CUDA_COMPILER_LAUNCHER=/v/python;/b/admit.py;--config=/b/c.json' "
     "-DCMAKE_CXX_COMPILER_LAUNCHER:STRING=/v/python;/b/admit.py", "/s/sccache",
     ["-DX=1", "-DCMAKE_CUDA_COMPILER_LAUNCHER=/v/python;/b/admit.py;--config=/b/c.json;/s/sccache",
      "-DCMAKE_CXX_COMPILER_LAUNCHER=/v/python;/b/admit.py;/s/sccache", "-DCMAKE_C_COMPILER_LAUNCHER=/s/sccache"]),
    # a cache already last is not added twice
    ("-DCMAKE_CUDA_COMPILER_LAUNCHER=ccache", "/usr/bin/ccache",
     ["-DCMAKE_CUDA_COMPILER_LAUNCHER=ccache", "-DCMAKE_CXX_COMPILER_LAUNCHER=/usr/bin/ccache",
      "-DCMAKE_C_COMPILER_LAUNCHER=/usr/bin/ccache"]),
    # none: launchers nobody set are cleared (a reused CMakeCache.txt), one that is set is left
    ("-DCMAKE_CUDA_COMPILER_LAUNCHER=/b/admit", None,
     ["-DCMAKE_CUDA_COMPILER_LAUNCHER=/b/admit", "-DCMAKE_CXX_COMPILER_LAUNCHER=", "-DCMAKE_C_COMPILER_LAUNCHER="]),
])
def test_with_launcher(cmake_args, program, expected):
    assert shlex.split(with_launcher(cmake_args, program)) == expected


def test_sccache_command_wraps_the_build_between_start_and_stop():
    argv = sccache_command(["cmake", "--build", "b"])
    assert argv[:2] == ["/bin/sh", "-c"] and argv[-3:] == ["cmake", "--build", "b"]
    assert "--start-server" in argv[2] and "--stop-server" in argv[2] and "exit $rc" in argv[2]


CCACHE_BEFORE = "cache_miss\t10\ndirect_cache_hit\t5\npreprocessed_cache_hit\t1\ncache_size_kibibyte\t100\n"
CCACHE_AFTER = ("cache_miss\t12\ndirect_cache_hit\t45\npreprocessed_cache_hit\t1\ncache_size_kibibyte\t2048\n"
                "compile_failed\t1\nstats_zeroed_timestamp\t0\nnot a counter\n")


def test_ccache_summary_is_this_builds_share():
    result = ccache_summary(parse_ccache_stats(CCACHE_BEFORE), parse_ccache_stats(CCACHE_AFTER), "/c", 1 << 30)
    assert (result["hits"], result["misses"], result["compiles"], result["uncacheable"]) == (40, 2, 42, 1)
    assert result["hit_rate"] == 0.952 and result["size_bytes"] == 2048 * 1024 and result["max_size_bytes"] == 1 << 30
    assert describe(result) == "ccache: 40 of 42 compiles from the cache (95%), cache 2.0Mi of 1.0Gi"


def test_ccache_summary_of_old_counter_names_and_zeroed_stats():
    before = {"cache_hit_direct": 3, "cache_miss": 9}
    after = {"cache_hit_direct": 1, "cache_hit_preprocessed": 2, "cache_miss": 1}  # zeroed in between: never negative
    result = ccache_summary(before, after)
    assert (result["hits"], result["misses"]) == (2, 0) and result["size_bytes"] is None


SCCACHE_JSON = json.dumps({
    "stats": {"compile_requests": 3, "cache_hits": {"counts": {"CUDA": 1, "PTX": 2, "CUBIN": 2, "C/C++": 1}},
              "cache_misses": {"counts": {"CUDA": 1, "CUDA (Device code)": 1}}, "non_cacheable_compilations": 2,
              "cache_read_errors": 0, "cache_write_errors": 1},
    "cache_location": "Local disk: \"/c\"", "cache_size": 524677, "max_cache_size": 1000000000})


def test_parse_sccache_stats_counts_whole_compiles():
    result = parse_sccache_stats(SCCACHE_JSON)
    assert (result["hits"], result["misses"], result["compiles"]) == (2, 1, 3)
    assert result["steps"] == {"hits": 4, "misses": 1} and result["errors"] == 1
    assert result["size_bytes"] == 524677 and result["hit_rate"] == 0.667


@pytest.mark.parametrize("text", ["", "{}", "[1]", "not json"])
def test_parse_sccache_stats_refuses_other_text(text):
    with pytest.raises(ValueError, match="not sccache's JSON statistics"):
        parse_sccache_stats(text)


def test_describe_without_a_cache():
    assert describe(None) == "no compiler cache" == describe({"kind": "none"})


class Tools(object):
    """``find`` and ``run`` for BuildCache: the programs present and the version each prints."""

    def __init__(self, versions):
        self.versions = versions
        self.calls = []

    def find(self, name, env):
        return "/bin/%s" % name if name in self.versions else None

    def run(self, argv, timeout, env=None):
        self.calls.append(argv)
        name = argv[0].rsplit("/", 1)[-1]
        if argv[1] == "--version":
            return 0, self.versions[name], ""
        return 0, CCACHE_AFTER if name == "ccache" else "", ""


def params(**changes):
    values = dict(compiler_cache=None, ccache_dir=None, compiler_cache_dir=None, compiler_cache_redis=None)
    values.update(changes)
    return values


NEW = {"ccache": "ccache version 4.7.5", "sccache": "sccache 0.16.0"}


def prepared(values, env=None, versions=None):
    tools = Tools(versions or NEW)
    env = dict(env or {})
    cache = BuildCache(values, "/src", "/src/build", tools.run, tools.find).prepare(env, 1 << 30)
    return cache, env, tools


def test_omitted_means_as_before_unless_ccache_dir_asks_for_ccache():
    cache, env, tools = prepared(params())
    assert cache.kind == "none" and env == {} and not tools.calls
    cache, env, dummy = prepared(params(ccache_dir="/c"))
    assert cache.kind == "ccache" and env["CCACHE_DEPEND"] == "1" and env["CCACHE_DIR"] == "/c"
    # a CCACHE_DIR in the environment (sgl-kernel's CMakeLists then adds ccache itself) is made safe too
    cache, env, dummy = prepared(params(), {"CCACHE_DIR": "/e"})
    assert cache.kind == "ccache" and env["CCACHE_DEPEND"] == "1" and env["CCACHE_DIR"] == "/e"
    assert "depend mode" in cache.notes[0]


def test_old_ccache_is_refused_whenever_the_build_would_use_it():
    for values, env in ((params(compiler_cache="ccache"), {}), (params(ccache_dir="/c"), {}), (params(), {"CCACHE_DIR": "/e"})):
        with pytest.raises(ValueError, match="3.7.12 at /bin/ccache is too old: ccache 4.0 or newer is needed"):
            prepared(values, env, {"ccache": "ccache version 3.7.12"})


def test_explicit_none_removes_every_way_into_a_cache():
    cache, env, dummy = prepared(params(compiler_cache="none"), {"CCACHE_DIR": "/e", "CMAKE_ARGS": "-DX=1"})
    assert cache.kind == "none" and "CCACHE_DIR" not in env and env["CCACHE_DISABLE"] == "1"
    assert shlex.split(env["CMAKE_ARGS"])[1] == "-DCMAKE_CUDA_COMPILER_LAUNCHER="


def test_sccache_hides_the_redis_password_and_drops_ccache_dir():
    cache, env, dummy = prepared(params(compiler_cache="auto", compiler_cache_redis="redis://:pw@127.0.0.1:7000"),
                                 {"CCACHE_DIR": "/e"})
    assert cache.kind == "sccache" and env["SCCACHE_REDIS_PASSWORD"] == "pw" and "CCACHE_DIR" not in env
    assert cache.plan()["settings"]["SCCACHE_REDIS_PASSWORD"] == "********"
    assert "pw" not in json.dumps(cache.plan())
    assert cache.command(["ninja"])[0] == "/bin/sh" and env["GPUFLEET_SCCACHE"] == "/bin/sccache"


@pytest.mark.parametrize("values, message", [
    (params(compiler_cache="sccache", ccache_dir="/c"), "ccache_dir is ccache's directory"),
    (params(compiler_cache="ccache", compiler_cache_redis="redis://h"), "compiler_cache_redis is for"),
])
def test_contradictions_are_refused(values, message):
    with pytest.raises(ValueError, match=message):
        prepared(values)


def test_ccache_finish_reports_this_build():
    cache, env, tools = prepared(params(compiler_cache="ccache", compiler_cache_dir="/c"))
    cache.begin()
    cache.before = parse_ccache_stats(CCACHE_BEFORE)
    result = cache.finish()
    assert result["kind"] == "ccache" and result["version"] == "4.7.5" and result["hits"] == 40
    assert result["settings"]["CCACHE_BASEDIR"] == "/src" and result["summary"].startswith("ccache: 40 of 42")


def test_where_to_cache_given_means_auto():
    cache, env, dummy = prepared(params(compiler_cache_dir="/c"))
    assert cache.kind == "ccache" and env["CCACHE_DIR"] == "/c"
    cache, env, dummy = prepared(params(compiler_cache_redis="redis://127.0.0.1:7000"))
    assert cache.kind == "sccache"


@pytest.mark.parametrize("values, message", [
    (params(compiler_cache_dir="relative/c"), "compiler_cache_dir: 'relative/c' is not an absolute path"),
    (params(compiler_cache="none", compiler_cache_dir="/etc/passwd"), "compiler_cache_dir: /etc/passwd exists and is not"),
    (params(compiler_cache="none", compiler_cache_redis="http://h"), "compiler_cache_redis: expected redis://"),
])
def test_bad_options_refused_whatever_the_cache(values, message):
    with pytest.raises(ValueError, match=message):
        prepared(values)


ROOT_LEVELS = [("/var", 0, 0o40755), ("/", 0, 0o40755)]


@pytest.mark.parametrize("cache, above, entries, words", [
    (("/var/cache/cc", 0, 0o40755), ROOT_LEVELS, [], None),
    (None, [("/tmp", 0, 0o41777), ("/", 0, 0o40755)], [], None),  # made by the cache under a sticky /tmp
    (("/var/cache/cc", 1000, 0o40700), ROOT_LEVELS, [], "owned by uid 1000, not by the build's user (uid 0)"),
    (("/var/cache/cc", 0, 0o40777), ROOT_LEVELS, [], "writable by everyone (mode 0777)"),
    (("/var/cache/cc", 0, 0o41777), ROOT_LEVELS, [], "writable by everyone (mode 1777)"),  # sticky: no help here
    (("/var/cache/cc", 0, 0o40770), ROOT_LEVELS, [], "writable by its group (mode 0770)"),
    (("/srv/c", 0, 0o40755), [("/srv", 0, 0o40777), ("/", 0, 0o40755)], [], "/srv, above the cache, is writable by "
     "everyone without the sticky bit"),
    (("/home/u/c", 0, 0o40755), [("/home/u", 1000, 0o40755), ("/", 0, 0o40755)], [], "owned by uid 1000: that user"),
    (("/var/cache/cc", 0, 0o40755), ROOT_LEVELS, [("/var/cache/cc/a", 65534)], "holds /var/cache/cc/a, owned by uid"),
])
def test_unsafe_cache_reason(cache, above, entries, words):
    why = unsafe_cache_reason(cache, above, entries, 0)
    assert (why is None) if words is None else (words in why), why
