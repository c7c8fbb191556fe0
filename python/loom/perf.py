"""loom's performance model from Python: ``loom.scale`` and ``loom.advise`` run what ``loom
scale`` and ``loom advise`` run (perf::predict_scale, perf::advise) and return what their
``--json`` prints, as plain dicts. Keyword arguments are the commands' flags with dashes as
underscores; a flag that takes a list (``--codec fp32,int8``, ``--link 10gbe --link 100gbe``)
takes a list of strings here. docs/perf.md describes the model and its figures.

    loom.scale(workload="resnet50", gpu="a100-sxm4", nodes=4, codecs=["fp32", "int8"])
    loom.advise(model="configs/mlp.toml", budget=50_000, rank_by="capital")["ranked"][0]

Errors: an unknown workload, GPU, link or host, a bad value, or an unreadable catalog or
calibration file raise ValueError naming it.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional, Sequence, Union

from . import _loom

PathLike = Union[str, "os.PathLike[str]"]


def _list(v: Union[None, str, Sequence[str]]) -> Optional[List[str]]:
    if v is None:
        return None
    if isinstance(v, str):
        return [s for s in v.split(",") if s]
    return [str(s) for s in v]


def _paths(v: Union[None, PathLike, Sequence[PathLike]]) -> Optional[List[str]]:
    if v is None:
        return None
    if isinstance(v, (str, os.PathLike)):
        return [os.fspath(v)]
    return [os.fspath(p) for p in v]


def scale(workload: PathLike = "resnet50", *, gpu: str = "v100-sxm2", nodes: int = 1,
          gpus_per_node: int = 8, inter: str = "100gbe", intra: Optional[str] = None,
          nics: int = 1, oversubscription: float = 1.0, framework: str = "none",
          sync: str = "ring", servers: int = 1, tau: int = 8,
          codecs: Union[str, Sequence[str]] = "fp32", bucket_mb: float = 25.0,
          storage: str = "nvme4", overlap: bool = True, prefetch: bool = True,
          batch: int = 0, precision: str = "default", optimizer: str = "momentum",
          accumulate: int = 1, layout: str = "nhwc", derate: float = 0.0, catalog: Union[None, PathLike, Sequence[PathLike]] = None,
          calibration: Optional[PathLike] = None) -> List[Dict[str, Any]]:
    """``loom scale -w WORKLOAD ... --json``: one dict per (codec, GPU count) point, in the
    order the command prints them, with the keys of its JSON lines (series, gpus, nodes,
    step_s, samples_per_s, speedup, efficiency, compute_s, comm_s, exposed_s, ..., and the
    model's error band at that size: band, band_basis, slowest_software_samples_per_s and
    fastest_software_samples_per_s; band is None where the compute is measured or derated).

    ``workload`` is a reference workload (resnet50, vgg16, bert-large, ...) or a loom model
    config (.toml). ``overlap=False`` is ``--no-overlap``, ``prefetch=False`` ``--no-prefetch``,
    ``batch=0`` the workload's default batch per GPU, ``intra=None`` the GPU's own peer link.
    ``precision`` is fp32, tf32, default (what PyTorch does on the GPU: TF32 convolutions from
    Ampere on), bf16, fp16, mixed or fp8; ``accumulate`` the micro-batches per optimizer step;
    ``layout`` the activations' memory format, nhwc (channels-last) or nchw (PyTorch's default:
    tensor-core (16-bit and TF32) convolutions then pay cuDNN's transposes)."""
    opts = dict(workload=os.fspath(workload), gpu=gpu, nodes=nodes, gpus_per_node=gpus_per_node,
                inter=inter, intra=intra or "", nics=nics, oversubscription=oversubscription,
                framework=framework, sync=sync, servers=servers, tau=tau,
                codecs=_list(codecs), bucket_mb=bucket_mb, storage=storage, overlap=overlap,
                prefetch=prefetch, batch=batch, precision=precision, optimizer=optimizer,
                accumulate=accumulate, layout=layout, derate=derate, catalog=_paths(catalog),
                calibration=os.fspath(calibration) if calibration else None)
    return json.loads(_loom.scale(opts))


def advise(model: PathLike = "resnet50", *, budget: float, max_gpus: int = 64,
           gpus_per_node: int = 8, hosts: Union[None, str, Sequence[str]] = None,
           hours: float = 8760.0, usd_per_kwh: float = 0.1252, gpu_utilisation: float = 0.76,
           samples: float = 0.0, rank_by: str = "time", cloud: bool = True,
           links: Union[None, str, Sequence[str]] = None,
           gpus: Union[None, str, Sequence[str]] = None, batch: int = 0,
           precision: str = "fp32", optimizer: str = "momentum", layout: str = "nhwc",
           catalog: Union[None, PathLike, Sequence[PathLike]] = None,
           calibration: Optional[PathLike] = None, machine_usd: float = 0.0,
           top: int = 10) -> Dict[str, Any]:
    """``loom advise -m MODEL --budget B ... --json``: a dict with the top ``top`` machines to
    buy ("ranked", best first) and cloud rentals ("rented"), each a dict (label, gpu, gpus,
    nodes, host, capital_usd, energy_usd, rent_usd, total_usd, samples_per_s and its band
    samples_per_s_low/high, samples_per_kusd, samples_per_usd, hours_to_train, sync, codec,
    dominant, ...), and the request's figures (band, typical, samples, notes, not_fitting,
    no_host, cheapest_rental).

    ``hosts`` is ``--host``, ``links`` ``--link``, ``gpus`` ``--gpu``, ``cloud=False``
    ``--no-cloud``, ``layout`` the memory format as in ``scale``; the defaults are the command's (a year of hours, US average electricity,
    76% GPU utilisation)."""
    opts = dict(model=os.fspath(model), budget=float(budget), max_gpus=max_gpus,
                gpus_per_node=gpus_per_node, hosts=_list(hosts), hours=hours,
                usd_per_kwh=usd_per_kwh, gpu_utilisation=gpu_utilisation, samples=samples,
                rank_by=rank_by, cloud=cloud, links=_list(links), gpus=_list(gpus), batch=batch,
                precision=precision, optimizer=optimizer, layout=layout, catalog=_paths(catalog),
                calibration=os.fspath(calibration) if calibration else None,
                machine_usd=machine_usd, top=top)
    return json.loads(_loom.advise(opts))
