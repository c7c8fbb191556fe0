// The NCCL communicator on one GPU (world size 1 over a one-rank thread bootstrap; NCCL needs a
// GPU per rank, so more ranks need a multi-GPU machine): every collective leaves a device
// buffer as the contract says, point-to-point to self delivers, a dropped request is cancelled,
// and a host-function Reducer is a CommError. Every device buffer has a canary past its end.
// Built when NCCL is found (cmake/cuda.cmake); skipped without a GPU (failed under
// LOOM_GPU_REQUIRED=1). Several ranks on one GPU: multi_rank_checks.cc.
#include <gtest/gtest.h>

#include "loom/comm/nccl/nccl_communicator.h"
#include "loom/comm/nccl/nccl_world.h"
#include "loom/comm/thread/thread_world.h"
#include "loom/comm/transport_registry.h"
#include "loom/compress/device_codec_registry.h"
#include "loom/compress/registry.h"
#include "loom/sync/allreduce/device_compressed_allreduce.h"
#include "tensor_cuda/gpu_compare.h"

namespace loom::test {
namespace {

void add_ints(void* acc, const void* in, size_t count) {
  for (size_t i = 0; i < count; ++i) static_cast<int*>(acc)[i] += static_cast<const int*>(in)[i];
}

TEST(Nccl, OneRankCollectivesAndSelfMessages) {
  LOOM_REQUIRE_GPU();
  auto& be = static_cast<CudaBackend&>(*Gpu::get().backend);
  comm::ThreadWorld world(1);
  world.run([&](comm::Communicator& boot) {
    comm::NcclCommunicator nccl(boot, be);
    EXPECT_EQ(nccl.size(), 1);
    EXPECT_EQ(nccl.name(), "nccl");
    const auto host = random_floats(1001, 70);
    auto d = upload_guarded(be, host);
    std::span<float> span(d.data(), host.size());
    nccl.allreduce(span);
    EXPECT_BITS_EQ(download(be, d, host.size()), host);  // the sum over one rank
    nccl.reduce_scatter(span);
    nccl.allgather(span);
    nccl.broadcast(span, 0);
    nccl.barrier();
    EXPECT_BITS_EQ(download(be, d, host.size()), host);
    EXPECT_CANARY(be, d, host.size());

    auto got = guarded<float>(be, 1001);
    comm::Request reqs[2] = {nccl.irecv(0, got.data(), 1001 * sizeof(float), 3),
                             nccl.isend(0, d.data(), 1001 * sizeof(float), 3)};
    nccl.wait_all(reqs);
    EXPECT_BITS_EQ(download(be, got, 1001), host);
    EXPECT_CANARY(be, got, 1001);

    EXPECT_THROW(nccl.allreduce(d.data(), 1000 * sizeof(int), comm::Reducer{sizeof(int), add_ints}),
                 CommError);
    EXPECT_CANARY(be, d, host.size());
  });
}

TEST(Nccl, HostBuffersAreStagedThroughTheDevice) {
  LOOM_REQUIRE_GPU();
  auto& be = static_cast<CudaBackend&>(*Gpu::get().backend);
  comm::ThreadWorld world(1);
  world.run([&](comm::Communicator& boot) {
    comm::NcclCommunicator nccl(boot, be);
    std::vector<double> sums = {1.5, -2.25, 1e300};
    const std::vector<double> want = sums;
    nccl.allreduce(sums.data(), sums.size() * sizeof(double), comm::sum_f64());
    EXPECT_EQ(sums, want);
    auto host = random_floats(333, 71);
    const auto copy = host;
    nccl.broadcast(std::span<float>(host), 0);
    nccl.allgather(std::span<float>(host));
    EXPECT_BITS_EQ(host, copy);
    std::vector<float> got(333, 0.0f);
    comm::Request reqs[2] = {nccl.irecv(0, got.data(), 333 * sizeof(float), 1),
                             nccl.isend(0, host.data(), 333 * sizeof(float), 1)};
    nccl.wait_all(reqs);
    EXPECT_BITS_EQ(got, host);
  });
}

TEST(Nccl, RegistryWorldGivesDeviceCommunicators) {
  LOOM_REQUIRE_GPU();
  auto world = comm::create_world("nccl", 1, comm::CommOptions{});
  EXPECT_EQ(world->transport(), "nccl");
  EXPECT_EQ(world->size(), 1);
  int runs = 0;
  for (int k = 0; k < 2; ++k) {  // the second run reuses the first's communicator
    world->run([&](comm::Communicator& c) {
      EXPECT_EQ(c.name(), "nccl");
      Backend* be = comm::device_backend(c);
      ASSERT_NE(be, nullptr);
      EXPECT_EQ(be->device(), Device::kCuda);
      const auto host = random_floats(4097, 72);
      auto d = upload_guarded(*be, host);
      c.allreduce(std::span<float>(d.data(), host.size()));
      EXPECT_BITS_EQ(download(*be, d, host.size()), host);
      EXPECT_CANARY(*be, d, host.size());
      ++runs;
    });
  }
  EXPECT_EQ(runs, 2);
  std::string why;
  const int gpus = comm::nccl_device_count(&why);
  try {
    comm::create_world("nccl", gpus + 1, comm::CommOptions{});
    ADD_FAILURE() << "more workers than GPUs was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("one GPU per worker"), std::string::npos) << e.what();
  }
}

// A request dropped before wait() is withdrawn: the next flush (any collective, or a later
// wait) must not launch it on memory its owner freed. One dropped after launch is waited out.
TEST(Nccl, DroppedRequestsAreCancelled) {
  LOOM_REQUIRE_GPU();
  auto& be = static_cast<CudaBackend&>(*Gpu::get().backend);
  comm::ThreadWorld world(1);
  world.run([&](comm::Communicator& boot) {
    comm::NcclCommunicator nccl(boot, be);
    const auto host = random_floats(513, 73);
    auto src = upload_guarded(be, host);
    auto dst = guarded<float>(be, 513);
    {
      comm::Request recv = nccl.irecv(0, dst.data(), 513 * sizeof(float), 4);
      comm::Request send = nccl.isend(0, src.data(), 513 * sizeof(float), 4);
    }                // both dropped unlaunched
    nccl.barrier();  // flushes whatever is still pending
    auto d = upload_guarded(be, host);
    nccl.allreduce(std::span<float>(d.data(), host.size()));
    EXPECT_BITS_EQ(download(be, dst, 513), std::vector<float>(513, 0.0f));  // never delivered
    EXPECT_BITS_EQ(download(be, d, host.size()), host);

    {
      comm::Request pair[2] = {nccl.irecv(0, dst.data(), 513 * sizeof(float), 5),
                               nccl.isend(0, src.data(), 513 * sizeof(float), 5)};
      nccl.wait(pair[0]);  // launches both; the send is dropped launched
    }
    EXPECT_BITS_EQ(download(be, dst, 513), host);
    nccl.barrier();
    EXPECT_CANARY(be, src, 513);
    EXPECT_CANARY(be, dst, 513);
    EXPECT_CANARY(be, d, host.size());
  });
}

// Over one rank the compressed allreduce is decode(encode(g + r)): the host codec's bytes and
// residual, bit for bit, for every codec with device kernels, two steps (error feedback).
TEST(Nccl, DeviceCompressedAllreduceMatchesTheHostCodec) {
  LOOM_REQUIRE_GPU();
  auto& be = static_cast<CudaBackend&>(*Gpu::get().backend);
  comm::ThreadWorld world(1);
  world.run([&](comm::Communicator& boot) {
    comm::NcclCommunicator nccl(boot, be);
    for (const std::string name : {"fp16", "bf16", "int8", "onebit", "topk"}) {
      SCOPED_TRACE(name);
      auto codec = compress::make_codec(name);
      codec->set_residual_format(compress::ResidualFormat::kF32);  // as the device keeps it
      auto dev = compress::make_device_codec(*codec, be);
      ASSERT_NE(dev, nullptr);
      const size_t n = 70001;
      auto st = sync::make_device_allreduce_state(*dev, be, n, 1, 0, "bucket 0");
      // The state's buffers again, each with a canary past the end.
      st.residual = guarded<float>(be, n);
      st.gather = guarded<uint8_t>(be, st.slot_bytes);
      auto host_state = codec->make_state(n, "bucket 0");
      std::vector<std::byte> packed(codec->encoded_bytes(n));
      for (int step = 0; step < 2; ++step) {
        const auto g = random_floats(n, 80 + step);
        std::vector<float> want(n);
        codec->encode(g, host_state, packed);
        codec->decode(packed, want, compress::DecodeMode::kWrite);
        auto d = upload_guarded(be, g);
        sync::device_compressed_allreduce(nccl, *dev, be, d.data(), st);
        EXPECT_NO_THROW(sync::check_device_codec_finite(*dev, "bucket 0"));
        EXPECT_BITS_EQ(download(be, d, n), want);
        EXPECT_BITS_EQ(download(be, st.residual, n),
                       std::vector<float>(host_state.residual.begin(), host_state.residual.end()));
        EXPECT_CANARY(be, d, n);
        EXPECT_CANARY(be, st.residual, n);
        EXPECT_CANARY(be, st.gather, st.slot_bytes);
      }
    }
    if (compress::make_device_codec(*compress::make_codec("powersgd"), be) != nullptr)
      ADD_FAILURE() << "powersgd has no device kernels";
  });
}

}  // namespace
}  // namespace loom::test
