"""Window order for training and evaluation: reproducible per epoch, resumable, exact under DDP.

* Training (:class:`EpochShuffleSampler`): the order of epoch ``e`` is a permutation
  drawn from ``seed + e`` (``torch.utils.data.DistributedSampler``'s rule), not from a
  generator that advances with every epoch run in this process, so a run resumed at
  epoch ``e`` replays epoch ``e``'s order. Under DDP the permutation is the same on
  every process and process ``r`` of ``W`` takes positions ``r, r+W, ...`` (padded by
  repetition so every process steps the same number of times, which DDP training
  needs). Step ``j`` of a run on W processes with batch ``b`` therefore sees the windows
  of step ``j`` of a single-process run with batch ``W*b``.
* Evaluation (:func:`eval_sampler`): under DDP, process ``r`` takes windows
  ``r, r+W, ...`` with no padding, so every window is scored exactly once (Lightning's
  default ``DistributedSampler`` repeats windows to even out the processes).
* :class:`ResumableDataLoader`: a ``DataLoader`` whose position within the epoch is
  saved in Lightning checkpoints (``state_dict``/``load_state_dict``), so a run resumed
  from a mid-epoch checkpoint continues with the next batch of the same order.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sized
from typing import Any

import torch
from lightning.pytorch.overrides.distributed import UnrepeatedDistributedSampler
from torch.utils.data import DataLoader, Dataset, DistributedSampler, Sampler

from forecast.data.config import DataConfig
from forecast.errors import ConfigError

logger = logging.getLogger(__name__)


class EpochShuffleSampler(DistributedSampler):
    """Shuffles with ``seed + epoch``, shards over ``num_replicas`` processes, can start mid-epoch.

    Lightning calls :meth:`set_epoch` before every training epoch (any strategy), and
    keeps this sampler under DDP (it is already a ``DistributedSampler``).
    """

    def __init__(self, dataset: Dataset, *, seed: int, num_replicas: int = 1, rank: int = 0) -> None:
        super().__init__(dataset, num_replicas=num_replicas, rank=rank, shuffle=True, seed=seed, drop_last=False)
        self._resume_epoch: int | None = None
        self._resume_skip = 0

    def resume_at(self, epoch: int, skip: int) -> None:
        """Leave out the first ``skip`` indices of this process the next time epoch ``epoch`` is iterated."""
        self._resume_epoch, self._resume_skip = epoch, skip

    @property
    def pending_skip(self) -> int:
        """How many indices the next iteration leaves out (0 unless resuming this epoch)."""
        return self._resume_skip if self._resume_epoch == self.epoch else 0

    def __iter__(self) -> Iterator[int]:
        indices = list(super().__iter__())[self.pending_skip:]  # this process's share of the epoch's permutation
        self._resume_epoch, self._resume_skip = None, 0
        return iter(indices)


class ResumableDataLoader(DataLoader):
    """A training ``DataLoader`` over an :class:`EpochShuffleSampler` that checkpoints its position.

    ``state_dict()`` is ``{"epoch", "batches"}``: the sampler's epoch and how many batches
    of it were handed out; Lightning stores it in checkpoints (fit loop state) and gives
    it back through ``load_state_dict`` before the resumed epoch starts, which makes the
    next iteration of that epoch skip the batches already trained on. Over another
    sampler (Lightning swaps in a sequential one for ``overfit_batches``) it is a plain
    ``DataLoader`` that does not resume mid-epoch.
    """

    def __init__(self, dataset: Dataset, *, sampler: Sampler[int], **options: Any) -> None:
        super().__init__(dataset, sampler=sampler, **options)
        self._epoch = getattr(sampler, "epoch", 0)
        self._served = 0

    def __iter__(self) -> Iterator[Any]:
        # A generator: the sampler is read at the first batch, after Lightning's set_epoch.
        self._epoch = getattr(self.sampler, "epoch", 0)
        self._served = getattr(self.sampler, "pending_skip", 0) // self.batch_size  # type: ignore[operator]
        for batch in super().__iter__():
            self._served += 1
            yield batch

    def state_dict(self) -> dict[str, int]:
        return {"epoch": int(self._epoch), "batches": int(self._served)}

    def load_state_dict(self, state_dict: dict[str, int]) -> None:
        epoch, batches = int(state_dict["epoch"]), int(state_dict["batches"])
        if batches >= len(self) or not isinstance(self.sampler, EpochShuffleSampler):
            return  # the saved epoch was complete (the next starts from its beginning), or no order to resume
        self.sampler.resume_at(epoch, batches * self.batch_size)  # type: ignore[operator]
        # Not "of len(self)": under limit_train_batches the epoch ends before its order does.
        logger.info("resuming epoch %d after its first %d batches", epoch, batches)


def eval_sampler(dataset: Dataset, num_replicas: int, rank: int, *, split: str) -> Sampler[int] | None:
    """``None`` (in order) on one process; on several, an unpadded shard of every ``num_replicas``-th window."""
    if num_replicas <= 1:
        return None
    count = len(dataset) if isinstance(dataset, Sized) else 0
    if count < num_replicas:
        raise ConfigError(
            f"the {split} split has {count} windows, fewer than the {num_replicas} processes: some would score "
            "nothing. Fix: run evaluation on fewer devices, or give the split more rows."
        )
    return UnrepeatedDistributedSampler(dataset, num_replicas=num_replicas, rank=rank, shuffle=False)


def trainer_processes(trainer: Any) -> tuple[int, int]:
    """(number of data-parallel processes, this process's rank) of a Lightning ``trainer``; ``(1, 0)``
    without one, or with a strategy that does not shard the data."""
    shards = trainer.distributed_sampler_kwargs if trainer is not None else None
    if not shards:
        return 1, 0
    return int(shards["num_replicas"]), int(shards["rank"])


def window_loader(dataset: Dataset, config: DataConfig, *, train: bool, split: str, num_replicas: int = 1,
                  rank: int = 0) -> DataLoader:
    """The loader of one split's windows under ``config``: shuffled and resumable for training
    (:class:`EpochShuffleSampler`, :class:`ResumableDataLoader`), every window once in order
    otherwise (:func:`eval_sampler`); the last partial batch is dropped only if asked."""
    batch_size = config.batch_size if train else (config.eval_batch_size or config.batch_size)
    drop_last = train and config.drop_last_train
    if drop_last and len(dataset) < batch_size:
        raise ConfigError(
            f"drop_last_train=True with {len(dataset)} train windows and batch_size={batch_size} "
            "leaves no batch. Fix: a smaller batch_size or drop_last_train=False."
        )
    persistent = config.persistent_workers if config.persistent_workers is not None else config.num_workers > 0
    options: dict[str, Any] = dict(
        batch_size=batch_size,
        drop_last=drop_last,
        # A private generator for worker seeds: making an iterator never draws from the global RNG,
        # so a resumed run's dropout masks continue the interrupted run's sequence.
        generator=torch.Generator().manual_seed(config.seed),
        num_workers=config.num_workers,
        pin_memory=config.pin_memory,
        persistent_workers=persistent and config.num_workers > 0,
    )
    if train:
        sampler = EpochShuffleSampler(dataset, seed=config.seed, num_replicas=num_replicas, rank=rank)
        return ResumableDataLoader(dataset, sampler=sampler, **options)
    return DataLoader(dataset, sampler=eval_sampler(dataset, num_replicas, rank, split=split), **options)
