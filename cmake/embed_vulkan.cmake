# embed_vulkan.cmake - turns a SPIR-V binary into a C array (run with cmake -P).
#   cmake -DINPUT=<file.spv> -DOUTPUT=<file.c> -DNAME=<symbol> -P embed_vulkan.cmake
# Defines `const uint32_t NAME[]` and `const size_t NAME_size` (bytes). The words
# are written little-endian as stored, which is how SPIR-V is read on every host
# Vulkan runs on.
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" hex_len)
math(EXPR bytes "${hex_len} / 2")
math(EXPR rem "${bytes} % 4")
if(bytes EQUAL 0 OR NOT rem EQUAL 0)
  message(FATAL_ERROR "${INPUT}: ${bytes} bytes is not a SPIR-V module")
endif()
# Every 8 hex digits are one word in file (little-endian) order: swap to a 0x literal.
string(REGEX REPLACE "([0-9a-f][0-9a-f])([0-9a-f][0-9a-f])([0-9a-f][0-9a-f])([0-9a-f][0-9a-f])"
       "0x\\4\\3\\2\\1u," words "${hex}")
string(REGEX REPLACE "(0x[0-9a-f]+u,0x[0-9a-f]+u,0x[0-9a-f]+u,0x[0-9a-f]+u,0x[0-9a-f]+u,0x[0-9a-f]+u,0x[0-9a-f]+u,0x[0-9a-f]+u,)"
       "\\1\n    " words "${words}")
file(WRITE "${OUTPUT}.tmp"
  "/* Generated from ${INPUT} by embed_vulkan.cmake; do not edit. */\n"
  "#include <stddef.h>\n#include <stdint.h>\n\n"
  "const uint32_t ${NAME}[] = {\n    ${words}\n};\n"
  "const size_t ${NAME}_size = sizeof ${NAME};\n")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
