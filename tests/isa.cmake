# The test binaries whose truth depends on kernels (layer values against references, the
# bitwise comparisons across code paths that docs/determinism.md promises, the codecs' SIMD
# paths) run again as whole binaries under two capped ISAs, label isa:
#   isa_avx2.*   oneDNN capped at AVX2 and loom's own dispatch at AVX2: what an AVX2-only CPU
#                (AMD Zen 3, Intel before Skylake-SP) runs
#   isa_sse41.*  oneDNN capped at SSE4.1 (its baseline) and loom's own at AVX2 (loom itself is
#                compiled for x86-64-v3, so there is no lower cap for its code)
# On an AVX2-only CPU the first repeats the native run; on an AVX-512 CPU it is the AVX2 machine.
set(LOOM_ISA_TEST_BINARIES loom_tensor_tests loom_nn_tests loom_compress_tests loom_optim_tests
                           loom_train_integration_tests)
foreach(cap avx2 sse41)
  string(TOUPPER ${cap} cap_env)
  foreach(bin IN LISTS LOOM_ISA_TEST_BINARIES)
    if(TARGET ${bin})
      add_test(NAME isa_${cap}.${bin} COMMAND ${bin} --gtest_brief=1)
      set_tests_properties(isa_${cap}.${bin} PROPERTIES
        ENVIRONMENT "ONEDNN_MAX_CPU_ISA=${cap_env};LOOM_MAX_CPU_ISA=avx2;LOOM_BINARY_DIR=${CMAKE_BINARY_DIR}"
        TIMEOUT 900 LABELS isa)
    endif()
  endforeach()
endforeach()
