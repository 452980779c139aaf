#version 450
// The engine's own compute pass in examples/vulkan_engine.c: y = a * x + b * z over n floats.
// It stands for whatever an engine runs before and after attention (a projection, a residual add).
layout(local_size_x = 64) in;

layout(set = 0, binding = 0) readonly buffer X { float x[]; };
layout(set = 0, binding = 1) readonly buffer Z { float z[]; };
layout(set = 0, binding = 2) writeonly buffer Y { float y[]; };

layout(push_constant) uniform Params {
    float a;
    float b;
    uint n;
} params;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i < params.n) y[i] = params.a * x[i] + params.b * z[i];
}
