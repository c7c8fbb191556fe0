// Device code at world sizes 2 and 3 on one GPU, through the cudaMemcpy stand-in communicator
// (device_thread_world.h; NCCL wants a GPU per rank): the device compressed allreduce equals
// the host codecs' decoded sum in rank order, bit for bit, residuals included; the allreduce
// strategy over device gradients (sharded or not, overlapped on the side stream or after
// backward, plain or through a codec) gives every rank the same parameters, those of the sum;
// and a NaN in one rank's gradient is caught at end_step. Every device buffer the tests own
// has a canary past its end. Skipped without a GPU (failed under LOOM_GPU_REQUIRED=1).
#include <gtest/gtest.h>

#include <limits>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "loom/compress/device_codec_registry.h"
#include "loom/compress/registry.h"
#include "loom/core/config.h"
#include "loom/nn/graph/model_zoo.h"
#include "loom/optim/optimizer.h"
#include "loom/plan/model_reader.h"
#include "loom/sync/allreduce/allreduce_strategy.h"
#include "loom/sync/allreduce/device_compressed_allreduce.h"
#include "tensor_cuda/device_thread_world.h"
#include "tensor_cuda/gpu_compare.h"

namespace loom::test {
namespace {

const char* const kDeviceCodecs[] = {"fp16", "bf16", "int8", "onebit", "topk"};

std::unique_ptr<compress::Codec> f32_residual_codec(const std::string& name) {
  auto codec = compress::make_codec(name);
  codec->set_residual_format(compress::ResidualFormat::kF32);  // as the device keeps it
  return codec;
}

// What the device path must produce for one bucket: each rank's encoding of its gradient plus
// its residual (states[r] carries the residual across steps), decoded and summed in rank
// order.
std::vector<float> host_decoded_sum(const compress::Codec& codec,
                                    const std::vector<std::vector<float>>& grads,
                                    std::vector<compress::CodecState>& states) {
  const size_t n = grads[0].size();
  std::vector<float> sum(n);
  std::vector<std::byte> packed(codec.encoded_bytes(n));
  for (size_t r = 0; r < grads.size(); ++r) {
    codec.encode(grads[r], states[r], packed);
    codec.decode(packed, sum,
                 r == 0 ? compress::DecodeMode::kWrite : compress::DecodeMode::kAccumulate);
  }
  return sum;
}

TEST(CudaMultiRank, DeviceCompressedAllreduceMatchesTheHostCodecs) {
  LOOM_REQUIRE_GPU();
  constexpr size_t n = 20001;
  constexpr int kSteps = 2;
  for (int world : {2, 3}) {
    for (const std::string name : kDeviceCodecs) {
      SCOPED_TRACE(name + ", world " + std::to_string(world));
      const auto codec = f32_residual_codec(name);
      // grads[step][rank], and the host's expected sums and residuals.
      std::vector<std::vector<std::vector<float>>> grads(kSteps);
      std::vector<std::vector<float>> want(kSteps);
      std::vector<std::vector<std::vector<float>>> want_residual(kSteps);
      std::vector<compress::CodecState> states;
      for (int r = 0; r < world; ++r) states.push_back(codec->make_state(n, "bucket 0"));
      for (int s = 0; s < kSteps; ++s) {
        for (int r = 0; r < world; ++r) grads[s].push_back(random_floats(n, 200 + 10 * s + r));
        want[s] = host_decoded_sum(*codec, grads[s], states);
        for (int r = 0; r < world; ++r)
          want_residual[s].emplace_back(states[size_t(r)].residual.begin(),
                                        states[size_t(r)].residual.end());
      }
      run_device_world(world, [&](comm::Communicator& c, CudaBackend& be) {
        const int r = c.rank();
        auto dev = compress::make_device_codec(*codec, be);
        ASSERT_NE(dev, nullptr);
        auto st = sync::make_device_allreduce_state(*dev, be, n, world, r, "bucket 0");
        st.residual = guarded<float>(be, n);
        st.gather = guarded<uint8_t>(be, st.slot_bytes * size_t(world));
        for (int s = 0; s < kSteps; ++s) {
          auto d = upload_guarded(be, grads[s][size_t(r)]);
          sync::device_compressed_allreduce(c, *dev, be, d.data(), st);
          EXPECT_NO_THROW(sync::check_device_codec_finite(*dev, "bucket 0"));
          EXPECT_BITS_EQ(download(be, d, n), want[s]);
          EXPECT_BITS_EQ(download(be, st.residual, n), want_residual[s][size_t(r)]);
          EXPECT_CANARY(be, d, n);
        }
        EXPECT_CANARY(be, st.residual, n);
        EXPECT_CANARY(be, st.gather, st.slot_bytes * size_t(world));
      });
    }
  }
}

struct StrategyCase {
  std::string label;
  sync::CombineWhere combine;
  bool shard;
  std::string codec;  // "" = plain fp32
};

// One step's gradients of every rank, drawn per (step, rank).
std::vector<float> step_grads(int64_t n, int step, int rank) {
  return random_floats(size_t(n), 300 + 10 * uint64_t(step) + uint64_t(rank), -0.5f, 0.5f);
}

const Config& tiny_mlp() {
  static const Config cfg =
      Config::from_string("model = \"mlp\"\nmlp.hidden = [64, 32]\nmlp.dropout = 0.0\n");
  return cfg;
}

// The strategy on `world` ranks for kSteps steps, each rank's gradients set directly (no
// forward pass: the test is the combine, not the model), from zero parameters with plain SGD at
// lr 1, so the parameters after each step are minus the running sum of the combined gradients.
// Returns every rank's parameters.
std::vector<std::vector<float>> run_strategy(int world, const StrategyCase& sc, int steps,
                                             std::vector<sync::Bucket>* buckets) {
  std::shared_ptr<const compress::Codec> codec;
  if (!sc.codec.empty()) codec = f32_residual_codec(sc.codec);
  std::vector<std::vector<float>> params(static_cast<size_t>(world));
  std::mutex mu;
  run_device_world(world, [&](comm::Communicator& c, CudaBackend& be) {
    auto model = nn::build_model(plan::read_model_spec(tiny_mlp()), be, {1, 8, 8}, 10);
    model->init_params(7);
    const int64_t n = model->num_params();
    optim::Sgd sgd(be, n, 0.0f, 0.0f, false);
    sync::AllreduceOptions opts;
    opts.bucket_bytes = 8 << 10;  // several buckets
    opts.combine = sc.combine;
    opts.shard_optimizer = sc.shard;
    opts.codec = codec;
    sync::AllreduceStrategy strategy(c, *model, sgd, opts);
    strategy.start();
    be.fill(model->params(), n, 0.0f);
    for (int s = 0; s < steps; ++s) {
      const auto g = step_grads(n, s, c.rank());
      be.copy_to_device(model->grads(), g.data(), g.size() * sizeof(float));
      strategy.begin_step(s, 1.0f);
      const auto& ranges = model->param_ranges();
      for (auto it = ranges.rbegin(); it != ranges.rend(); ++it) strategy.on_gradients_ready(*it);
      strategy.end_step();
    }
    std::vector<float> p(static_cast<size_t>(n));
    be.copy_to_host(p.data(), model->params(), p.size() * sizeof(float));
    std::lock_guard<std::mutex> lock(mu);
    params[size_t(c.rank())] = std::move(p);
    if (c.rank() == 0 && buckets) *buckets = strategy.buckets();
  });
  return params;
}

TEST(CudaMultiRank, AllreduceStrategyOverDeviceGradients) {
  LOOM_REQUIRE_GPU();
  constexpr int kSteps = 2;
  const StrategyCase cases[] = {
      {"fp32 sharded, overlapped", sync::CombineWhere::kThread, true, ""},
      {"fp32 sharded, after backward", sync::CombineWhere::kAfterBackward, true, ""},
      {"fp32 unsharded, overlapped", sync::CombineWhere::kThread, false, ""},
      {"int8, overlapped", sync::CombineWhere::kThread, false, "int8"},
      {"topk, inline", sync::CombineWhere::kInline, false, "topk"},
  };
  for (int world : {2, 3}) {
    for (const StrategyCase& sc : cases) {
      SCOPED_TRACE(sc.label + ", world " + std::to_string(world));
      std::vector<sync::Bucket> buckets;
      const auto got = run_strategy(world, sc, kSteps, &buckets);
      ASSERT_GT(buckets.size(), 1u);
      for (int r = 1; r < world; ++r) EXPECT_BITS_EQ(got[size_t(r)], got[0]);  // replicas agree
      // The host's parameters: minus the running sum of each step's combined gradients.
      const size_t n = got[0].size();
      std::vector<float> want(n, 0.0f);
      std::unique_ptr<compress::Codec> codec;
      if (!sc.codec.empty()) codec = f32_residual_codec(sc.codec);
      std::vector<std::vector<compress::CodecState>> states(buckets.size());
      for (size_t b = 0; b < buckets.size() && codec; ++b)
        for (int r = 0; r < world; ++r)
          states[b].push_back(codec->make_state(size_t(buckets[b].count), "bucket"));
      for (int s = 0; s < kSteps; ++s) {
        std::vector<std::vector<float>> g;
        for (int r = 0; r < world; ++r) g.push_back(step_grads(int64_t(n), s, r));
        for (size_t b = 0; b < buckets.size(); ++b) {
          const auto off = size_t(buckets[b].offset), cnt = size_t(buckets[b].count);
          std::vector<std::vector<float>> part;
          for (int r = 0; r < world; ++r)
            part.emplace_back(g[size_t(r)].begin() + off, g[size_t(r)].begin() + off + cnt);
          std::vector<float> sum;
          if (codec) {
            sum = host_decoded_sum(*codec, part, states[b]);
          } else {
            sum = part[0];
            for (int r = 1; r < world; ++r)
              for (size_t i = 0; i < cnt; ++i) sum[i] += part[size_t(r)][i];
          }
          for (size_t i = 0; i < cnt; ++i) want[off + i] -= sum[i];
        }
      }
      // The SGD kernel may fuse p - lr v into one FMA; with lr 1 that is the same rounding.
      EXPECT_NMSE_LE(got[0], want, kNmseElementwise);
    }
  }
}

TEST(CudaMultiRank, NanInOneRanksGradientIsCaughtAtEndStep) {
  LOOM_REQUIRE_GPU();
  const auto codec = std::shared_ptr<const compress::Codec>(f32_residual_codec("int8"));
  try {
    run_device_world(2, [&](comm::Communicator& c, CudaBackend& be) {
      auto model = nn::build_model(plan::read_model_spec(tiny_mlp()), be, {1, 8, 8}, 10);
      const int64_t n = model->num_params();
      optim::Sgd sgd(be, n, 0.0f, 0.0f, false);
      sync::AllreduceOptions opts;
      opts.bucket_bytes = 8 << 10;
      opts.codec = codec;
      sync::AllreduceStrategy strategy(c, *model, sgd, opts);
      strategy.start();
      auto g = step_grads(n, 0, c.rank());
      if (c.rank() == 1) g[size_t(n / 2)] = std::numeric_limits<float>::quiet_NaN();
      be.copy_to_device(model->grads(), g.data(), g.size() * sizeof(float));
      strategy.begin_step(0, 0.1f);
      const auto& ranges = model->param_ranges();
      for (auto it = ranges.rbegin(); it != ranges.rend(); ++it) strategy.on_gradients_ready(*it);
      strategy.end_step();  // rank 1 throws here, after every bucket's allgather
    });
    ADD_FAILURE() << "no error for a NaN gradient";
  } catch (const NumericError& e) {
    EXPECT_NE(std::string(e.what()).find("NaN or Inf"), std::string::npos) << e.what();
  }
}

// The stand-in itself, so a failure above is not its own: every collective at world 3 on
// guarded device buffers.
TEST(CudaMultiRank, StandInCollectives) {
  LOOM_REQUIRE_GPU();
  constexpr int world = 3;
  constexpr size_t n = 1000;  // not a multiple of 3: uneven blocks
  std::vector<std::vector<float>> in;
  for (int r = 0; r < world; ++r) in.push_back(random_floats(n, 400 + r));
  std::vector<float> sum = in[0];
  for (int r = 1; r < world; ++r)
    for (size_t i = 0; i < n; ++i) sum[i] += in[size_t(r)][i];
  run_device_world(world, [&](comm::Communicator& c, CudaBackend& be) {
    const int r = c.rank();
    auto d = upload_guarded(be, in[size_t(r)]);
    std::span<float> span(d.data(), n);
    c.allreduce(span);
    EXPECT_BITS_EQ(download(be, d, n), sum);
    be.copy_to_device(d.data(), in[size_t(r)].data(), n * sizeof(float));
    c.reduce_scatter(span);
    const comm::BlockRange mine = comm::block_range(n, world, r);
    const auto after = download(be, d, n);
    EXPECT_BITS_EQ(std::vector<float>(after.begin() + mine.begin, after.begin() + mine.end),
                   std::vector<float>(sum.begin() + mine.begin, sum.begin() + mine.end));
    c.allgather(span);
    EXPECT_BITS_EQ(download(be, d, n), sum);
    be.copy_to_device(d.data(), in[size_t(r)].data(), n * sizeof(float));
    c.broadcast(span, 2);
    EXPECT_BITS_EQ(download(be, d, n), in[2]);
    auto got = guarded<float>(be, n);
    comm::Request reqs[2] = {c.irecv((r + world - 1) % world, got.data(), n * sizeof(float), 1),
                             c.isend((r + 1) % world, d.data(), n * sizeof(float), 1)};
    c.wait_all(reqs);
    EXPECT_BITS_EQ(download(be, got, n), in[2]);
    c.barrier();
    EXPECT_CANARY(be, d, n);
    EXPECT_CANARY(be, got, n);
  });
}

}  // namespace
}  // namespace loom::test
