# The Hopper forward path (cuda/hopper/): included by backend_cuda.cmake once CUDA is enabled and
# the `xfa` target exists. Compiles cuda/hopper/*.cu for sm_90a only (wgmma and setmaxnreg exist
# nowhere else) into an object library linked into xfa, and defines XFA_CUDA_HAVE_SM90 for the host
# code, which then calls xfa_cuda_sm90_supported/forward (cuda/launch.h) on compute capability 9.0.
#
# XFA_CUDA_SM90: AUTO (on when nvcc >= 12.0 can target sm_90a), ON or OFF.
# Sets XFA_CUDA_SM90_ENABLED and XFA_CUDA_SM90_SUMMARY.
set(XFA_CUDA_SM90 AUTO CACHE STRING "Hopper (sm_90a) forward kernel in the CUDA backend: AUTO, ON or OFF")
set_property(CACHE XFA_CUDA_SM90 PROPERTY STRINGS AUTO ON OFF)

set(XFA_CUDA_SM90_ENABLED OFF)
if(XFA_CUDA_SM90 STREQUAL "OFF")
  set(XFA_CUDA_SM90_SUMMARY "off (XFA_CUDA_SM90=OFF)")
elseif(NOT CMAKE_CUDA_COMPILER_ID STREQUAL "NVIDIA" OR CMAKE_CUDA_COMPILER_VERSION VERSION_LESS 12.0)
  if(XFA_CUDA_SM90 STREQUAL "ON")
    message(FATAL_ERROR "XFA_CUDA_SM90=ON needs nvcc 12.0 or newer (found ${CMAKE_CUDA_COMPILER_ID} ${CMAKE_CUDA_COMPILER_VERSION})")
  endif()
  set(XFA_CUDA_SM90_SUMMARY "off (needs nvcc >= 12.0)")
else()
  set(XFA_CUDA_SM90_ENABLED ON)
  file(GLOB xfa_sm90_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/cuda/hopper/*.cu)
  add_library(xfa_cuda_sm90 OBJECT ${xfa_sm90_sources})
  # The architecture is given by hand: CUDA_ARCHITECTURES would add a plain sm_90 pass that
  # rejects wgmma/setmaxnreg.
  set_target_properties(xfa_cuda_sm90 PROPERTIES CUDA_ARCHITECTURES OFF POSITION_INDEPENDENT_CODE ON
                        CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON
                        CUDA_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
  target_compile_options(xfa_cuda_sm90 PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:-gencode=arch=compute_90a,code=sm_90a -Xptxas=-warn-spills>)
  target_include_directories(xfa_cuda_sm90 PRIVATE ${PROJECT_SOURCE_DIR}/cuda)
  target_sources(xfa PRIVATE $<TARGET_OBJECTS:xfa_cuda_sm90>)
  target_compile_definitions(xfa PRIVATE XFA_CUDA_HAVE_SM90)
  set(XFA_CUDA_SM90_SUMMARY "on (sm_90a: wgmma + TMA)")
endif()
