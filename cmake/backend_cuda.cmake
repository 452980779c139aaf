# The CUDA backend: host code in src/host/cuda_*.c (plain C against the CUDA
# runtime API), kernels in cuda/*.cu compiled by nvcc. XFA_CUDA = AUTO | ON | OFF.
#
# cudart is linked statically, so libxfa loads on machines without the NVIDIA
# driver (the backend then reports 0 devices and its tests skip).
set(XFA_CUDA_ENABLED OFF)
if(XFA_CUDA STREQUAL "OFF")
  set(XFA_CUDA_SUMMARY "off (XFA_CUDA=OFF)")
  return()
endif()

# nvcc is often installed outside PATH; look where the toolkit usually lives.
if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
  find_program(XFA_NVCC nvcc HINTS ENV CUDA_PATH PATHS /usr/local/cuda/bin PATH_SUFFIXES bin)
  if(XFA_NVCC)
    set(CMAKE_CUDA_COMPILER ${XFA_NVCC})
  endif()
endif()
include(CheckLanguage)
check_language(CUDA)
if(NOT CMAKE_CUDA_COMPILER)
  if(XFA_CUDA STREQUAL "ON")
    message(FATAL_ERROR "XFA_CUDA=ON but no CUDA compiler (nvcc) was found; set CUDACXX or CMAKE_CUDA_COMPILER")
  endif()
  set(XFA_CUDA_SUMMARY "off (no nvcc found)")
  return()
endif()

# Ampere to Hopper as machine code (sm_80 code also runs on sm_86/sm_89, but their own builds
# schedule better), plus PTX for the newest so later GPUs JIT it.
set(XFA_CUDA_ARCHITECTURES "80-real;86-real;89-real;90-real;90-virtual" CACHE STRING
    "CUDA architectures the kernels are built for (CMAKE_CUDA_ARCHITECTURES syntax)")
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)

set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)

set(xfa_cuda_kernels
  ${PROJECT_SOURCE_DIR}/cuda/generic.cu
  ${PROJECT_SOURCE_DIR}/cuda/mma_d32.cu
  ${PROJECT_SOURCE_DIR}/cuda/mma_d64.cu
  ${PROJECT_SOURCE_DIR}/cuda/mma_d96.cu
  ${PROJECT_SOURCE_DIR}/cuda/mma_d128.cu
  ${PROJECT_SOURCE_DIR}/cuda/mma_d192.cu
  ${PROJECT_SOURCE_DIR}/cuda/mma_d256.cu
  ${PROJECT_SOURCE_DIR}/cuda/decode.cu
  ${PROJECT_SOURCE_DIR}/cuda/decode_f16.cu
  ${PROJECT_SOURCE_DIR}/cuda/decode_bf16.cu
  ${PROJECT_SOURCE_DIR}/cuda/decode_f32.cu
  ${PROJECT_SOURCE_DIR}/cuda/decode_merge.cu)
# The backward pass: generic kernels, the tensor-core ones per head dim, the host slot.
list(APPEND xfa_cuda_kernels
  ${PROJECT_SOURCE_DIR}/cuda/backward.cu
  ${PROJECT_SOURCE_DIR}/cuda/backward_mma_d64.cu
  ${PROJECT_SOURCE_DIR}/cuda/backward_mma_d128.cu
  ${PROJECT_SOURCE_DIR}/src/host/cuda_backward.c)
target_sources(xfa PRIVATE
  ${PROJECT_SOURCE_DIR}/src/host/cuda_backend.c
  ${PROJECT_SOURCE_DIR}/src/host/cuda_device.c
  ${PROJECT_SOURCE_DIR}/src/host/cuda_interop.c
  ${PROJECT_SOURCE_DIR}/src/host/cuda_decode.c
  ${xfa_cuda_kernels})
target_include_directories(xfa PRIVATE ${PROJECT_SOURCE_DIR}/cuda)
target_include_directories(xfa PUBLIC $<BUILD_INTERFACE:${CUDAToolkit_INCLUDE_DIRS}>)
target_compile_options(xfa PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xptxas=-warn-spills --expt-relaxed-constexpr>)
target_link_libraries(xfa PRIVATE CUDA::cudart_static)
# The library links with the C toolchain; the static runtime is self-contained.
set_target_properties(xfa PROPERTIES CUDA_RUNTIME_LIBRARY Static LINKER_LANGUAGE C
                                     CUDA_ARCHITECTURES "${XFA_CUDA_ARCHITECTURES}")
# The static runtime's symbols stay inside libxfa (a program may link its own CUDA runtime).
target_link_options(xfa PRIVATE "LINKER:--exclude-libs,libcudart_static.a")
set_property(SOURCE ${PROJECT_SOURCE_DIR}/src/host/registry.c APPEND PROPERTY COMPILE_DEFINITIONS XFA_WITH_CUDA)
# The Hopper path (cuda/hopper/) defines XFA_CUDA_HAVE_SM90 when built (XFA_CUDA_SM90).
include(${PROJECT_SOURCE_DIR}/cmake/cuda_hopper.cmake)

set(XFA_CUDA_ENABLED ON)
set(XFA_CUDA_TEST_LIBS CUDA::cudart_static)
set(XFA_CUDA_SUMMARY "on (CUDA ${CUDAToolkit_VERSION}, ${CMAKE_CUDA_COMPILER}; architectures ${XFA_CUDA_ARCHITECTURES}; Hopper path ${XFA_CUDA_SM90_SUMMARY})")
string(APPEND XFA_PKG_LIBS_PRIVATE " -L${CUDAToolkit_LIBRARY_DIR} -lcudart_static -ldl -lrt -lstdc++")
