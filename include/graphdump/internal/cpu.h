// Which vector kernels this process may use, decided once at run time. GRAPHDUMP_SIMD caps the
// choice ("sse2": the x86-64 baseline only; "avx2": no AVX-512), so that the tests run every
// kernel family on any machine that has it.
#pragma once

namespace graphdump {

// AVX2 and FMA.
bool UseAvx2();

// AVX-512 F and BW (512-bit registers, 16-bit element permutes and masks).
bool UseAvx512Bw();

}  // namespace graphdump
