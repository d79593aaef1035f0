// The upper halves of the AVX registers, left in use by a SIMD kernel.
#ifndef OPENACLNN_OPS_COMMON_VECTOR_STATE_H_
#define OPENACLNN_OPS_COMMON_VECTOR_STATE_H_

namespace openaclnn {

// Marks the upper halves of the YMM/ZMM registers unused (VZEROUPPER) where the CPU has AVX; nothing elsewhere.
// Called after the AVX2/AVX-512 kernels, on every thread that ran one: code built for the baseline ISA (the
// per-row prologues and epilogues are SSE2) runs about 3.4x slower while the upper halves are dirty on the
// development machine's Zen 4 (a sum over 152064 weights: 21 us clean, 71 us dirty), and not every exit from the
// kernels' compiled code clears them.
void ClearUpperVectorState();

}  // namespace openaclnn

#endif  // OPENACLNN_OPS_COMMON_VECTOR_STATE_H_
