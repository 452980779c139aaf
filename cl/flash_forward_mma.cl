/* placeholder */
__kernel void xfa_flash_forward_mma(void) {}
