"""What several studies share, kept out of the ``turnkit`` package: result provenance, text statistics, the AfD
evaluation pipeline and the SWEET/PRIME helpers on the pinned tiny math start.

* :mod:`.provenance`: the machine record every study result carries, and :func:`~.provenance.write_result`.
* :mod:`.text_metrics`: distinct-n, Self-BLEU, Spearman's ρ (the IRL studies).
* :mod:`.afd`: best-of-N with AfD reward models and its reference selectors (``studies/irl_afd.py``).
* :mod:`.tinymath`: the pinned SFT start, pair training and summary lines of ``studies/sweet_math.py``, which
  ``prime.py``, ``async_quickstart.py`` and the SWEET collab studies reuse.

A study runs as ``python studies/<name>.py`` from the repository root, so ``studies/`` is first on ``sys.path``
and the scripts import this package as ``common`` (``from common.provenance import write_result``), as they
import each other by module name. Tests import it as ``studies.common`` (the repository root is on the path);
modules here import each other relatively, so either name works.
"""
