"""`RayConfig` and connecting to a Ray cluster: an in-process local one, or one that is already running.

``address="local"`` starts a private single-machine cluster for this process (shut down again by
:func:`ray_session`); ``"auto"`` joins the cluster that ``ray start --head`` started on this machine;
``"ray://host:10001"`` or ``"host:6379"`` joins a remote one. A local cluster runs its workers at the
driver's priority (Ray's default is ``nice 15``, which starves env workers whenever the learner is busy).
Ray itself is imported only when a session starts, so the rest of turnkit works without the ``ray`` extra.

Example:
    >>> cfg = RayConfig.from_dict({"address": "local", "workers": 4})
    >>> cfg.workers, cfg.cpus_per_worker, cfg.max_retries
    (4, 1.0, 2)
    >>> RayConfig.from_dict({"adress": "auto"})
    Traceback (most recent call last):
    ...
    turnkit.errors.ConfigError: ray: unknown RayConfig key 'adress' (did you mean 'address'?)
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from turnkit.configs import check_float, check_int, check_str, from_dict
from turnkit.errors import ConfigError

INSTALL_HINT = "Ray is not installed: pip install 'turnkit[ray]' (or pip install 'ray>=2.30')"


@dataclass(frozen=True)
class RayConfig:
    """Where and how wide distributed collection runs. Validated on construction.

    Attributes:
        address: ``"local"`` (start an in-process cluster), ``"auto"`` (join the one on this machine) or a
            cluster address (``"host:6379"``, ``"ray://host:10001"``).
        workers: Env workers (Ray actors); each owns its envs, their sandboxes and browsers, and a copy of
            the policy side.
        envs_per_worker: Most episodes one worker plays at once (its batch); ``None``: an even share of each
            rollout. Groups are never split, so it must be at least the group size.
        cpus_per_worker: CPUs Ray reserves per worker (and torch threads inside it, at least 1).
        max_retries: How often an episode chunk is re-run after its worker died, before its episodes are
            recorded with ``ErrorCause.WORKER``.
        object_store_mb: Object store size of a ``"local"`` cluster.

    Example:
        >>> RayConfig(workers=0)
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: RayConfig.workers must be an int >= 1, got 0
    """

    address: str = "local"
    workers: int = 2
    envs_per_worker: int | None = None
    cpus_per_worker: float = 1.0
    max_retries: int = 2
    object_store_mb: int = 256

    def __post_init__(self) -> None:
        try:
            check_str(self, "address")
        except ConfigError:
            raise ConfigError(
                f"RayConfig.address must be 'local', 'auto' or a cluster address, got {self.address!r}"
            ) from None
        check_int(self, "workers")
        check_int(self, "max_retries", low=0)
        check_int(self, "object_store_mb", low=64)
        check_int(self, "envs_per_worker", optional=True)
        check_float(self, "cpus_per_worker", low=0.0, open_low=True)
        object.__setattr__(self, "cpus_per_worker", float(self.cpus_per_worker))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "ray") -> RayConfig:
        """Build from a mapping (a TOML ``[ray]`` table, ``--set ray.KEY=VALUE``); unknown keys are errors.

        The same as :func:`turnkit.configs.from_dict` with ``source`` defaulting to ``"ray"``.
        """
        return from_dict(cls, data, source=source)

    @property
    def threads(self) -> int:
        """Torch threads inside one worker."""
        return max(1, int(self.cpus_per_worker))


def require_ray() -> Any:
    """Import and return the ``ray`` module, or raise :class:`ConfigError` with the install command."""
    try:
        import ray
    except ImportError as exc:
        raise ConfigError(INSTALL_HINT) from exc
    return ray


@contextmanager
def ray_session(cfg: RayConfig) -> Iterator[Any]:
    """Connect to the cluster ``cfg.address`` names for the ``with`` block; yields the ``ray`` module.

    A cluster this call started (``"local"``) is shut down at the end; a joined one, or a session that was
    already connected when the block began, is left as it was.

    Raises:
        ConfigError: Ray is not installed, or the address cannot be reached (the message names it).
    """
    ray = require_ray()
    if ray.is_initialized():
        yield ray
        return
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
    if cfg.address == "local":
        cpus = max(cfg.workers * cfg.cpus_per_worker, 1.0)
        kwargs.update(num_cpus=math.ceil(cpus), object_store_memory=cfg.object_store_mb * 1024**2)
        # Ray starts workers at nice 15; here they do the run's main work beside the learner, so not below it.
        kwargs["_system_config"] = {"worker_niceness": 0}
    kwargs["address"] = cfg.address  # "local" always starts a new instance, even when RAY_ADDRESS is set
    try:
        ray.init(**kwargs)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise ConfigError(f"cannot connect to the Ray cluster at {cfg.address!r}: {exc}") from exc
    try:
        yield ray
    finally:
        ray.shutdown()
