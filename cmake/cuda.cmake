# cuda: the CUDA backend (loom_tensor_cuda), its tests' extra links and the GPU benchmark.
# Included by CMakeLists.txt only when LOOM_CUDA is not OFF and nvcc was found, which is what
# sets LOOM_HAVE_CUDA in the generated config.h. One architecture only, to keep the build short
# on small CI machines: Hopper machine code (sm_90) plus its PTX, which the driver compiles for
# any newer GPU at load time.
if(NOT CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES "90-real;90-virtual")
endif()
# .cu files include only the small CUDA headers of this folder; CMake 3.25 knows no CUDA20.
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)

file(GLOB LOOM_CUDA_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/loom/tensor/cuda/*.cu
     ${CMAKE_SOURCE_DIR}/src/loom/tensor/cuda/*.cc)
add_library(loom_tensor_cuda STATIC ${LOOM_CUDA_SOURCES})
# The directory's compile options (warnings, -march, sanitizers) are host-compiler flags: give
# them to g++ as they are and to nvcc through -Xcompiler, never to nvcc itself.
function(loom_cuda_host_options target)
  get_target_property(host_opts ${target} COMPILE_OPTIONS)
  set(opts "")
  foreach(opt IN LISTS host_opts)
    list(APPEND opts "$<$<COMPILE_LANGUAGE:CXX>:${opt}>" "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=${opt}>")
  endforeach()
  list(APPEND opts "$<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr>" "$<$<COMPILE_LANGUAGE:CUDA>:--extended-lambda>")
  set_property(TARGET ${target} PROPERTY COMPILE_OPTIONS "${opts}")
endfunction()
loom_cuda_host_options(loom_tensor_cuda)
target_include_directories(loom_tensor_cuda PUBLIC ${CMAKE_SOURCE_DIR}/src
                                                   ${CMAKE_BINARY_DIR}/generated)
# The tests compare against the CPU backend, so loom_tensor_cuda links loom_tensor and the
# registry in loom_tensor links loom_tensor_cuda: a cycle of static libraries, which CMake
# resolves by repeating them on the link line.
target_link_libraries(loom_tensor_cuda PUBLIC loom_core CUDA::cudart CUDA::cublas)
target_link_libraries(loom_tensor PUBLIC loom_tensor_cuda)
target_link_libraries(loom_tensor_cuda PUBLIC loom_tensor)

# The codecs' device side (compress/cuda/: DeviceCodec over the kernels above); the registry
# in loom_compress (device_codec_registry.cc) names it, so they link both ways.
file(GLOB LOOM_COMPRESS_CUDA_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/loom/compress/cuda/*.cc)
if(LOOM_COMPRESS_CUDA_SOURCES)
  add_library(loom_compress_cuda STATIC ${LOOM_COMPRESS_CUDA_SOURCES})
  loom_cuda_host_options(loom_compress_cuda)
  target_link_libraries(loom_compress_cuda PUBLIC loom_compress loom_tensor_cuda)
  target_link_libraries(loom_compress PUBLIC loom_compress_cuda)
endif()

# The NCCL communicator and world (the nccl transport), when CMakeLists.txt found NCCL
# (LOOM_HAVE_NCCL). The transport registry in loom_comm names them: linked both ways, as MPI.
if(LOOM_HAVE_NCCL)
  file(GLOB LOOM_NCCL_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/loom/comm/nccl/*.cc
       ${CMAKE_SOURCE_DIR}/src/loom/comm/nccl/*.cu)
  add_library(loom_comm_nccl STATIC ${LOOM_NCCL_SOURCES})
  loom_cuda_host_options(loom_comm_nccl)
  target_include_directories(loom_comm_nccl PUBLIC ${LOOM_NCCL_INCLUDE_DIR})
  target_link_libraries(loom_comm_nccl PUBLIC loom_comm loom_tensor_cuda ${LOOM_NCCL_LIBRARY})
  target_link_libraries(loom_comm PUBLIC loom_comm_nccl)
endif()

# The GPU training/GEMM/copy benchmark (bench/gpu/check.sh runs it). It needs only nn + optim.
if(LOOM_BENCH AND EXISTS ${CMAKE_SOURCE_DIR}/bench/gpu/gpu_bench.cc)
  add_executable(loom_gpu_bench ${CMAKE_SOURCE_DIR}/bench/gpu/gpu_bench.cc)
  target_link_libraries(loom_gpu_bench PRIVATE loom_optim loom_tensor_cuda CLI11::CLI11)
endif()

# tests/tensor_cuda/ becomes loom_tensor_cuda_tests through the glob in CMakeLists.txt, which
# links loom_tensor_cuda; the model-level and codec tests also need nn, optim and compress, linked once the test
# target exists (deferred to the end of the top-level directory).
function(loom_cuda_link_tests)
  if(TARGET loom_tensor_cuda_tests)
    target_link_libraries(loom_tensor_cuda_tests PRIVATE loom_optim loom_compress)
    # Host-side checks that name CUDA types: CUDA builds only (not a *_test.cc, so the glob of
    # a CPU-only build leaves it out).
    target_sources(loom_tensor_cuda_tests PRIVATE
                   ${CMAKE_SOURCE_DIR}/tests/tensor_cuda/cuda_build_checks.cc
                   ${CMAKE_SOURCE_DIR}/tests/tensor_cuda/cuda_codec_checks.cc)
    if(TARGET loom_comm_nccl)
      target_sources(loom_tensor_cuda_tests PRIVATE
                     ${CMAKE_SOURCE_DIR}/tests/tensor_cuda/nccl_checks.cc
                     ${CMAKE_SOURCE_DIR}/tests/tensor_cuda/nccl_train_checks.cc)
      target_link_libraries(loom_tensor_cuda_tests PRIVATE loom_comm_nccl loom_train)
    endif()
  endif()
endfunction()
cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL loom_cuda_link_tests)
