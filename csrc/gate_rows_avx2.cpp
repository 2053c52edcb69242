// Row kernels compiled with -mavx2 (CMakeLists.txt sets the flag on this file only); used
// when the CPU reports AVX2 at run time.
#define VAM_ISA_NS avx2
#define VAM_ISA_NAME "avx2"
#include "gate_rows.inc"
