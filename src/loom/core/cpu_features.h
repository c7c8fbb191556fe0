// Run-time checks for the AVX-512 kernels (the codecs', the CPU backend's Philox). Those are
// compiled with target attributes beside the project's x86-64-v3 code, so a dispatcher must ask
// before it calls one. Each answer is computed once.
//
// LOOM_MAX_CPU_ISA=avx2 makes every answer "no", so an AVX-512 machine runs the AVX2 paths an
// AVX2-only machine runs (tests label `isa`, docs/determinism.md); unset or "native" asks the CPU.
// As oneDNN's ONEDNN_MAX_CPU_ISA, it is a process-wide cap read once, on the first question.
#pragma once

namespace loom {

// Whether LOOM_MAX_CPU_ISA caps loom's own kernels at AVX2. Throws ConfigError naming the
// variable for a value other than "avx2" or "native".
bool cpu_isa_capped_at_avx2();

// F, BW, DQ, VL: what the fp16, bf16 and onebit kernels and the Philox generator use.
inline bool cpu_has_avx512() {
  static const bool yes = !cpu_isa_capped_at_avx2() && __builtin_cpu_supports("avx512f") &&
                          __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  return yes;
}

// The above and BF16 (vcvtne2ps2bf16): what the fp16 and bf16 encoders use.
inline bool cpu_has_avx512_bf16() {
  static const bool yes = cpu_has_avx512() && __builtin_cpu_supports("avx512bf16");
  return yes;
}

// F, BW, VBMI: what the int8 kernels use (byte permutes over 128-entry tables).
inline bool cpu_has_avx512_vbmi() {
  static const bool yes = !cpu_isa_capped_at_avx2() && __builtin_cpu_supports("avx512f") &&
                          __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vbmi");
  return yes;
}

}  // namespace loom
