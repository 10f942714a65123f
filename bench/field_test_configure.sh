#!/usr/bin/env bash
# Configure the real sgl-kernel tree the way scikit-build-core does (same generator, defines and CMAKE_ARGS),
# into BUILD_DIR, offline. Used by bench/field_test.sh; runnable alone:
#   bench/field_test_configure.sh SRC OFFLINE_DIR VENV BUILD_DIR [extra cmake args...]
# Environment: CUDA_DRIVER_STUB (a libcuda.so to link against where no driver is installed).
set -euo pipefail
SRC=$1 OFFLINE=$2 VENV=$3 BUILD=$4
shift 4
PY="$VENV/bin/python"
CMAKE="$VENV/bin/cmake"; [ -x "$CMAKE" ] || CMAKE=cmake
NINJA="$VENV/bin/ninja"; [ -x "$NINJA" ] || NINJA=$(command -v ninja)
SITE=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
TORCH_CMAKE=$("$PY" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')
args=(-S "$SRC" -B "$BUILD" -G Ninja -DCMAKE_MAKE_PROGRAM="$NINJA" -DCMAKE_BUILD_TYPE=Release
      -DPython_EXECUTABLE="$PY" -DPython3_EXECUTABLE="$PY" -DSKBUILD=2 -DSKBUILD_SABI_VERSION=3.10
      -DSKBUILD_SABI_COMPONENT=Development.SABIModule -DCMAKE_PREFIX_PATH="$TORCH_CMAKE"
      -DCMAKE_POLICY_VERSION_MINIMUM=3.5 -DSGL_KERNEL_COMPILE_THREADS=1
      -DCUDA_TOOLKIT_ROOT_DIR="${CUDA_HOME:-/usr/local/cuda}" -DCMAKE_CUDA_COMPILER="${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" -DFETCHCONTENT_FULLY_DISCONNECTED=ON)
# every FetchContent name the tree declares (nested included) -> its offline copy
while IFS= read -r line; do args+=("$line"); done < <(
  PYTHONPATH="$(cd "$(dirname "$0")/.." && pwd)/plugins/module_utils" "$PY" - "$SRC" "$OFFLINE" <<'PYEOF'
import sys
import _sgl_tree
found = _sgl_tree.scan_fetchcontent(sys.argv[1], sys.argv[2])
if found["missing"]:
    sys.exit("missing from %s: %s" % (sys.argv[2], ", ".join(found["missing"])))
for entry in found["declared"]:
    print("-D%s=%s" % (_sgl_tree.fetchcontent_var(entry["name"]), entry["source_dir"]))
PYEOF
)
# the CUDA libraries torch's pip packages bring (nvidia/cu13): nvrtc, cuBLAS; a driver stub where no driver
NV="$SITE/nvidia/cu13"
if [ -d "$NV/lib" ]; then
  args+=(-DCUDA_nvrtc_LIBRARY="$NV/lib/libnvrtc.so.13" -DCUDA_NVRTC_LIB="$NV/lib/libnvrtc.so.13"
         -DCUDA_cublas_LIBRARY="$NV/lib/libcublas.so.13" -DCUDA_cublasLt_LIBRARY="$NV/lib/libcublasLt.so.13"
         -DCMAKE_CUDA_FLAGS="-I$NV/include" -DCMAKE_CXX_FLAGS="-I$NV/include")
fi
[ -n "${CUDA_DRIVER_STUB:-}" ] && args+=(-DCUDA_cuda_driver_LIBRARY="$CUDA_DRIVER_STUB")
exec "$CMAKE" "${args[@]}" "$@"
