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
top-k sums by all-gathering every rank's encoding, and so does 1-bit at two ranks unless told
otherwise, as loom's training does (``aggregation``: the same bytes, each value quantised once
instead of twice). PowerSGD (``codec="powersgd"``, rank,
error feedback and warm start per bucket) runs loom's power step on each of the bucket's
parameter matrices, its factors P and Q summed over ranks in rank order (point-to-point, as a
reduce-scatter and all-gather).

On CPU buckets the hook is asynchronous: it returns a Future at once and one background thread
per hook runs the buckets' exchanges in the order DDP hands them over (the same on every rank),
so the exchange of one bucket overlaps the rest of the backward pass and the next buckets'
hooks (docs/python.md explains why a thread and not chained futures).
"""

import queue
import threading
import weakref
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.distributed as dist

from . import _loom
from . import codecs as _codecs

SUPPORTED_BACKENDS = ("gloo", "nccl", "mpi")
# Point-to-point tags of the stages (a message of one stage can never match another's receive):
# the two byte exchanges of the stripes and gather codecs, and the two halves of PowerSGD's
# float sums of P and Q.
STAGE1_TAG, STAGE2_TAG, P_SCATTER_TAG, Q_SCATTER_TAG = 1, 2, 3, 5  # gathers: + 1
# A bucket's rounds have tags of their own (tag_of): rounds of different buckets may be in
# flight together.
TAGS_PER_BUCKET = 8


def check_backend(backend: str) -> None:
    """ValueError unless ``backend`` is a process-group backend the hook moves bytes over."""
    if str(backend).lower() not in SUPPORTED_BACKENDS:
        raise ValueError(f"loom.torch.comm_hook: process group backend {backend!r} is not "
                         f"supported (one of: {', '.join(SUPPORTED_BACKENDS)})")


class CommHook:
    """The hook (callable as ``hook(state, bucket)``) and its per-bucket loom state."""

    def __init__(self, codec: str, process_group=None, record: bool = False,
                 asynchronous: bool = True, warmup_steps: int = 0, aggregation: str = "auto",
                 **params):
        # DDP names the hook in its logs (and checks the name of its own bf16 hooks)
        self.__name__ = self.__qualname__ = f"loom_{codec}_hook"
        self.codec = _codecs.get(codec, **params)
        self.group = process_group
        check_backend(dist.get_backend(process_group))
        self.world = dist.get_world_size(process_group)
        self.rank = dist.get_rank(process_group)
        #: How each bucket's sum is formed (loom's codec.aggregation): "auto" does what loom's
        #: training does at this world size (1-bit all-gathers at two ranks, quantising each
        #: value once instead of twice); "stripes" or "gather" asks for one.
        self.aggregation = aggregation
        # An aggregation the codec can't be summed by is a ValueError now, not at the first bucket.
        _loom.Stages(self.codec._impl, 0, self.world, self.rank, "check", [], aggregation)
        self._stages: Dict[int, _loom.Stages] = {}
        self._matrices: Dict[int, Tuple[Tuple[int, int], ...]] = {}
        #: Bytes this rank sent, over all calls (stage 1 sends plus a ring all-gather's share).
        self.bytes_sent = 0
        #: With record=True: (bucket index, input after the division, output, the matrices
        #: PowerSGD took the bucket as) per call.
        self.record = record
        self.calls: List[Tuple[int, np.ndarray, np.ndarray, Tuple[Tuple[int, int], ...]]] = []
        #: False: every bucket is summed inside the hook's call (DDP's backward waits for it).
        self.asynchronous = bool(asynchronous)
        if not isinstance(warmup_steps, int) or warmup_steps < 0:
            raise ValueError(f"loom.torch.comm_hook: warmup_steps must be an integer >= 0, "
                             f"not {warmup_steps!r}")
        #: Steps (counted at each call on bucket 0, which DDP hands over first) whose buckets
        #: are summed exactly in fp32; the codec starts after them, with zero residuals, as
        #: loom's codec.warmup_steps does.
        self.warmup_steps = warmup_steps
        self.steps = 0
        self._count_lock = threading.Lock()
        self._jobs: Optional["queue.SimpleQueue[Any]"] = None
        self._thread: Optional[threading.Thread] = None

    def stages(self, index: int, n: int,
               matrices: Sequence[Tuple[int, int]] = ()) -> _loom.Stages:
        st = self._stages.get(index)
        matrices = tuple((int(r), int(c)) for r, c in matrices)
        # DDP rebuilds its buckets after the first iteration; a bucket whose size (or, for
        # PowerSGD, whose matrices) changed starts over with zero residuals.
        if st is None or st.n != n or self._matrices.get(index) != matrices:
            st = _loom.Stages(self.codec._impl, n, self.world, self.rank, bucket_name(index),
                              list(matrices), self.aggregation)
            self._stages[index] = st
            self._matrices[index] = matrices
        return st

    def allreduce(self, flat: np.ndarray, index: int = 0,
                  matrices: Sequence[Tuple[int, int]] = ()) -> None:
        """In place: flat (1-D, C-contiguous float32) becomes loom's compressed sum over the
        group's ranks. ``matrices`` (PowerSGD only): the bucket's matrices (rows, cols) end to
        end; empty, the codec's default view of a flat bucket. Waits for the buckets the hook
        has in flight first (every rank must make its direct calls at the same point)."""
        check_flat(flat)
        self.flush()
        _finish(self._rounds(flat, index, matrices))

    def exact_sum(self, flat: np.ndarray, index: int = 0) -> None:
        """In place: flat (as for allreduce) becomes its fp32 sum over the group's ranks,
        added in rank order, the same bits on every rank (a warm-up step's exchange)."""
        check_flat(flat)
        self.flush()
        _finish(self._sum(flat, index, P_SCATTER_TAG))

    def flush(self) -> None:
        """Returns once every bucket handed to the hook so far has been summed."""
        jobs = self._jobs
        if jobs is None or threading.current_thread() is self._thread:
            return
        done = threading.Event()
        jobs.put(done.set)
        done.wait()

    def _rounds(self, flat: np.ndarray, index: int,
                matrices: Sequence[Tuple[int, int]]) -> Iterator[List[Any]]:
        """loom's compressed allreduce of one bucket as a sequence of rounds: each ``yield``
        hands over the requests (isend/irecv) just posted, which the caller waits for before
        resuming; the first round is posted by the first ``next``. Every message carries the
        bucket's own tag per round, so rounds of different buckets in flight never match each
        other's receives."""
        st = self.stages(index, flat.size, matrices)
        if st.aggregation == "linear":
            yield from self._sum(st.encode(flat), index, P_SCATTER_TAG)  # P
            yield from self._sum(st.reduce(), index, Q_SCATTER_TAG)  # Q, from orthonormal P
            st.decode(flat)
            return
        st.encode(flat)
        E, N, me = st.slot_bytes, self.world, self.rank
        if E == 0:
            return
        if st.aggregation == "stripes":
            send, recv = torch.from_numpy(st.send), torch.from_numpy(st.recv)
            mine = st.stripe_bytes(me)
            yield self._post(
                [(i, recv[i * E:i * E + mine]) for i in range(N) if i != me and mine > 0],
                [(j, send[j * E:j * E + st.stripe_bytes(j)]) for j in range(N)
                 if j != me and st.stripe_bytes(j) > 0], tag_of(index, STAGE1_TAG))
            st.reduce()
        # Stage 2, the all-gather of the owners' encodings, is point-to-point as well: every
        # owner sends its slot to every other rank, (N-1) E bytes per rank as in a ring
        # all-gather. Not dist.all_gather: gloo runs its collectives on worker threads, and a
        # worker that drops the last reference to a finished all-gather (whose tensors were
        # made here in Python) must take the GIL to free them. When the process group is then
        # destroyed from Python (DDP's Reducer holds it, so this happens when the DDP module
        # is freed, GIL held), ~ProcessGroupGloo joins that worker while holding the GIL and
        # both wait forever (pytorch/pytorch#56297), the intermittent hang at the end of a
        # run. isend/irecv are posted from Python and their Work objects are freed in Python,
        # with the GIL, so no gloo thread ever holds one of these tensors.
        gather = torch.from_numpy(st.gather)
        slots = [gather[i * E:(i + 1) * E] for i in range(N)]
        yield self._post([(i, slots[i]) for i in range(N) if i != me],
                         [(j, slots[me]) for j in range(N) if j != me],
                         tag_of(index, STAGE2_TAG))
        st.decode(flat)

    def _post(self, recvs, sends, tag: int) -> List[Any]:
        """Posts every receive, then every send; returns their requests."""
        reqs = [dist.irecv(t, src=i, group=self.group, tag=tag) for i, t in recvs]
        sent = 0
        for j, t in sends:
            reqs.append(dist.isend(t, dst=j, group=self.group, tag=tag))
            sent += t.numel() * t.element_size()
        with self._count_lock:  # posted from the caller's thread and the hook's thread
            self.bytes_sent += sent
        return reqs

    def _sum(self, v: np.ndarray, index: int, tag: int) -> Iterator[List[Any]]:
        """In place, in two rounds: v (float32) becomes its sum over ranks, the same bits on
        every rank. Rank j owns elements [L j / N, L (j+1) / N): every rank sends it that part
        (tag), j adds the N parts in rank order and sends the sum to every rank (tag + 1),
        2 (N-1)/N of v's bytes per rank as a ring allreduce. Point-to-point, not
        dist.all_reduce, for the reason given in _rounds (no gloo worker thread may hold
        these tensors)."""
        N, me, L = self.world, self.rank, v.size
        if N == 1 or L == 0:
            return
        bound = [L * j // N for j in range(N + 1)]
        t = torch.from_numpy(v)
        part = [t[bound[j]:bound[j + 1]] for j in range(N)]
        parts = np.empty((N, bound[me + 1] - bound[me]), dtype=np.float32)
        yield self._post([(i, torch.from_numpy(parts[i])) for i in range(N)
                          if i != me and parts.shape[1] > 0],
                         [(j, part[j]) for j in range(N) if j != me and part[j].numel() > 0],
                         tag_of(index, tag))
        parts[me] = v[bound[me]:bound[me + 1]]
        total = parts[0].copy()
        for i in range(1, N):
            total += parts[i]
        v[bound[me]:bound[me + 1]] = total
        yield self._post([(i, part[i]) for i in range(N) if i != me and part[i].numel() > 0],
                         [(j, part[me]) for j in range(N) if j != me and part[me].numel() > 0],
                         tag_of(index, tag + 1))

    def __call__(self, state: Any, bucket) -> torch.futures.Future[torch.Tensor]:
        buf = bucket.buffer()
        if buf.dtype != torch.float32:
            raise ValueError(f"loom.torch: a bucket of {buf.dtype}, loom's codecs take float32")
        index = bucket.index()
        if index == 0:
            self.steps += 1
        matrices = bucket_matrices(bucket) if self.codec.aggregation == "linear" else ()
        fut: torch.futures.Future[torch.Tensor] = torch.futures.Future()
        rounds = self._bucket(buf, index, matrices, fut, self.steps <= self.warmup_steps)
        if not (self.asynchronous and self.world > 1 and buf.device.type == "cpu"):
            # One rank moves nothing; a CUDA bucket is copied to the host on the caller's
            # stream, which a background thread does not share.
            _finish(rounds)
            return fut
        # The first round (division, encode, the first sends and receives) is posted here,
        # so that it goes out the moment the bucket is ready whatever the hook's thread is
        # waiting for; that thread waits for the rounds and runs the rest.
        try:
            reqs = next(rounds)
        except StopIteration:
            return fut
        self._submit((rounds, reqs))
        return fut

    def _bucket(self, buf: torch.Tensor, index: int, matrices, fut,
                exact: bool = False) -> Iterator[List[Any]]:
        """Sums one DDP bucket in place in rounds (see _rounds; with ``exact``, a warm-up
        step's fp32 sum) and completes ``fut`` with it, or with the error."""
        try:
            host = buf.detach() if buf.device.type == "cpu" else buf.detach().cpu()
            flat = host.numpy()
            np.divide(flat, np.float32(self.world), out=flat)
            before = flat.copy() if self.record else None
            if exact:
                yield from self._sum(flat, index, P_SCATTER_TAG)
            else:
                yield from self._rounds(flat, index, matrices)
            if self.record:
                self.calls.append((index, before, flat.copy(), tuple(matrices)))
            if host.data_ptr() != buf.data_ptr():
                buf.copy_(host)
        except BaseException as e:  # DDP's backward raises it when it waits for the bucket
            fut.set_exception(e)
            return
        fut.set_result(buf)

    def _submit(self, job) -> None:
        if self._jobs is None:
            # The thread holds the queue, not the hook: a job holds the hook only while it
            # runs, and when the hook is freed the finalizer's None stops the thread. A daemon,
            # so that an interpreter exiting with a peer gone is not kept waiting on a receive.
            self._jobs = queue.SimpleQueue()
            self._thread = threading.Thread(target=_run_jobs, args=(self._jobs,),
                                            name=f"loom_{self.codec.name}_hook", daemon=True)
            self._thread.start()
            weakref.finalize(self, self._jobs.put, None)
        self._jobs.put(job)


def tag_of(index: int, stage: int) -> int:
    """The point-to-point tag of one round of bucket ``index``."""
    return TAGS_PER_BUCKET * index + stage


def _finish(rounds: Iterator[List[Any]], reqs: Optional[List[Any]] = None) -> None:
    """Runs a bucket's rounds to the end: waits for each round's requests, then resumes it. An
    error while waiting is raised inside the rounds (a hook's bucket completes its future
    with it)."""
    try:
        if reqs is None:
            reqs = next(rounds)
        while True:
            try:
                for r in reqs:
                    r.wait()
            except BaseException as e:
                reqs = rounds.throw(e)
            else:
                reqs = next(rounds)
    except StopIteration:
        pass


def _run_jobs(jobs: "queue.SimpleQueue[Any]") -> None:
    """The hook's background thread, until it takes None: runs each bucket's rounds to the
    end, one bucket after the other in the order DDP handed them over, which is the same on
    every rank (so every rank waits for the same rounds in the same order, and a round is
    posted after nothing but earlier rounds of that sequence: no rank can wait for one that
    another rank has not posted). A callable job (flush) is called. Each job is dropped here,
    with the GIL, so the tensors it held are freed on this thread and never on one of gloo's
    (see CommHook._rounds)."""
    while True:
        job = jobs.get()
        if job is None:
            return
        if callable(job):
            job()
        else:
            _finish(*job)
        del job


def bucket_name(index: int) -> str:
    """The name of the hook's state for bucket ``index`` (in error messages; PowerSGD draws
    its first Q from it, the same on every rank)."""
    return f"bucket {index}"


def check_flat(flat: Any) -> None:
    """ValueError unless ``flat`` is a 1-D, C-contiguous float32 NumPy array (the hook reads
    and writes it in place; a conversion would hand back other memory than the caller's)."""
    if not isinstance(flat, np.ndarray):
        raise ValueError(f"loom.torch: a bucket must be a NumPy float32 array, not "
                         f"{type(flat).__name__}")
    if flat.dtype != np.float32:
        raise ValueError(f"loom.torch: a bucket of {flat.dtype}; loom's codecs take float32 "
                         f"(convert the model with .float())")
    if flat.ndim != 1:
        raise ValueError(f"loom.torch: a bucket of shape {flat.shape}; it must be flat (1-D)")
    if not flat.flags.c_contiguous or not flat.flags.writeable:
        raise ValueError("loom.torch: a bucket must be C-contiguous and writable (the sum is "
                         "written in place)")


def bucket_matrices(bucket) -> List[Tuple[int, int]]:
    """The bucket's parameter matrices end to end as PowerSGD takes them (as loom's trainer
    does, compress/codec.h): a weight of shape (out, ...) as [out, prod(rest)], a bias or any
    1-D parameter of c elements as [1, c]."""
    out = []
    for g in bucket.gradients():
        shape = tuple(g.shape)
        if len(shape) >= 2:
            out.append((shape[0], int(np.prod(shape[1:]))))
        elif g.numel() > 0:
            out.append((1, g.numel()))
    return out


def comm_hook(codec: str = "fp16", process_group: Optional[Any] = None, record: bool = False,
              asynchronous: bool = True, warmup_steps: int = 0, aggregation: str = "auto",
              **params) -> CommHook:
    """A hook for ``DistributedDataParallel.register_comm_hook(None, hook)`` that averages
    gradients through loom's codec ``codec`` (params as in loom.codecs.get) and loom's
    compressed allreduce over ``process_group`` (default: the default group). With
    ``asynchronous`` (the default) a CPU bucket is summed on the hook's background thread
    while backward goes on; False sums it inside the call. The first ``warmup_steps`` steps
    are summed exactly in fp32 (loom's ``codec.warmup_steps``; the codec then starts with zero
    residuals). ``aggregation`` as loom's codec.aggregation: "auto" (1-bit all-gathers at two
    ranks, as loom's training does), "stripes" or "gather". An unknown codec or parameter, a
    negative ``warmup_steps``, an aggregation the codec can't be summed by, or a process group
    whose backend is not gloo, NCCL or MPI, raises ValueError."""
    return CommHook(codec, process_group, record, asynchronous, warmup_steps, aggregation,
                    **params)


def reference_allreduce(codec: "_codecs.Codec", world: int, n: int,
                        matrices: Sequence[Tuple[int, int]] = (),
                        index: int = 0, aggregation: str = "auto") -> _loom.ThreadAllreduce:
    """loom's own compressed_allreduce of n elements over ``world`` thread ranks in this
    process (its ``run([a_0, ..., a_{N-1}])`` sums in place), keeping its states across calls:
    what the hook's results are tested against. ``matrices``: PowerSGD's view of the bucket;
    ``index``: the hook's bucket index (PowerSGD's first Q is drawn from the bucket's name);
    ``aggregation`` as the hook's."""
    return _loom.ThreadAllreduce(codec._impl, world, n, [tuple(m) for m in matrices],
                                 bucket_name(index), aggregation)


# The optimizers that exchange through a CommHook of their own (torch_optimizers.py).
from .torch_optimizers import OnebitAdam, OnebitSGD  # noqa: E402,F401
