"""Atomic, verified checkpoints: a run can be killed at any moment, and resuming skips a damaged checkpoint.

Layout of a run directory::

    run/
      checkpoints/step-000040/   adapter/ (peft format) or model/, optimizer.pt, rng.pt, state.json,
                                 MANIFEST.json (every other file's size and CRC-32, written last)
      checkpoints/LATEST         name of the newest complete checkpoint
      checkpoints/step-000050.damaged/   a damaged checkpoint that a resume skipped (kept for inspection)

**Writing.** :func:`stage_checkpoint` yields a hidden temporary sibling (``.step-000040.xxxx``) to fill. On
success every file is flushed to disk (``fsync``), ``MANIFEST.json`` is written *last*, and the folder is
renamed into place in one step; ``LATEST`` is then replaced atomically. A crash at any point leaves either
the previous checkpoints untouched or the new one complete; hidden staging folders left by a crash are never
read as checkpoints (and are removed on the next resume).

**Intact** means: ``MANIFEST.json`` parses, and every file it lists exists with the recorded size and CRC-32
(:func:`check_manifest`). Sizes catch the common damage (a truncated file, a half-copied folder, a missing
file); the checksum catches same-size corruption. CRC-32 rather than SHA-256: the threat is accidental
damage, not an adversary, and CRC-32 hashes ~2x faster (BENCHMARKS.md, "Start-up and checksum costs"),
which matters when every checkpoint is hashed once on save and once on resume. The loader then
reads every file *before* changing anything in memory, so a file that passes the manifest but still cannot
be parsed (or a checkpoint written before manifests existed, which is read unverified) is also caught.

**Resuming.** :func:`load_newest_intact` walks the checkpoints newest first, skips damaged ones with a
:class:`~turnkit.errors.CheckpointWarning` that names the file and the reason, moves them aside to
``step-NNNNNN.damaged``, and loads the newest intact one. If none is intact it raises
:class:`~turnkit.errors.CheckpointError` naming every checkpoint and what is wrong with it.

Example:
    >>> import tempfile, torch
    >>> from pathlib import Path
    >>> run = Path(tempfile.mkdtemp())
    >>> for step in (1, 2):
    ...     with stage_checkpoint(run, step=step) as tmp:
    ...         torch.save({"w": torch.ones(2)}, tmp / "optimizer.pt")
    ...         write_json(tmp / "state.json", {"step": step})
    >>> latest_checkpoint(run).name, check_manifest(latest_checkpoint(run)) is None
    ('step-000002', True)
    >>> with open(run / "checkpoints" / "step-000002" / "optimizer.pt", "r+b") as f:
    ...     _ = f.truncate(10)  # damage the newest checkpoint
    >>> check_manifest(run / "checkpoints" / "step-000002")  # doctest: +ELLIPSIS
    'optimizer.pt: 10 bytes, MANIFEST.json says ... (truncated)'
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     ckpt, state = load_newest_intact(run, lambda c: read_checkpoint_json(c / "state.json"))
    >>> ckpt.name, state["step"], "optimizer.pt" in str(caught[0].message)
    ('step-000001', 1, True)
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
import warnings
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from turnkit.errors import CheckpointError, CheckpointWarning, ConfigError

T = TypeVar("T")

MANIFEST = "MANIFEST.json"
"""Name of the manifest file inside a checkpoint folder."""
MANIFEST_FORMAT = "turnkit-manifest-1"
STEP_DIR = re.compile(r"step-(\d+)")
"""Names of complete checkpoint folders (``step-000040``)."""
_CHUNK = 1 << 20


def write_json(path: Path, data: Any) -> None:
    """Write JSON atomically and durably (temporary file, ``fsync``, rename)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_json(path: Path) -> Any:
    """Read a JSON file, naming the file in the error if it is malformed."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc})") from exc


# ---------------------------------------------------------------------------------------------- manifests


def _crc32(path: Path) -> tuple[int, str]:
    """Size and CRC-32 (8 hex digits) of a file, read in 1 MiB chunks."""
    crc, size = 0, 0
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            crc = zlib.crc32(chunk, crc)
            size += len(chunk)
    return size, f"{crc:08x}"


def _fsync_path(path: Path) -> None:
    """Flush a file or a directory entry to disk (directories: so a rename inside them survives a crash)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_manifest(folder: Path) -> dict[str, Any]:
    """Flush every file under ``folder`` to disk, then write ``MANIFEST.json`` (sizes and CRC-32s) last.

    Returns:
        The manifest.

    Example:
        >>> import tempfile
        >>> d = Path(tempfile.mkdtemp()); _ = (d / "a.txt").write_text("hello")
        >>> write_manifest(d)["files"]
        {'a.txt': {'bytes': 5, 'crc32': '3610a686'}}
    """
    folder = Path(folder)
    files: dict[str, dict[str, Any]] = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if rel == MANIFEST or not path.is_file() or path.is_symlink():
            continue
        _fsync_path(path)
        size, crc = _crc32(path)
        files[rel] = {"bytes": size, "crc32": crc}
    manifest = {"format": MANIFEST_FORMAT, "files": files}
    write_json(folder / MANIFEST, manifest)
    for sub in {folder, *(p for p in folder.rglob("*") if p.is_dir())}:
        _fsync_path(sub)
    return manifest


def check_manifest(folder: Path, *, required: bool = True) -> str | None:
    """Why ``folder`` is not an intact checkpoint, or ``None`` if it is.

    Args:
        folder: A checkpoint folder (or any folder :func:`write_manifest` wrote).
        required: Whether a missing ``MANIFEST.json`` is damage. With ``False`` a folder without one (written
            before manifests existed) passes here and must be verified by reading it.

    Returns:
        ``None`` when intact, else a reason that names the first damaged file(s), e.g.
        ``"optimizer.pt: 10 bytes, MANIFEST.json says 1,337 (truncated)"``.

    Example:
        >>> import tempfile
        >>> d = Path(tempfile.mkdtemp()); _ = (d / "a.txt").write_text("hello"); _ = write_manifest(d)
        >>> check_manifest(d) is None
        True
        >>> _ = (d / "a.txt").write_text("HELLO")
        >>> check_manifest(d)
        'a.txt: CRC-32 c1446436, MANIFEST.json says 3610a686 (corrupted)'
        >>> (d / "a.txt").unlink(); check_manifest(d)
        'a.txt: missing'
    """
    folder = Path(folder)
    if not folder.is_dir():
        return "missing" if not folder.exists() else "not a directory"
    path = folder / MANIFEST
    if not path.is_file():
        return f"no {MANIFEST} (half-written, or written before turnkit recorded manifests)" if required else None
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        files = manifest["files"] if manifest.get("format") == MANIFEST_FORMAT else None
        if not isinstance(files, dict):
            return f"{MANIFEST}: not a turnkit manifest"
    except (OSError, UnicodeDecodeError, ValueError, KeyError, AttributeError) as exc:
        return f"{MANIFEST}: unreadable ({type(exc).__name__}: {exc})"
    problems = []
    for rel, entry in files.items():
        file = folder / rel
        if not file.is_file():
            problems.append(f"{rel}: missing")
            continue
        size = file.stat().st_size
        if size != entry.get("bytes"):
            how = "truncated" if size < entry.get("bytes", 0) else "overwritten"
            problems.append(f"{rel}: {size:,} bytes, {MANIFEST} says {entry.get('bytes'):,} ({how})")
            continue
        _, crc = _crc32(file)
        if crc != entry.get("crc32"):
            problems.append(f"{rel}: CRC-32 {crc}, {MANIFEST} says {entry.get('crc32')} (corrupted)")
    if not problems:
        return None
    more = f"; and {len(problems) - 3} more" if len(problems) > 3 else ""
    return "; ".join(problems[:3]) + more


# ---------------------------------------------------------------------------------------------- writing


@contextlib.contextmanager
def stage_dir(final: Path) -> Iterator[Path]:
    """Yield a hidden temporary sibling of ``final`` to fill; on success it gets a manifest and becomes ``final``.

    An existing ``final`` is replaced. On an exception the temporary folder is removed and ``final`` is left
    as it was.

    Example:
        >>> import tempfile
        >>> final = Path(tempfile.mkdtemp()) / "adapter"
        >>> with stage_dir(final) as tmp:
        ...     _ = (tmp / "weights.bin").write_bytes(b"123")
        >>> sorted(p.name for p in final.iterdir()), check_manifest(final) is None
        (['MANIFEST.json', 'weights.bin'], True)
    """
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{final.name}."))
    try:
        yield tmp
        write_manifest(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    _fsync_path(final.parent)


def checkpoint_path(run_dir: Path, step: int) -> Path:
    """Where the checkpoint of ``step`` lives.

    Example:
        >>> checkpoint_path(Path("runs/x"), 40).as_posix()
        'runs/x/checkpoints/step-000040'
    """
    return Path(run_dir) / "checkpoints" / f"step-{step:06d}"


def _step_of(path: Path) -> int | None:
    match = STEP_DIR.fullmatch(path.name)
    return int(match.group(1)) if match else None


@contextlib.contextmanager
def stage_checkpoint(run_dir: Path, step: int, keep: int = 2) -> Iterator[Path]:
    """Yield a temporary directory to fill; on success it becomes ``checkpoints/step-NNNNNN`` (see module doc).

    The new checkpoint is the newest of the run: checkpoints of *later* steps (left by an abandoned timeline,
    e.g. an earlier run in the same folder) are deleted, and of the rest only the newest ``keep`` are kept.

    Args:
        run_dir: The run directory.
        step: The training step the checkpoint captures.
        keep: How many complete checkpoints to keep (older ones are deleted).
    """
    final = checkpoint_path(run_dir, step)
    with stage_dir(final) as tmp:
        yield tmp
    root = final.parent
    pointer_tmp = root / ".LATEST.tmp"
    pointer_tmp.write_text(final.name + "\n", encoding="utf-8")
    os.replace(pointer_tmp, root / "LATEST")
    steps = sorted((s, p) for p in root.iterdir() if p.is_dir() and (s := _step_of(p)) is not None)
    newer = [p for s, p in steps if s > step]
    older = [p for s, p in steps if s <= step]
    for old in newer + older[:-keep]:
        shutil.rmtree(old, ignore_errors=True)


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The checkpoint ``LATEST`` names, or ``None`` (not verified: see :func:`load_newest_intact`)."""
    pointer = Path(run_dir) / "checkpoints" / "LATEST"
    if not pointer.exists():
        return None
    path = pointer.parent / pointer.read_text(encoding="utf-8").strip()
    return path if path.is_dir() else None


# ---------------------------------------------------------------------------------------------- reading


def checkpoint_candidates(run_dir: Path) -> list[Path]:
    """The run's checkpoint folders, newest step first (plus ``LATEST``'s target if that folder is missing).

    Hidden staging folders and ``*.damaged`` folders are not candidates.

    Example:
        >>> import tempfile
        >>> run = Path(tempfile.mkdtemp())
        >>> for name in ("step-000002", "step-000010", "step-000003.damaged", ".step-000011.tmp"):
        ...     (run / "checkpoints" / name).mkdir(parents=True)
        >>> [p.name for p in checkpoint_candidates(run)]
        ['step-000010', 'step-000002']
    """
    root = Path(run_dir) / "checkpoints"
    if not root.is_dir():
        return []
    found = {p for p in root.iterdir() if p.is_dir() and _step_of(p) is not None}
    pointer = root / "LATEST"
    with contextlib.suppress(OSError, UnicodeDecodeError):
        named = root / pointer.read_text(encoding="utf-8").strip()
        if _step_of(named) is not None:
            found.add(named)
    return sorted(found, key=lambda p: _step_of(p) or 0, reverse=True)


@contextlib.contextmanager
def reading(path: Path, base: Path | None = None) -> Iterator[None]:
    """Turn any failure while reading ``path`` into a :class:`~turnkit.errors.CheckpointError` naming it.

    Args:
        path: The file being read.
        base: Name the file relative to this folder (the checkpoint) in the message.

    Example:
        >>> with reading(Path("/nonexistent/rng.pt"), base=Path("/nonexistent")):  # doctest: +ELLIPSIS
        ...     _ = open("/nonexistent/rng.pt", "rb")
        Traceback (most recent call last):
        ...
        turnkit.errors.CheckpointError: rng.pt: cannot be read (FileNotFoundError: ...)
    """
    try:
        yield
    except CheckpointError:
        raise
    except Exception as exc:  # torch, safetensors, peft and json all raise their own types on damaged files
        name = path.relative_to(base).as_posix() if base is not None else str(path)
        raise CheckpointError(f"{name}: cannot be read ({type(exc).__name__}: {exc})") from exc


def read_checkpoint_json(path: Path) -> Any:
    """Read a JSON file of a checkpoint; a missing or malformed file raises :class:`CheckpointError`."""
    with reading(path, base=path.parent):
        return json.loads(path.read_text(encoding="utf-8"))


def _set_aside(ckpt: Path) -> Path | None:
    """Rename a damaged checkpoint to ``<name>.damaged`` (``.damaged-2``, ... if taken); ``None`` if impossible."""
    if not ckpt.exists():
        return None
    for n in range(1, 100):
        target = ckpt.with_name(ckpt.name + (".damaged" if n == 1 else f".damaged-{n}"))
        if not target.exists():
            with contextlib.suppress(OSError):
                os.replace(ckpt, target)
                return target
            return None
    return None


def load_newest_intact(run_dir: Path, load: Callable[[Path], T]) -> tuple[Path, T] | None:
    """Load the newest intact checkpoint of a run, skipping damaged ones with a warning.

    Each candidate (newest first, :func:`checkpoint_candidates`) is checked with :func:`check_manifest`
    (a folder without a manifest is accepted here and verified by ``load`` alone), then passed to ``load``.
    ``load`` must read every file before it changes any state, and raise
    :class:`~turnkit.errors.CheckpointError` for a file it cannot read (see :func:`reading`); any other
    exception (e.g. a :class:`~turnkit.errors.ConfigError` for a different run) propagates unchanged.

    Every damaged checkpoint newer than the one loaded gets a :class:`~turnkit.errors.CheckpointWarning`
    naming it, the damaged file and the reason, and is renamed to ``step-NNNNNN.damaged``; ``LATEST`` is
    pointed at the loaded one. Leftover hidden staging folders of crashed saves are removed.

    Args:
        run_dir: The run directory.
        load: Reads one checkpoint folder and applies it; its return value is handed back.

    Returns:
        ``(checkpoint folder, load's result)``, or ``None`` if the run has no checkpoint at all.

    Raises:
        CheckpointError: There are checkpoints, but none is intact; the message names each and why.
    """
    root = Path(run_dir) / "checkpoints"
    candidates = checkpoint_candidates(run_dir)
    if not candidates:
        return None
    damaged: list[tuple[Path, str]] = []
    for ckpt in candidates:
        reason = check_manifest(ckpt, required=False)
        if reason is None:
            try:
                value = load(ckpt)
            except CheckpointError as exc:
                reason = str(exc)
        if reason is not None:
            damaged.append((ckpt, reason))
            continue
        for bad, why in damaged:
            aside = _set_aside(bad)
            kept = f"; moved to {aside.name}" if aside is not None else ""
            warnings.warn(
                f"checkpoint {bad} is damaged ({why}){kept}; resuming from {ckpt.name} instead",
                CheckpointWarning,
                stacklevel=2,
            )
        if damaged:
            pointer_tmp = root / ".LATEST.tmp"
            pointer_tmp.write_text(ckpt.name + "\n", encoding="utf-8")
            os.replace(pointer_tmp, root / "LATEST")
        for leftover in root.glob(".step-*"):
            shutil.rmtree(leftover, ignore_errors=True)
        return ckpt, value
    listing = "; ".join(f"{path.name}: {why}" for path, why in damaged)
    raise CheckpointError(
        f"no intact checkpoint in {root} ({listing}); start a fresh run (without resume) or use another out_dir",
        damaged=damaged,
    )
