# gpufleet.preflight: build a CUDA project for the fleet's GPU architectures only.
#
# Loaded with -DCMAKE_PROJECT_INCLUDE=<this file>: CMake runs it after every project() call (the top
# project and sub-projects such as mscclpp). It registers a deferred call that runs when the directory's
# CMakeLists.txt has been read completely - after every target is defined, before the build system is
# generated - and then, for every target of that directory and its sub-directories:
#
#   * removes the -gencode / --generate-code / -arch=sm_ entries of COMPILE_OPTIONS,
#     INTERFACE_COMPILE_OPTIONS and the directory's CMAKE_CUDA_FLAGS whose architecture number is not in
#     GPUFLEET_CUDA_ARCHS (numbers, e.g. "120": sm_120, sm_120a and sm_120f are kept);
#   * narrows CUDA_ARCHITECTURES the same way (OFF when kept gencodes remain in the options; the wanted
#     architectures when none of its own is wanted, e.g. mscclpp's 80;90 -> 120);
#   * replaces the sources of every target named in GPUFLEET_DROP_TARGETS, and of every Python extension
#     (MODULE library) left with no architecture at all (it only had others' gencodes: FA3 and FlashMLA on an
#     SM120 node), with one generated C++ file whose Python module init raises ImportError naming the reason.
#     The target and its install() rule stay valid; the library just carries no kernels. A library that
#     others link (static, shared, object) is never emptied: it gets the wanted architectures instead.
#
# It also adds an empty target, gpufleet_arch_probe, for a configure-only run.
#
# Nothing in the source tree is edited, so it is idempotent by construction: the same cache gives the same
# build.ninja. The role reads build.ninja afterwards and refuses to build when other architectures remain.
# Needs CMake >= 3.19 (cmake_language(DEFER)).
include_guard(GLOBAL)

if(NOT DEFINED GPUFLEET_CUDA_ARCHS OR "${GPUFLEET_CUDA_ARCHS}" STREQUAL "")
  return()
endif()
string(REPLACE "," ";" _gpufleet_archs "${GPUFLEET_CUDA_ARCHS}")
string(REPLACE "," ";" _gpufleet_drop "${GPUFLEET_DROP_TARGETS}")
set(GPUFLEET_ARCHS_LIST "${_gpufleet_archs}" CACHE INTERNAL "gpufleet: architecture numbers kept")
set(GPUFLEET_DROP_LIST "${_gpufleet_drop}" CACHE INTERNAL "gpufleet: targets built without kernels")

# number part of an architecture: compute_120a -> 120, sm_90 -> 90, 100f -> 100
function(_gpufleet_arch_number arch out)
  string(REGEX REPLACE "^(compute_|sm_|lto_)?([0-9]+).*$" "\\2" _n "${arch}")
  set(${out} "${_n}" PARENT_SCOPE)
endfunction()

function(_gpufleet_keep arch out)
  _gpufleet_arch_number("${arch}" _n)
  if(_n IN_LIST GPUFLEET_ARCHS_LIST)
    set(${out} TRUE PARENT_SCOPE)
  else()
    set(${out} FALSE PARENT_SCOPE)
  endif()
endfunction()

# drop from <value> every match of <entry_regex> whose architecture (<arch_regex>'s \\1) the fleet does not run;
# sets <out> and adds to <out>_FOUND / <out>_KEPT (entries seen / entries left)
function(_gpufleet_drop_entries value entry_regex arch_regex out)
  set(_v "${value}")
  set(_found ${${out}_FOUND})
  set(_kept ${${out}_KEPT})
  string(REGEX MATCHALL "${entry_regex}" _entries "${_v}")
  foreach(_e IN LISTS _entries)
    math(EXPR _found "${_found} + 1")
    string(REGEX REPLACE "${arch_regex}" "\\1" _arch "${_e}")
    _gpufleet_keep("${_arch}" _ok)
    if(_ok)
      math(EXPR _kept "${_kept} + 1")
    else()
      string(REPLACE "${_e}" "" _v "${_v}")
    endif()
  endforeach()
  set(${out} "${_v}" PARENT_SCOPE)
  set(${out}_FOUND ${_found} PARENT_SCOPE)
  set(${out}_KEPT ${_kept} PARENT_SCOPE)
endfunction()

# filter one option string (a ;-list, possibly inside generator expressions); sets <out> and <out>_KEPT
# (how many architecture entries are left) and <out>_FOUND (how many there were)
function(_gpufleet_filter_options value out)
  set(_f_FOUND 0)
  set(_f_KEPT 0)
  # -gencode=arch=compute_X,code=sm_X | -gencode arch=... | -gencode;arch=... | --generate-code=arch=...,code=[...]
  _gpufleet_drop_entries("${value}"
    "(-gencode|--generate-code)[=; ]arch=compute_[0-9]+[a-z]?,code=(\\[[^]]*\\]|[a-z]+_[0-9]+[a-z]?)"
    "^.*arch=compute_([0-9]+[a-z]?).*$" _f)
  # -arch=sm_X / --gpu-architecture=sm_X
  _gpufleet_drop_entries("${_f}" "(-arch|--gpu-architecture)=(sm|compute)_[0-9]+[a-z]?" "^.*_([0-9]+[a-z]?)$" _f)
  set(${out} "${_f}" PARENT_SCOPE)
  set(${out}_FOUND ${_f_FOUND} PARENT_SCOPE)
  set(${out}_KEPT ${_f_KEPT} PARENT_SCOPE)
endfunction()

function(_gpufleet_targets dir out)
  get_property(_t DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  get_property(_subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(_sub IN LISTS _subdirs)
    _gpufleet_targets("${_sub}" _more)
    list(APPEND _t ${_more})
  endforeach()
  set(${out} "${_t}" PARENT_SCOPE)
endfunction()

function(_gpufleet_stub target why)
  get_target_property(_type ${target} TYPE)
  if(NOT _type MATCHES "^(MODULE_LIBRARY|SHARED_LIBRARY|STATIC_LIBRARY|OBJECT_LIBRARY|EXECUTABLE)$")
    return()
  endif()
  get_target_property(_name ${target} OUTPUT_NAME)
  if(NOT _name)
    set(_name ${target})
  endif()
  set(_file "${CMAKE_BINARY_DIR}/gpufleet_stubs/${target}.cpp")
  # a Python extension module that refuses to load, saying why; any other library is simply empty
  file(WRITE "${_file}"
"// generated by gpufleet.preflight (gpufleet_arch_filter.cmake): ${target} was not built: ${why}
#if __has_include(<Python.h>)
#include <Python.h>
extern \"C\" PyMODINIT_FUNC PyInit_${_name}(void) {
  PyErr_SetString(PyExc_ImportError, \"${_name} was not built by gpufleet.preflight: ${why}\");
  return nullptr;
}
#endif
")
  set_property(TARGET ${target} PROPERTY SOURCES "${_file}")
  set_property(TARGET ${target} PROPERTY COMPILE_OPTIONS "")
  set_property(TARGET ${target} PROPERTY CUDA_ARCHITECTURES OFF)
  set_property(GLOBAL APPEND PROPERTY GPUFLEET_STUBBED "${target}")
  message(STATUS "gpufleet: ${target} built without kernels (${why})")
endfunction()

function(_gpufleet_filter_directory)
  set(_dir "${CMAKE_CURRENT_SOURCE_DIR}")
  if(_dir STREQUAL CMAKE_SOURCE_DIR AND NOT TARGET gpufleet_arch_probe)
    # builds nothing: `-Cbuild.targets=gpufleet_arch_probe` makes a configure-only run of a scikit-build-core
    # project, after which the role reads build.ninja before any CUDA object is compiled
    add_custom_target(gpufleet_arch_probe COMMENT "gpufleet: configured for sm_${GPUFLEET_CUDA_ARCHS}")
  endif()
  # the directory's own CMAKE_CUDA_FLAGS (deferred calls run in the directory's scope)
  _gpufleet_filter_options("${CMAKE_CUDA_FLAGS}" _flags)
  set(CMAKE_CUDA_FLAGS "${_flags}" PARENT_SCOPE)
  string(REPLACE ";" "," _wanted "${GPUFLEET_ARCHS_LIST}")
  _gpufleet_targets("${_dir}" _targets)
  foreach(_t IN LISTS _targets)
    get_property(_done TARGET ${_t} PROPERTY GPUFLEET_FILTERED)
    if(_done)
      continue()
    endif()
    set_property(TARGET ${_t} PROPERTY GPUFLEET_FILTERED TRUE)
    if(_t IN_LIST GPUFLEET_DROP_LIST)
      _gpufleet_stub(${_t} "not loaded on sm_${_wanted} GPUs (GPUFLEET_DROP_TARGETS)")
      continue()
    endif()
    set(_found 0)
    set(_kept 0)
    foreach(_prop COMPILE_OPTIONS INTERFACE_COMPILE_OPTIONS)
      get_property(_set TARGET ${_t} PROPERTY ${_prop} SET)
      if(_set)
        get_property(_value TARGET ${_t} PROPERTY ${_prop})
        _gpufleet_filter_options("${_value}" _new)
        math(EXPR _found "${_found} + ${_new_FOUND}")
        math(EXPR _kept "${_kept} + ${_new_KEPT}")
        set_property(TARGET ${_t} PROPERTY ${_prop} "${_new}")
      endif()
    endforeach()
    get_target_property(_type ${_t} TYPE)
    if(_found GREATER 0 AND _kept EQUAL 0 AND _type STREQUAL "MODULE_LIBRARY")
      # a Python extension with hard-coded gencodes for other GPUs only (FA3, FlashMLA on SM120)
      _gpufleet_stub(${_t} "it only has code for other architectures than sm_${_wanted}")
      continue()
    endif()
    get_property(_archs TARGET ${_t} PROPERTY CUDA_ARCHITECTURES)
    if(_kept GREATER 0)
      # the gencodes kept in the options say it all: no extra --generate-code from CUDA_ARCHITECTURES
      if(_archs)
        set_property(TARGET ${_t} PROPERTY CUDA_ARCHITECTURES OFF)
      endif()
    elseif(_found GREATER 0 OR (_archs AND NOT _archs STREQUAL "OFF"))
      # CUDA_ARCHITECTURES (CMake emits real code and PTX) or a library others link: the wanted ones instead
      set(_new_archs "")
      foreach(_a IN LISTS _archs)
        _gpufleet_keep("${_a}" _ok)
        if(_ok)
          list(APPEND _new_archs "${_a}")
        endif()
      endforeach()
      if(NOT _new_archs)
        set(_new_archs "${GPUFLEET_ARCHS_LIST}")
      endif()
      set_property(TARGET ${_t} PROPERTY CUDA_ARCHITECTURES "${_new_archs}")
    endif()
  endforeach()
endfunction()

cmake_language(DEFER CALL _gpufleet_filter_directory)
