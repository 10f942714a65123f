# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# GENERATED from plugins/module_utils/_build/_build_option_table.py by tests/tools/gen_build_options.py: edit there.

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    """guarded_build's options (the module's argument spec comes from the same table)."""

    DOCUMENTATION = r"""
options:
  state:
    description:
      - C(present) runs the build (nothing runs when it is up to date).
      - C(stopped) stops the build running in O(chdir)/O(build_dir) through its owner - the module run that holds
        its lock (module pid verified by its start time) gets SIGTERM, ends the build and everything it started, removes
        its cgroup, releases the lock and marks the status C(stopped) - and waits up to O(stop_timeout) seconds for
        that; C(changed) when something was stopped, C(ok) when nothing was running. A status left C(running) by a
        run whose module died is marked C(stopped) and its leftover processes ended. Only O(chdir), O(build_dir),
        O(status_path) and O(stop_timeout) are read.
      - SIGTERM or SIGINT to a running module does the same as C(stopped) (the task then fails saying C(stopped)).
    type: str
    choices: [present, stopped]
    default: present
  run_id:
    description:
      - The run's id, written into the status file (top-level C(run_id)) and returned, so a watcher follows this run
        and never a previous run's status. Up to 128 letters, digits and C(_.:@+-).
      - Generated (time, pid, random bits) when omitted.
    type: str
  stop_timeout:
    description:
      - With O(state=stopped), seconds to wait for the running build to stop (1 to 3600).
    type: int
    default: 120
  argv:
    description:
      - The build command as a list; the first element is looked up on the build environment's C(PATH) before anything
        runs.
      - With O(state=present), exactly one of O(argv) and O(cmd) is required.
    type: list
    elements: str
  cmd:
    description:
      - The build command as one shell string, run with C(/bin/sh -c).
      - Its first word is looked up on C(PATH) before anything runs unless it is a shell construct.
    type: str
  chdir:
    description:
      - Directory to run the build in.
    type: path
    required: true
  source:
    description:
      - The source tree whose revision goes into the stamp (C(git rev-parse HEAD) in a git work tree, else a hash
        of the files' sizes and modification times). Defaults to O(chdir).
    type: path
  source_ignore:
    description:
      - Top-level names or paths relative to O(source) left out of the source hash (build outputs). They match from
        the top only - a source folder C(csrc/build) is hashed although C(build) is listed.
    type: list
    elements: str
    default: [.git, build, dist, __pycache__, _skbuild, .eggs]
  build_dir:
    description:
      - The build directory the command uses (absolute, or relative to O(chdir)); it holds the lock, the stamp and
        by default the log and status files. A resumed build must reuse it, so give the build tool a persistent build
        directory (for scikit-build-core C(-Cbuild-dir=build)).
    type: path
    default: build
  name:
    description:
      - A short name for the build, used in the cgroup's name. Defaults to the base name of O(chdir).
    type: str
  jobs:
    description:
      - Parallel jobs to start with (1 to 4096). Planned from the node's memory and CPUs when omitted.
    type: int
  nvcc_threads:
    description:
      - nvcc threads per compile job (C(SGL_KERNEL_COMPILE_THREADS), C(NVCC_THREADS)).
    type: int
    default: 1
  threads_variable:
    description:
      - The CMake cache variable that carries O(nvcc_threads) in C(CMAKE_ARGS); empty to pass none.
    type: str
    default: SGL_KERNEL_COMPILE_THREADS
  memory_limit:
    description:
      - The build cgroup's memory limit (bytes or a size like C(400GiB)); usually the C(budget_bytes) of P(gpufleet.preflight.build_jobs#filter).
        Planned as effective available minus O(reserve) when omitted.
      - Must hold at least one job (O(nvcc_threads) x O(memory_per_thread)) and not exceed the node's memory (a cgroup
        that large would not protect the node). Sizes are in binary units (C(64GiB), C(64G), powers of 1024) or bytes;
        C(64GB) is refused as ambiguous.
    type: str
  memory_per_thread:
    description:
      - Memory one concurrent nvcc thread takes, for planning and the one-job check; more than 0.
    type: str
    default: 5GiB
  reserve:
    description:
      - Memory kept free when planning, and the watchdog's floor (C(confinement=watchdog) stops the build when less
        is free); defaults to the larger of 8 GiB and 10% of the effective total.
    type: str
  min_jobs:
    description:
      - Fewest jobs when planning (1 to 4096).
    type: int
    default: 1
  max_jobs:
    description:
      - Most jobs when planning (1 to 4096).
    type: int
  cpus:
    description:
      - Usable CPUs for planning (at least 1); read from affinity and the cgroup CPU quota when omitted.
    type: int
  memory_facts:
    description:
      - The node's C(gpufleet_memory) facts for planning; read from C(/proc/meminfo) and the cgroup when omitted.
    type: dict
  max_attempts:
    description:
      - Attempts in all (1 to 64), the first included; each OOM kill halves the jobs for the next.
    type: int
    default: 4
  cmake_args:
    description:
      - C(CMAKE_ARGS) for the build; C(-D<threads_variable>=<nvcc_threads>) is appended.
    type: str
  cmake_policy_version_minimum:
    description:
      - C(CMAKE_POLICY_VERSION_MINIMUM), e.g. C(3.5) for third-party projects CMake 4 refuses.
    type: str
  ccache_dir:
    description:
      - C(CCACHE_DIR); sgl-kernel uses ccache only when it is found and this is set. With O(compiler_cache) omitted,
        a C(ccache_dir) (or a C(CCACHE_DIR) in the environment) and a ccache on the PATH mean O(compiler_cache=ccache),
        so that ccache runs in depend mode. Prefer O(compiler_cache) and O(compiler_cache_dir).
    type: path
  admission:
    description:
      - Memory admission for any CMake project - the collection's compile scheduler (the launcher the sgl_kernel role
        uses) before every CUDA, C++ and C compile, through C(CMAKE_<LANG>_COMPILER_LAUNCHER) in the environment and
        in C(CMAKE_ARGS); a compiler cache's launcher runs after it. Run the build wide (a large O(jobs)) - the launcher
        starts the longest learned compile that fits the build cgroup's memory, within the CPUs.
      - The launcher's settings (see the P(gpufleet.preflight.admission_config#filter) filter), for example C(default_bytes)
        (a source never seen) and C(seed_peaks) (other nodes' peaks files); an empty dict takes its defaults. Unknown
        keys and decimal sizes (V(64GB)) are refused naming them. C(state_dir) defaults to C(<build_dir>/gpufleet-admission),
        C(peaks_path) to C(~/.cache/gpufleet/admission/peaks.json), C(root) to O(chdir).
      - nvcc threads per source - an nvcc compile with more than one C(-gencode) gets the C(--threads) (its own value
        replaced, or one added) that its learned peaks per thread count, the free memory and the free CPUs allow,
        the longest compiles first; the threads count against the CPUs; a source never seen runs at one thread until
        its peak is known. C(threads_per_source) (default V(true)) turns it off, C(max_threads) caps it (default -
        the compile's C(-gencode) count, at most the CPUs). A compile with one C(-gencode) keeps its command line.
      - Omitted - no admission.
    type: dict
  admission_config:
    description:
      - 'The settings file (C(config.json)) of an admission launcher the build already goes through - the sgl_kernel
        role puts its own in the CMake arguments -, read, never written, as that launcher reads it: the ETA weighs
        the sources by the times its peaks and census know from the first minute of a cold build (a version without
        a census of its own by the times of its other versions), the status file counts the compiles its ledger holds,
        a source it knows cannot fit the build''s memory is refused before each attempt, and what an OOM taught it
        is reported per attempt.'
      - Omitted - only O(admission) is read. Not with O(admission).
    type: path
  compiler_cache:
    description:
      - The compiler cache every CUDA, C++ and C compile goes through (C(-DCMAKE_<LANG>_COMPILER_LAUNCHER) appended
        to C(CMAKE_ARGS), after a launcher already there).
      - C(ccache) - 4.0 or newer (older ones are refused), always with C(CCACHE_DEPEND=1) (its default mode hashes
        C(nvcc -E), which sees one architecture only, and returns OLD objects after host-only or C(__CUDA_ARCH__)-specific
        edits), C(CCACHE_BASEDIR) (the source and build directories' common parent), C(CCACHE_NOHASHDIR=true) and
        C(CCACHE_COMPILERCHECK=content); RV(compiler_cache) lists them under C(settings).
      - C(sccache) - 0.10 or newer; a server of the build's own (a socket per build directory) started inside the
        confinement and stopped after each attempt; the shared store of a fleet is O(compiler_cache_redis) or a shared
        O(compiler_cache_dir).
      - C(auto) - sccache when O(compiler_cache_redis) is set, else ccache, else sccache, else none (noted).
      - C(none) - no cache; C(CCACHE_DIR) is removed, C(CCACHE_DISABLE=1) set and launchers left in a reused build
        directory's CMake cache cleared.
      - Omitted - C(auto) when O(compiler_cache_dir) or O(compiler_cache_redis) is set, else as before this option
        (see O(ccache_dir)).
    type: str
    choices: [auto, ccache, sccache, none]
  compiler_cache_dir:
    description:
      - The cache's directory (C(CCACHE_DIR) / C(SCCACHE_DIR)); the tool's default when omitted.
    type: path
  compiler_cache_dir_policy:
    description:
      - What a cache directory (O(compiler_cache_dir), O(ccache_dir) or C(CCACHE_DIR)) owned by another user, writable
        by its group or everyone, under a directory others may rename it in, or holding another user's entries does
        - C(refuse) fails the build naming what to fix, C(warn) builds with it and warns. Whoever can write the cache
        can replace any object it hands to the build (code in every wheel).
    type: str
    choices: [refuse, warn]
    default: refuse
  compiler_cache_max_size:
    description:
      - The cache's size bound (C(CCACHE_MAXSIZE) / C(SCCACHE_CACHE_SIZE)), binary units (C(20GiB)).
    type: str
  compiler_cache_redis:
    description:
      - The sccache Redis store shared by the fleet, C(redis://[user[:password]@]host[:port][/db]). The password reaches
        sccache through C(SCCACHE_REDIS_PASSWORD) only (never a command line) and shows as C(********).
    type: str
  cuda_arch_list:
    description:
      - C(TORCH_CUDA_ARCH_LIST), e.g. C(12.0a) for Blackwell SM120.
    type: str
  environment:
    description:
      - More environment variables for the build (a C(CMAKE_ARGS) here joins O(cmake_args)).
      - Their values may be secrets (index tokens) - they are never written to the stamp (a hash of them only) nor
        returned (RV(env) shows C(********)), and the option is C(no_log), so Ansible also masks each value wherever
        it appears in the result and its log (a path set here reads C(********) in messages too).
    type: dict
    default: {}
  artifacts:
    description:
      - Globs relative to O(chdir) of what the build produces (C(dist/*.whl)); returned, and needed for a build to
        count as up to date.
    type: list
    elements: str
    default: []
  log_path:
    description:
      - The build log (appended, one header per attempt). Defaults to C(<build_dir>/gpufleet-build.log).
    type: path
  status_path:
    description:
      - The JSON status file. Defaults to C(<build_dir>/gpufleet-build.status.json).
    type: path
  status_interval:
    description:
      - Seconds between status file updates (0.05 to 3600).
    type: float
    default: 2
  confinement:
    description:
      - How the build is kept from taking the node down with it.
      - C(systemd) - a transient scope per attempt, C(systemd-run --scope --collect -p MemoryMax=<limit> -p MemorySwapMax=0)
        (with C(-p OOMPolicy=continue) from systemd 253); needs PID 1 systemd and root.
      - C(cgroupfs) - a child memory cgroup of the module's own (cgroup v1), or on cgroup v2 of the module's cgroup's
        parent when that one holds no processes of its own (a delegated cgroup); processes the module did not start
        are never moved.
      - C(watchdog) - no cgroup; the memory that limits the node (the tightest cgroup limit over the module's own
        cgroup and its ancestors minus usage less page cache, else C(MemAvailable)) is watched every 50 ms and the
        build's own process group (it runs in its own session) is killed when less than O(reserve) is left; that counts
        as an OOM, and the build resumes with half the jobs.
      - C(none) - unconfined; OOM detection rests on exit status 137 and the kernel log.
      - C(auto) - the first of C(systemd), C(cgroupfs), C(watchdog) that is possible here.
    type: str
    choices: [auto, systemd, cgroupfs, watchdog, none]
    default: auto
  confine:
    description:
      - Deprecated, use O(confinement). C(false) means O(confinement=none); C(true) leaves O(confinement) as set.
    type: bool
  force:
    description:
      - Build even when the stamp says the build is up to date.
    type: bool
    default: false
  timeout:
    description:
      - Seconds the whole build may take before it is stopped (at least 1); unlimited when omitted.
    type: int
  tail_lines:
    description:
      - Lines of the log returned on failure (0 to 100000).
    type: int
    default: 40
"""
