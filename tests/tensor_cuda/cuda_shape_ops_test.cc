// The ops of the layers that move or scale values (transpose's permute, the broadcast
// multiply's scale_rows and row_dots) on the CUDA backend against the CPU backend: permute and
// scale_rows move or multiply each float once, so bit-exact; row_dots sums in double on both,
// in another order, so within a named budget. Skipped without a GPU.
#include <gtest/gtest.h>

#include <vector>

#include "tensor_cuda/gpu_compare.h"

namespace loom::test {
namespace {

TEST(CudaShapeOps, PermuteIsBitExact) {
  LOOM_REQUIRE_GPU();
  // ShuffleNet's channel shuffle, a head split, and a full reversal of five axes.
  for (const auto& [dims, perm] : std::vector<std::pair<std::vector<int64_t>, std::vector<int>>>{
           {{2, 58, 7, 7}, {1, 0, 2, 3}},
           {{64, 4, 32}, {1, 0, 2}},
           {{3, 4, 5, 2, 3}, {4, 3, 2, 1, 0}}}) {
    Permutation p;
    p.rank = int(dims.size());
    int64_t block = 1;
    for (int i = 0; i < p.rank; ++i) p.dims[i] = dims[size_t(i)], p.perm[i] = perm[size_t(i)];
    for (int64_t d : dims) block *= d;
    const int64_t blocks = 3;
    const auto x = random_floats(size_t(block * blocks), 21);
    std::vector<float> y(x.size());
    cpu().permute(x.data(), y.data(), blocks, p);
    auto d_x = upload(gpu(), x);
    auto d_y = guarded<float>(gpu(), y.size());
    gpu().permute(d_x.data(), d_y.data(), blocks, p);
    EXPECT_BITS_EQ(download(gpu(), d_y, y.size()), y);
    EXPECT_CANARY(gpu(), d_y, y.size());
  }
}

TEST(CudaShapeOps, ScaleRowsAndRowDots) {
  LOOM_REQUIRE_GPU();
  // Short rows (one thread each) and long ones (a block each).
  for (const auto& [rows, cols] :
       std::vector<std::pair<int64_t, int64_t>>{{1000, 1}, {96, 49}, {64, 3136}}) {
    const auto x = random_floats(size_t(rows * cols), 22);
    const auto s = random_floats(size_t(rows), 23);
    const auto dy = random_floats(size_t(rows * cols), 24);
    std::vector<float> y(x.size()), dots(static_cast<size_t>(rows));
    cpu().scale_rows(x.data(), s.data(), y.data(), rows, cols);
    cpu().row_dots(dy.data(), x.data(), dots.data(), rows, cols);
    auto d_x = upload(gpu(), x), d_s = upload(gpu(), s), d_dy = upload(gpu(), dy);
    auto d_y = guarded<float>(gpu(), y.size());
    auto d_dots = guarded<float>(gpu(), dots.size());
    gpu().scale_rows(d_x.data(), d_s.data(), d_y.data(), rows, cols);
    gpu().row_dots(d_dy.data(), d_x.data(), d_dots.data(), rows, cols);
    EXPECT_BITS_EQ(download(gpu(), d_y, y.size()), y);
    // Double sums rounded once to float: at most a rounding step apart.
    EXPECT_NMSE_LE(download(gpu(), d_dots, dots.size()), dots, 1e-12);
    EXPECT_CANARY(gpu(), d_y, y.size());
    EXPECT_CANARY(gpu(), d_dots, dots.size());
  }
}

}  // namespace
}  // namespace loom::test
