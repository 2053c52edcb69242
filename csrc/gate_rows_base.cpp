// Row kernels for the portable baseline instruction set (SSE2 on x86-64).
#define VAM_ISA_NS base
#define VAM_ISA_NAME "base"
#include "gate_rows.inc"
