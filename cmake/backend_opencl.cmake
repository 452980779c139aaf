# The OpenCL backend: host code in src/host/opencl_*.c, kernels in cl/*.cl
# embedded as C arrays at build time. XFA_OPENCL = AUTO | ON | OFF.
set(XFA_OPENCL_ENABLED OFF)
if(XFA_OPENCL STREQUAL "OFF")
  set(XFA_OPENCL_SUMMARY "off (XFA_OPENCL=OFF)")
  return()
endif()

find_package(OpenCL QUIET)
if(NOT OpenCL_FOUND)
  if(XFA_OPENCL STREQUAL "ON")
    message(FATAL_ERROR "XFA_OPENCL=ON but no OpenCL headers and library were found "
                        "(Debian: apt-get install ocl-icd-opencl-dev opencl-headers)")
  endif()
  set(XFA_OPENCL_SUMMARY "off (no OpenCL found)")
  return()
endif()

# Kernels -> C arrays in the build dir (never the source dir).
set(xfa_cl_kernels flash_forward flash_forward_mma flash_decode flash_backward)
set(xfa_cl_generated)
foreach(kernel ${xfa_cl_kernels})
  set(in ${PROJECT_SOURCE_DIR}/cl/${kernel}.cl)
  set(inputs ${in})
  set(deps ${in})
  if(kernel STREQUAL "flash_forward" OR kernel STREQUAL "flash_backward")
    # their element storage (f32/f16/bf16 loads and stores) is written once, in xfa_storage.cl
    set(inputs "${PROJECT_SOURCE_DIR}/cl/xfa_storage.cl|${in}")
    list(APPEND deps ${PROJECT_SOURCE_DIR}/cl/xfa_storage.cl)
  endif()
  set(out ${PROJECT_BINARY_DIR}/generated/opencl/${kernel}_cl.c)
  add_custom_command(OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} "-DINPUT=${inputs}" -DOUTPUT=${out} -DSYMBOL=xfa_cl_${kernel}
            -P ${PROJECT_SOURCE_DIR}/cmake/embed_opencl.cmake
    DEPENDS ${deps} ${PROJECT_SOURCE_DIR}/cmake/embed_opencl.cmake
    COMMENT "Embedding cl/${kernel}.cl" VERBATIM)
  list(APPEND xfa_cl_generated ${out})
endforeach()

target_sources(xfa PRIVATE
  ${PROJECT_SOURCE_DIR}/src/host/opencl_backend.c
  ${PROJECT_SOURCE_DIR}/src/host/opencl_backward.c
  ${PROJECT_SOURCE_DIR}/src/host/opencl_decode.c
  ${PROJECT_SOURCE_DIR}/src/host/opencl_device.c
  ${PROJECT_SOURCE_DIR}/src/host/opencl_interop.c
  ${PROJECT_SOURCE_DIR}/src/host/opencl_program.c
  ${xfa_cl_generated})
target_link_libraries(xfa PRIVATE OpenCL::OpenCL)
# Exposes xfa_opencl.h's types to users: they include CL/cl.h themselves.
target_compile_definitions(xfa PRIVATE CL_TARGET_OPENCL_VERSION=120)
set_property(SOURCE ${PROJECT_SOURCE_DIR}/src/host/registry.c APPEND PROPERTY COMPILE_DEFINITIONS XFA_WITH_OPENCL)

set(XFA_OPENCL_ENABLED ON)
set(XFA_OPENCL_TEST_LIBS OpenCL::OpenCL)
set(XFA_OPENCL_SUMMARY "on (OpenCL ${OpenCL_VERSION_STRING} headers, ${OpenCL_LIBRARY})")
string(APPEND XFA_PKG_LIBS_PRIVATE " -lOpenCL")
