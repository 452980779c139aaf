# embed_opencl.cmake - turns an OpenCL C source into a C array in the build dir.
# Run as: cmake -DINPUT=<file.cl>[|<file.cl>...] -DOUTPUT=<file.c> -DSYMBOL=<name> -P embed_opencl.cmake
# The array is NUL-terminated so the host passes it to clCreateProgramWithSource as a string.
# INPUT may name several files separated by '|' (a shared prelude first): they are concatenated.
string(REPLACE "|" ";" inputs "${INPUT}")
set(hex "")
foreach(input ${inputs})
  file(READ "${input}" part HEX)
  string(APPEND hex "${part}")
endforeach()
string(LENGTH "${hex}" hex_len)
math(EXPR byte_count "${hex_len} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
# Break the initialiser into lines of 16 bytes so compilers and diffs stay happy.
string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){16})" "\\1\n" bytes "${bytes}")
file(WRITE "${OUTPUT}"
  "/* Generated from ${INPUT} by cmake/embed_opencl.cmake: do not edit. */\n"
  "#include <stddef.h>\n"
  "const char ${SYMBOL}[] = {\n${bytes}0x00};\n"
  "const size_t ${SYMBOL}_size = ${byte_count};\n")
