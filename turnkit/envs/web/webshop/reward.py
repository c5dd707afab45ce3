"""WebShop's purchase reward (Yao et al. 2022, ``web_agent_site/engine/goal.py``), on structured products.

.. math::

    r = r_\\text{type} \\cdot \\frac{|U_\\text{att} \\cap Y_\\text{att}| + |U_\\text{opt} \\cap Y_\\text{opt}|
        + \\mathbb{1}[y_\\text{price} \\le u_\\text{price}]}{|U_\\text{att}| + |U_\\text{opt}| + 1}

``U`` is the goal, ``Y`` the bought product with the options selected at purchase. ``r_type`` is 1, lowered to
0.5 when neither the type (WebShop's search query) nor two levels of the category path nor more than 20% of
the goal title's nouns match, to 0.1 when under 10% of the nouns match and to 0 when none do.

Two deliberate differences from the original, because our products are generated, not scraped:

* an attribute matches when it is one of the product's attributes or appears *as whole words* in its title
  (WebShop: a fuzzy ratio over 85, or a raw substring of title, bullets or description); options match exactly
  (WebShop: fuzzy ratio over 85 after colour normalisation). Generated values are spelled one way, so exact
  matching loses nothing and cannot credit ``"led"`` inside ``"cancelled"``.
* the goal title's nouns (spaCy in WebShop) are its brand and type-name words, which is what a noun tagger
  finds in ``"<brand> <attribute adjectives> <type name>"``.

Example:
    >>> from turnkit.envs.web.webshop.catalogue import Goal, Product
    >>> goal = Goal("desk lamp", "Lumen Led Desk Lamp", ("led", "dimmable"), (("color", "black"),), 40.0)
    >>> lamp = Product("B0X", "Lumen Led Desk Lamp", "desk lamp", "Lumen", ("led",), (("color", ("black",)),), 35.0)
    >>> parts = purchase_reward(lamp, {"color": "black"}, goal)
    >>> parts.total, parts.attributes_matched, parts.r_type  # (1 attribute + 1 option + price) / (2 + 1 + 1)
    (0.75, 1, 1.0)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from turnkit.envs.web.webshop.catalogue import Goal, Product
from turnkit.envs.web.webshop.taxonomy import type_named

_WORD = re.compile(r"[a-z0-9%]+")


@dataclass(frozen=True)
class RewardParts:
    """The purchase reward and its parts (WebShop's ``verbose`` reward info).

    Attributes:
        total: The reward in [0, 1].
        r_type: The type factor (0, 0.1, 0.5 or 1).
        attributes_matched: Goal attributes the product has.
        options_matched: Goal options selected at purchase.
        price_ok: The price is within the ceiling.
        title_score: Fraction of the goal title's nouns in the bought product's title.
        query_match: Same product type.
        category_match: At least two category-path levels shared.
    """

    total: float
    r_type: float
    attributes_matched: int
    options_matched: int
    price_ok: bool
    title_score: float
    query_match: bool
    category_match: bool


def words(text: str) -> list[str]:
    """Lower-case word tokens (letters, digits and ``%``).

    Example:
        >>> words("Lumen 100% Cotton, T-Shirt!")
        ['lumen', '100%', 'cotton', 't', 'shirt']
    """
    return _WORD.findall(text.lower())


def _contains_words(text: str, phrase: str) -> bool:
    hay, needle = words(text), words(phrase)
    n = len(needle)
    return n > 0 and any(hay[i : i + n] == needle for i in range(len(hay) - n + 1))


def type_factor(product: Product, goal: Goal) -> tuple[float, float, bool, bool]:
    """``(r_type, title_score, query_match, category_match)`` (see the module docstring).

    Example:
        >>> from turnkit.envs.web.webshop.catalogue import Goal, Product
        >>> goal = Goal("desk lamp", "Lumen Led Desk Lamp", ("led",), (), 40.0)
        >>> pan = Product("B0Y", "Kestrel Non Stick Frying Pan", "frying pan", "Kestrel", (), (), 20.0)
        >>> type_factor(pan, goal)  # no noun of the goal title in "Kestrel Non Stick Frying Pan"
        (0.0, 0.0, False, False)
    """
    query_match = product.type_name == goal.type_name
    category_match = len(set(product.path) & set(type_named(goal.type_name).path)) >= 2
    brand = goal.title.split(" ", 1)[0]
    nouns = set(words(brand)) | set(words(goal.type_name))
    title_score = len(nouns & set(words(product.title))) / len(nouns) if nouns else 0.2
    return type_level(query_match, category_match, title_score), title_score, query_match, category_match


def type_level(query_match: bool, category_match: bool, title_score: float) -> float:
    """WebShop's ``r_type`` from its three signals.

    Example:
        >>> type_level(False, False, 0.15), type_level(True, False, 0.05), type_level(False, True, 0.3)
        (0.5, 0.1, 1.0)
    """
    r_type = 1.0
    if not (query_match or category_match or title_score > 0.2):
        r_type = 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return r_type


def purchase_reward(product: Product, selected: Mapping[str, str], goal: Goal) -> RewardParts:
    """Score buying ``product`` with the option values ``selected`` (group -> value) against ``goal``."""
    r_type, title_score, query_match, category_match = type_factor(product, goal)
    n_att = sum(1 for a in goal.attributes if a in product.attributes or _contains_words(product.title, a))
    chosen = set(selected.values())
    n_opt = sum(1 for _, v in goal.options if v in chosen)
    price_ok = product.price <= goal.price_upper
    denominator = len(goal.attributes) + len(goal.options) + 1
    total = r_type * (n_att + n_opt + int(price_ok)) / denominator
    return RewardParts(total, r_type, n_att, n_opt, price_ok, title_score, query_match, category_match)
