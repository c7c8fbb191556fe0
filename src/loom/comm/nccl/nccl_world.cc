#include "loom/comm/nccl/nccl_world.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "loom/comm/nccl/nccl_communicator.h"
#include "loom/core/error.h"
#include "loom/tensor/cuda/cuda_backend.h"

namespace loom::comm {
namespace {

// The node-local rank a launcher gives an MPI rank; -1 when it says nothing.
int launcher_local_rank() {
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}) {
    if (const char* v = std::getenv(var)) return std::atoi(v);
  }
  return -1;
}

int launcher_local_size() {
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"}) {
    if (const char* v = std::getenv(var)) return std::atoi(v);
  }
  return -1;
}

class NcclWorld final : public World {
 public:
  NcclWorld(std::unique_ptr<World> bootstrap, const CommOptions& options, int devices)
      : boot_(std::move(bootstrap)), options_(options), slots_(size_t(boot_->local_size())) {
    const bool launched = boot_->transport() != "thread";
    const int local_workers = launched ? std::max(1, launcher_local_size()) : boot_->local_size();
    if (local_workers > devices)
      throw ConfigError(fmt::format(
          "transport 'nccl': {} workers on this machine but {} GPU{}: NCCL needs one GPU per "
          "worker (it refuses two ranks on one device); use at most {} workers here",
          local_workers, devices, devices == 1 ? "" : "s", devices));
    for (int i = 0; i < boot_->local_size(); ++i) {
      int dev = i;
      if (launched) {
        const int lr = launcher_local_rank();
        dev = lr >= 0 ? lr : boot_->local(i).rank() % devices;
      }
      slots_[size_t(i)].device = dev;
    }
  }

  std::string transport() const override { return "nccl"; }
  int size() const override { return boot_->size(); }
  int local_size() const override { return boot_->local_size(); }
  Communicator& local(int i) override { return boot_->local(i); }

  void run(const std::function<void(Communicator&)>& fn) override {
    boot_->run([&](Communicator& boot) {
      Slot& slot = slots_[size_t(local_index(boot))];
      if (!slot.comm) {
        slot.backend = std::make_unique<CudaBackend>(slot.device);
        slot.comm = std::make_unique<NcclCommunicator>(boot, *slot.backend, options_);
      }
      fn(*slot.comm);
    });
  }

 private:
  struct Slot {
    int device = 0;
    std::unique_ptr<CudaBackend> backend;  // declared first: the communicator goes first
    std::unique_ptr<NcclCommunicator> comm;
  };

  int local_index(const Communicator& boot) {
    for (int i = 0; i < boot_->local_size(); ++i)
      if (&boot_->local(i) == &boot) return i;
    LOOM_CHECK(false, "nccl world: rank {} is not a worker of this process", boot.rank());
    return 0;
  }

  std::unique_ptr<World> boot_;
  CommOptions options_;
  std::vector<Slot> slots_;
};

}  // namespace

int nccl_device_count(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) *why = cudaGetErrorString(e);
    (void)cudaGetLastError();
    return 0;
  }
  if (n == 0 && why) *why = "the driver reports no device";
  return n;
}

std::unique_ptr<World> make_nccl_world(std::unique_ptr<World> bootstrap,
                                       const CommOptions& options) {
  std::string why;
  const int devices = nccl_device_count(&why);
  if (devices == 0)
    throw ConfigError(fmt::format("transport 'nccl': no CUDA device found ({})", why));
  return std::make_unique<NcclWorld>(std::move(bootstrap), options, devices);
}

}  // namespace loom::comm
