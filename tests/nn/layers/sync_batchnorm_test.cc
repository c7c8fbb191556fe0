// SyncBatchNorm: two replicas, each with part of a batch, summing their statistics through a
// ReplicaReducer, compute what one BatchNorm computes over the whole batch.
#include <gtest/gtest.h>

#include <barrier>
#include <thread>

#include "loom/nn/layers/batchnorm.h"
#include "nn/grad_check.h"

namespace loom::nn {
namespace {

// Two replicas on two threads: each sum() publishes its values, waits for the other, and adds
// both in a fixed order (replica 0 first), so both get the same bits.
struct PairSum {
  std::barrier<> meet{2};
  std::vector<float> slot[2];
};

class PairReducer final : public ReplicaReducer {
 public:
  PairReducer(PairSum& shared, int id) : shared_(shared), id_(id) {}
  int replicas() const override { return 2; }
  void sum(float* x, int64_t n) override {
    ++calls;
    shared_.slot[id_].assign(x, x + n);
    shared_.meet.arrive_and_wait();
    for (int64_t i = 0; i < n; ++i) x[i] = shared_.slot[0][size_t(i)] + shared_.slot[1][size_t(i)];
    shared_.meet.arrive_and_wait();  // both have read before either writes its slot again
  }
  int calls = 0;

 private:
  PairSum& shared_;
  int id_;
};

struct Result {
  std::vector<float> y, dx, grads, state;
};

// One training forward and backward of BatchNorm(c, sync) on `batch` samples of x and dy.
Result run(bool sync, ReplicaReducer* reducer, const Shape& shape, int64_t batch,
           const std::vector<float>& params, const float* x, const float* dy) {
  BatchNorm layer(shape[0], 1e-5f, 0.1f, sync);
  layer.build(shape);
  const int64_t n = numel(shape) * batch;
  Result r{std::vector<float>(size_t(n)), std::vector<float>(size_t(n)),
           std::vector<float>(params.size()), std::vector<float>(size_t(layer.num_state()))};
  std::vector<float> p = params;
  layer.bind(p.data(), r.grads.data());
  layer.bind_state(r.state.data());
  layer.init_state(cpu_backend());
  Context ctx = testing::make_context(true);
  ctx.reducer = reducer;
  layer.forward(ctx, x, r.y.data(), batch);
  layer.backward(ctx, x, r.y.data(), dy, r.dx.data(), batch);
  return r;
}

void expect_near(const char* what, const float* got, const float* want, size_t n, float tol) {
  for (size_t i = 0; i < n; ++i) EXPECT_NEAR(got[i], want[i], tol) << what << "[" << i << "]";
}

TEST(SyncBatchNorm, TwoReplicasEqualOneBatchNormOverTheWholeBatch) {
  const Shape shape{3, 2, 3};  // BatchNorm2d, 3 channels
  const int64_t per = numel(shape), first = 2, second = 4, batch = first + second;
  // Unequal parts, and a large mean, which the two-pass statistics must handle.
  const auto x = testing::random_vector(batch * per, 71, 4.0f, 6.0f);
  const auto dy = testing::random_vector(batch * per, 72);
  const auto params = testing::random_vector(2 * shape[0], 73, 0.5f, 1.5f);

  const Result whole = run(false, nullptr, shape, batch, params, x.data(), dy.data());
  PairSum shared;
  PairReducer r0(shared, 0), r1(shared, 1);
  Result part[2];
  std::thread t([&] {
    part[1] =
        run(true, &r1, shape, second, params, x.data() + first * per, dy.data() + first * per);
  });
  part[0] = run(true, &r0, shape, first, params, x.data(), dy.data());
  t.join();

  // Forward: the mean with its count, then the squared deviations; backward: the two sums.
  EXPECT_EQ(r0.calls, 3);
  EXPECT_EQ(r1.calls, 3);
  const size_t a = size_t(first * per), b = size_t(second * per);
  expect_near("y[0]", part[0].y.data(), whole.y.data(), a, 2e-5f);
  expect_near("y[1]", part[1].y.data(), whole.y.data() + a, b, 2e-5f);
  expect_near("dx[0]", part[0].dx.data(), whole.dx.data(), a, 2e-5f);
  expect_near("dx[1]", part[1].dx.data(), whole.dx.data() + a, b, 2e-5f);
  // Parameter gradients stay per replica; the sync strategy sums them like any gradient.
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_NEAR(part[0].grads[i] + part[1].grads[i], whole.grads[i], 2e-5f) << i;
  // Both replicas keep the running statistics of the whole batch.
  expect_near("state[0]", part[0].state.data(), whole.state.data(), whole.state.size(), 1e-5f);
  EXPECT_EQ(part[0].state, part[1].state);
}

// Without sync the reducer is not used, and each replica normalises by its own batch.
TEST(SyncBatchNorm, UnsyncedLayerIgnoresTheReducer) {
  const Shape shape{2, 2, 2};
  const auto x = testing::random_vector(3 * 8, 74), dy = testing::random_vector(3 * 8, 75);
  const std::vector<float> params{1, 1, 0, 0};
  PairSum shared;
  PairReducer r0(shared, 0);
  const Result with = run(false, &r0, shape, 3, params, x.data(), dy.data());
  const Result without = run(false, nullptr, shape, 3, params, x.data(), dy.data());
  EXPECT_EQ(r0.calls, 0);
  EXPECT_EQ(with.y, without.y);
  EXPECT_EQ(with.dx, without.dx);
}

}  // namespace
}  // namespace loom::nn
