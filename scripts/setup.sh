#!/usr/bin/env bash
# Installs what spillway needs to build and test, from Debian's packages, when it is missing.
# Idempotent: installs nothing when everything is present. Needs root (or sudo) only to install.
set -euo pipefail

packages=(cmake ninja-build g++ pkg-config libabsl-dev libunwind-dev libgtest-dev libgmock-dev
          googletest libbenchmark-dev python3 zlib1g-dev nlohmann-json3-dev)
# Policy files (toml++, used header-only) and the tools' command lines (CLI11, header-only).
packages+=(libtomlplusplus-dev libcli11-dev)
# The recorder of real networks' training steps (workloads/recorder/, recorder_test): PyTorch on
# the CPU, with OpenBLAS in place of the reference BLAS (about 20x faster matrix products).
packages+=(python3-torch python3-torchvision libopenblas0-pthread)
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  if [[ $(id -u) -eq 0 ]]; then
    sudo=()
  elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    sudo=(sudo -n)
  else
    echo "setup: missing packages: ${missing[*]}; run as root: apt-get install ${missing[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The driver API header. simgpu implements it and the shim intercepts it; it comes with the CUDA
# toolkit (on this project's machines at /usr/local/cuda), or from Debian's nvidia-cuda-dev (non-free).
found_cuda_h=0
for candidate in ${CUDA_HOME:+"$CUDA_HOME/include/cuda.h"} /usr/local/cuda/include/cuda.h \
                 /usr/include/cuda.h; do
  [[ -f "$candidate" ]] && found_cuda_h=1
done
if ((!found_cuda_h)); then
  echo "setup: cuda.h not found: install the CUDA toolkit (or Debian's nvidia-cuda-dev from non-free)," \
       "or set CUDA_HOME to a toolkit folder" >&2
  exit 1
fi
echo "setup: all build dependencies present"
