#!/usr/bin/env bash
# Installs what xfa needs to build and test on Debian/Ubuntu, skipping what is
# already there: a C compiler, CMake, Check, PoCL (OpenCL on the CPU), Mesa
# lavapipe (Vulkan on the CPU), glslang and the Vulkan validation layer.
# CUDA is used when nvcc is on PATH; it is not installed here.
set -euo pipefail

packages=(
  build-essential cmake pkg-config check
  pocl-opencl-icd ocl-icd-opencl-dev opencl-headers clinfo
  libvulkan-dev mesa-vulkan-drivers vulkan-tools glslang-tools spirv-tools vulkan-validationlayers
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "bootstrap: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "bootstrap: all packages present"
fi
