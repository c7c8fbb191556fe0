"""loom.train: loom's own trainer (``loom train``) on NumPy arrays, in this process.

    run = loom.train({"model": "mlp", "epochs": 2, "optim": {"lr": 0.05}},
                     train=(X, y), test=(X_test, y_test))
    run.summary["test_acc"]; run.metrics[-1]; run.parameters["linear_0.weight"]
    run.model.predict(X_test)

The config is what a TOML file for ``loom train`` holds: a dict (nested tables or dotted keys,
lists of dicts for ``[[layer]]`` tables) or the path of a TOML file; ``loom train
--help-config`` lists the keys. The samples take the place of ``data.dir`` (those keys are
refused): X float32 of shape (N, *sample_shape), y integer class labels (N,) or, with
``loss.type = "mse"``, float32 targets (N,) or (N, K). Nothing is converted: a float64 X is
refused with ValueError (``X.astype(numpy.float32)`` converts it), so the run trains on exactly
the bits given; X is read in place, without a copy, so it must not change while the run
trains.

Differences from the command line: nothing is written unless the config sets ``output.dir``
(``loom train`` writes to runs/latest), and nothing is printed unless ``progress=True`` (then the
progress bar or lines and the log, as ``loom train`` prints them). Workers (``workers``) are
threads of this process; the GIL is released while the run trains. Ctrl-C stops the run after
its current step (a checkpoint is written where the config asks for them) and the Run it returns
says ``interrupted``.

Errors: a bad config or bad arrays raise ValueError naming the key or the argument, a missing
config file FileNotFoundError (an OSError), a lost worker loom.LostPeerError, a NaN loss
loom.NumericError.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _loom

ConfigLike = Union[Mapping[str, Any], str, "os.PathLike[str]"]


class Run:
    """A finished ``loom.train`` run.

    Attributes:
        metrics: the lines of metrics.jsonl as dicts, in order ("kind": "step" every
            ``train.log_every`` steps, "epoch" after each epoch).
        summary: summary.json as a dict (test_acc, test_loss, train_loss, steps,
            params_fnv1a64, ...).
        parameters: the final weights, tensor name -> float32 array, as model.safetensors
            names and shapes them (BatchNorm running statistics included).
        model: the trained model (a loom.TrainedModel, as loom.load gives), or None for a
            model-parallel run.
        dir: the output directory, or None when the config set no ``output.dir``.
        interrupted: stopped by a signal (Ctrl-C) before the last step.
        describe: the model, optimizer and sync strategy, as the log prints them.
    """

    def __init__(self, result: dict):
        self.metrics: List[dict] = [json.loads(line) for line in result["metrics"]]
        self.summary: dict = json.loads(result["summary"]) if result["summary"] else {}
        self.parameters: Dict[str, np.ndarray] = dict(result["parameters"])
        self.model: Optional[_loom.TrainedModel] = result["model"]
        self.dir: Optional[str] = result["dir"]
        self.interrupted: bool = bool(result["interrupted"])
        self.describe: str = result["describe"]

    @property
    def epochs(self) -> List[dict]:
        """The metrics lines of kind "epoch"."""
        return [m for m in self.metrics if m.get("kind") == "epoch"]

    def __repr__(self) -> str:
        acc = self.summary.get("test_acc")
        return (f"<loom.Run {self.summary.get('steps')} steps, test_acc "
                f"{'-' if acc is None else f'{acc:.4f}'}{', dir ' + self.dir if self.dir else ''}>")


def _scalar(key: str, v: Any) -> Any:
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(v)
    if isinstance(v, (str, os.PathLike)):
        return os.fspath(v)
    raise ValueError(f"config key '{key}': {type(v).__name__} {v!r}; a value is a bool, int, "
                     f"float, str, a list of those, a table (dict) or a list of tables")


def _flatten(prefix: str, table: Mapping[str, Any], out: List[Tuple[str, Any]]) -> None:
    for k, v in table.items():
        if not isinstance(k, str):
            raise ValueError(f"config key {k!r}: keys are strings")
        key = f"{prefix}.{k}" if prefix else k
        if isinstance(v, Mapping):
            _flatten(key, v, out)
        elif isinstance(v, (list, tuple)) and v and all(isinstance(i, Mapping) for i in v):
            for i, item in enumerate(v):  # [[layer]] tables: layer.0.type, layer.1.type, ...
                _flatten(f"{key}.{i}", item, out)
        elif isinstance(v, (list, tuple, np.ndarray)):
            out.append((key, [_scalar(key, i) for i in v]))
        else:
            out.append((key, _scalar(key, v)))


def _pair(name: str, data: Any) -> Tuple[np.ndarray, np.ndarray]:
    if not isinstance(data, (tuple, list)) or len(data) != 2:
        raise ValueError(f"{name}: give a pair (X, y) of arrays")
    return np.asarray(data[0]), np.asarray(data[1])


def train(config: ConfigLike, train: Tuple[Any, Any], test: Optional[Tuple[Any, Any]] = None,
          *, progress: bool = False, force: bool = False) -> Run:
    """Trains with loom's trainer on (X, y) and evaluates the final weights on ``test``.

    Args:
        config: a dict of ``loom train`` keys (nested or dotted), or the path of a TOML file.
        train: (X, y): X float32 (N, *sample_shape), y int labels (N,) or float32 targets.
        test: (X, y) of the same kind, or None (no test figures).
        progress: print the progress and the log as ``loom train`` does.
        force: replace a run that ``output.dir`` already holds (``loom train --force``).

    Returns:
        a :class:`Run`.
    """
    path = ""
    entries: List[Tuple[str, Any]] = []
    if isinstance(config, (str, os.PathLike)):
        path = os.fspath(config)
        if not os.path.isfile(path):
            raise FileNotFoundError(2, "no such config file", path)
    elif isinstance(config, Mapping):
        _flatten("", config, entries)
    else:
        raise ValueError(f"config: {type(config).__name__}; give a dict or a TOML file's path")
    X, y = _pair("train", train)
    Xt, yt = _pair("test", test) if test is not None else (None, None)
    return Run(_loom.train(path, entries, X, y, Xt, yt, bool(progress), bool(force)))
