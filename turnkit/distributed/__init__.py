"""Scale-out on Ray: env workers, fault-tolerant distributed collection, weight snapshots for async learners.

* :mod:`~turnkit.distributed.cluster`: :class:`RayConfig` and connecting (a local in-process cluster, or one
  started with ``ray start``).
* :mod:`~turnkit.distributed.worker`: :class:`EnvWorker`, one process's envs and policy side.
* :mod:`~turnkit.distributed.collector`: :class:`RayCollector`, the driver side (chunks, retries, ordering).
* :mod:`~turnkit.distributed.weights`: versioned snapshots of a policy's trainable weights.

Ray is imported only when a collector starts; the training loop uses all this through
``TrainConfig.rollout.ray`` and ``TrainConfig.rollout.async_rollout`` (see ``docs/scaling.md``).
"""

from turnkit.distributed.cluster import RayConfig, ray_session
from turnkit.distributed.collector import PendingRollout, RayCollector, RolloutResult, plan_chunks
from turnkit.distributed.weights import WeightsSnapshot, load_weights, snapshot_weights
from turnkit.distributed.worker import EnvSpec, EnvWorker, EpisodeChunk, SharedAgent

__all__ = [
    "EnvSpec",
    "EnvWorker",
    "EpisodeChunk",
    "PendingRollout",
    "RayCollector",
    "RayConfig",
    "RolloutResult",
    "SharedAgent",
    "WeightsSnapshot",
    "load_weights",
    "plan_chunks",
    "ray_session",
    "snapshot_weights",
]
