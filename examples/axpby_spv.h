/* The SPIR-V of axpby.comp, compiled and embedded by examples/CMakeLists.txt. */
#include <stddef.h>
#include <stdint.h>

extern const uint32_t example_axpby_spv[];
extern const size_t example_axpby_spv_size;
