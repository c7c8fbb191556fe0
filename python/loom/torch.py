"""A PyTorch DistributedDataParallel communication hook that sends gradients through loom's
codecs and loom's two-stage compressed allreduce (docs/python.md, docs/compress.md).

    import loom.torch
    hook = loom.torch.comm_hook(codec="int8", block=512)
    ddp.register_comm_hook(None, hook)

Each bucket is divided by the world size (as DDP's default hook does, so the result is the
mean) and then summed over ranks by loom's algorithm: every rank encodes stripe j of the bucket
with its own error-feedback residual and sends it to rank j (point-to-point); rank j decodes
the N encodings, sums them in rank order, re-encodes the sum with its owner residual, and the
owners' encodings are all-gathered and decoded by everyone. The bytes each rank sends are
loom's own (Stages.wire_bytes); the codec work runs in loom's C++ with the GIL released, and
every rank ends with the same bits as ``compressed_allreduce`` over loom's thread transport.
top-k sums by all-gathering every rank's encoding; PowerSGD is not offered here.
"""

from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import torch
import torch.distributed as dist

from . import _loom
from . import codecs as _codecs

SUPPORTED_BACKENDS = ("gloo", "nccl", "mpi")


def check_backend(backend: str) -> None:
    """ValueError unless ``backend`` is a process-group backend the hook moves bytes over."""
    if str(backend).lower() not in SUPPORTED_BACKENDS:
        raise ValueError(f"loom.torch.comm_hook: process group backend {backend!r} is not "
                         f"supported (one of: {', '.join(SUPPORTED_BACKENDS)})")


class CommHook:
    """The hook (callable as ``hook(state, bucket)``) and its per-bucket loom state."""

    def __init__(self, codec: str, process_group=None, record: bool = False, **params):
        # DDP names the hook in its logs (and checks the name of its own bf16 hooks)
        self.__name__ = self.__qualname__ = f"loom_{codec}_hook"
        self.codec = _codecs.get(codec, **params)
        if self.codec.aggregation == "linear":
            raise ValueError(f"loom.torch.comm_hook: codec {codec} (low-rank factors) is not "
                             f"offered by the hook; use fp16, bf16, int8, onebit or topk")
        self.group = process_group
        check_backend(dist.get_backend(process_group))
        self.world = dist.get_world_size(process_group)
        self.rank = dist.get_rank(process_group)
        self._stages: Dict[int, _loom.Stages] = {}
        #: Bytes this rank sent, over all calls (stage 1 sends plus a ring all-gather's share).
        self.bytes_sent = 0
        #: With record=True: (bucket index, input after the division, output) per call.
        self.record = record
        self.calls: List[Tuple[int, np.ndarray, np.ndarray]] = []

    def stages(self, index: int, n: int) -> _loom.Stages:
        st = self._stages.get(index)
        # DDP rebuilds its buckets after the first iteration; a bucket whose size changed
        # starts over with zero residuals.
        if st is None or st.n != n:
            st = _loom.Stages(self.codec._impl, n, self.world, self.rank, f"bucket {index}")
            self._stages[index] = st
        return st

    def allreduce(self, flat: np.ndarray, index: int = 0) -> None:
        """In place: flat (float32) becomes loom's compressed sum over the group's ranks."""
        st = self.stages(index, flat.size)
        st.encode(flat)
        E, N, me = st.slot_bytes, self.world, self.rank
        if E == 0:
            return
        if st.aggregation == "stripes":
            send, recv = torch.from_numpy(st.send), torch.from_numpy(st.recv)
            mine = st.stripe_bytes(me)
            reqs = []
            for i in range(N):
                if i != me and mine > 0:
                    reqs.append(dist.irecv(recv[i * E:i * E + mine], src=i, group=self.group))
            for j in range(N):
                b = st.stripe_bytes(j)
                if j != me and b > 0:
                    reqs.append(dist.isend(send[j * E:j * E + b], dst=j, group=self.group))
                    self.bytes_sent += b
            for r in reqs:
                r.wait()
            st.reduce()
        gather = torch.from_numpy(st.gather)
        slots = [gather[i * E:(i + 1) * E] for i in range(N)]
        dist.all_gather(slots, slots[me].clone(), group=self.group)
        self.bytes_sent += (N - 1) * E
        st.decode(flat)

    def __call__(self, state: Any, bucket) -> torch.futures.Future[torch.Tensor]:
        buf = bucket.buffer()
        host = buf.detach() if buf.device.type == "cpu" else buf.detach().cpu()
        if host.dtype != torch.float32:
            raise ValueError(f"loom.torch.comm_hook: bucket of {host.dtype}, loom's codecs "
                             f"take float32")
        flat = host.numpy()
        np.divide(flat, np.float32(self.world), out=flat)
        before = flat.copy() if self.record else None
        self.allreduce(flat, bucket.index())
        if self.record:
            self.calls.append((bucket.index(), before, flat.copy()))
        if host.data_ptr() != buf.data_ptr():
            buf.copy_(host)
        fut: torch.futures.Future[torch.Tensor] = torch.futures.Future()
        fut.set_result(buf)
        return fut


def comm_hook(codec: str = "fp16", process_group: Optional[Any] = None, record: bool = False,
              **params) -> CommHook:
    """A hook for ``DistributedDataParallel.register_comm_hook(None, hook)`` that averages
    gradients through loom's codec ``codec`` (params as in loom.codecs.get) and loom's
    compressed allreduce over ``process_group`` (default: the default group). A process
    group whose backend is not gloo, NCCL or MPI, or the codec powersgd, raises ValueError."""
    return CommHook(codec, process_group, record, **params)


def reference_allreduce(codec: "_codecs.Codec", world: int, n: int) -> _loom.ThreadAllreduce:
    """loom's own compressed_allreduce of n elements over ``world`` thread ranks in this
    process (its ``run([a_0, ..., a_{N-1}])`` sums in place), keeping its states across calls:
    what the hook's results are tested against."""
    return _loom.ThreadAllreduce(codec._impl, world, n)
