# The compress layer: its scalar references and vectorised kernels must round identically,
# so no floating-point contraction (a fused multiply-add in one and not the other changes bits).
if(TARGET loom_compress)
  target_compile_options(loom_compress PRIVATE -ffp-contract=off)
endif()
