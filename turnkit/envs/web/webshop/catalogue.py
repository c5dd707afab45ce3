"""A shop catalogue and a shopping goal, generated from one seed.

Every episode gets its own small shop (about 35 products): the target product, near misses of the same type
(one goal attribute missing, over the price ceiling, the wanted option not offered) and products of other
types. Exactly one product satisfies the goal; the oracle finds it with :func:`find_target`, so no product id
has to be stored as privileged data (every id is shown on result pages a policy sees).

Splits (see :mod:`~turnkit.envs.web.webshop.taxonomy`):

* ``id``: an in-distribution type; goal attributes never form a held-out pair.
* ``ood``: a type from an unseen category, or an in-distribution type asked with a held-out attribute value.
* ``combo``: an in-distribution type whose goal combines a held-out pair of familiar attribute values.

Example:
    >>> shop, goal = generate_shop(7, "id")
    >>> target = find_target(shop, goal)
    >>> satisfies(target, goal), sum(satisfies(p, goal) for p in shop.products)
    (True, 1)
    >>> shop_for(7, "id") is shop_for(7, "id")  # cached: the server and the env share one copy
    True
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from turnkit.envs.web.webshop.taxonomy import BRANDS, ID_TYPES, OOD_TYPES, ProductType, held_out_pairs, type_named

SPLITS = ("id", "ood", "combo")
"""The WebShop family's task splits."""

_ID_CHARS = "ABCDEFGHJKLMNPQRSTUVWXYZ0123456789"


@dataclass(frozen=True)
class Product:
    """One product on sale.

    Attributes:
        pid: The product id shown on result pages (``B0`` and 8 characters, like an ASIN).
        title: The product title (brand, up to two attributes, the type name).
        type_name: Its :class:`~turnkit.envs.web.webshop.taxonomy.ProductType` name.
        brand: The brand.
        attributes: Its features.
        options: ``(group, values offered)`` per option group of its type.
        price: The price in dollars.
    """

    pid: str
    title: str
    type_name: str
    brand: str
    attributes: tuple[str, ...]
    options: tuple[tuple[str, tuple[str, ...]], ...]
    price: float

    @property
    def path(self) -> tuple[str, ...]:
        """The category path of its type."""
        return type_named(self.type_name).path

    def offers(self, group: str, value: str) -> bool:
        """Whether option ``group`` can be set to ``value``."""
        return any(g == group and value in values for g, values in self.options)


@dataclass(frozen=True)
class Goal:
    """What the shopper wants: the structured form of the instruction (the task's privileged data).

    Attributes:
        type_name: The wanted product type.
        title: The target product's title (WebShop's ``goal["name"]``, used by the type reward).
        attributes: Wanted attributes.
        options: ``(group, value)`` wanted per option group.
        price_upper: The price ceiling in dollars.
    """

    type_name: str
    title: str
    attributes: tuple[str, ...]
    options: tuple[tuple[str, str], ...]
    price_upper: float

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (lists for tuples); :meth:`from_json` inverts it.

        Example:
            >>> goal = Goal("desk lamp", "Lumen Led Desk Lamp", ("led",), (("color", "black"),), 40.0)
            >>> Goal.from_json(goal.to_json()) == goal
            True
        """
        return {
            "type_name": self.type_name,
            "title": self.title,
            "attributes": list(self.attributes),
            "options": [list(o) for o in self.options],
            "price_upper": self.price_upper,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Goal:
        """Inverse of :meth:`to_json`."""
        return cls(
            type_name=str(data["type_name"]),
            title=str(data["title"]),
            attributes=tuple(str(a) for a in data["attributes"]),
            options=tuple((str(g), str(v)) for g, v in data["options"]),
            price_upper=float(data["price_upper"]),
        )

    def instruction(self) -> str:
        """The shopper's request in WebShop's phrasing.

        Example:
            >>> Goal("desk lamp", "X", ("led", "dimmable"), (("color", "black"),), 40.0).instruction()
            'i am looking for a led and dimmable desk lamp with color: black, and price lower than 40.00 dollars'
        """
        text = f"i am looking for a {' and '.join(self.attributes)} {self.type_name}"
        if self.options:
            text += " with " + ", and ".join(f"{g}: {v}" for g, v in self.options)
        return f"{text}, and price lower than {self.price_upper:.2f} dollars"


@dataclass(frozen=True)
class Shop:
    """An episode's catalogue.

    Attributes:
        seed: The seed it was generated from.
        split: The split it was generated for.
        products: All products, in the shop's own (shuffled) order.
    """

    seed: int
    split: str
    products: tuple[Product, ...]
    _index: Mapping[str, Product] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {p.pid: p for p in self.products})

    def get(self, pid: str) -> Product | None:
        """The product with id ``pid``, or ``None``."""
        return self._index.get(pid)


def satisfies(product: Product, goal: Goal) -> bool:
    """Whether buying ``product`` (with the goal's options) meets every part of ``goal``."""
    return (
        product.type_name == goal.type_name
        and all(a in product.attributes for a in goal.attributes)
        and all(product.offers(g, v) for g, v in goal.options)
        and product.price <= goal.price_upper
    )


def find_target(shop: Shop, goal: Goal) -> Product:
    """The product that satisfies ``goal`` (the generator makes exactly one).

    Raises:
        LookupError: No product satisfies it (a hand-built shop or goal).
    """
    for product in shop.products:
        if satisfies(product, goal):
            return product
    raise LookupError(f"no product in shop {shop.seed}/{shop.split} satisfies the goal {goal.instruction()!r}")


@lru_cache(maxsize=512)
def _generated(seed: int, split: str) -> tuple[Shop, Goal]:
    return generate_shop(seed, split)


def shop_for(seed: int, split: str) -> Shop:
    """The shop of ``(seed, split)``, cached (the env, the server and the oracle all read the same one)."""
    return _generated(seed, split)[0]


def goal_for(seed: int, split: str) -> Goal:
    """The goal of ``(seed, split)``, from the same cached generation as :func:`shop_for`."""
    return _generated(seed, split)[1]


# ---------------------------------------------------------------------------------------------- generation
def generate_shop(seed: int, split: str) -> tuple[Shop, Goal]:
    """Generate a shop and its goal from ``seed`` alone (same seed, same shop, in any process).

    Raises:
        ValueError: Unknown split.
    """
    if split not in SPLITS:
        raise ValueError(f"unknown WebShop split {split!r}; choose one of {list(SPLITS)}")
    rng = np.random.default_rng(seed)
    ptype, wanted = _goal_type_and_attributes(rng, split)
    ids = _IdMaker(rng)
    options = tuple((g, str(rng.choice(values))) for g, values in ptype.option_groups)
    price = _price(rng, ptype)
    ceiling = float(math.ceil(price * rng.uniform(1.1, 1.5) / 10.0) * 10.0)
    target = _product(rng, ids, ptype, wanted, price, must_offer=options)
    goal = Goal(ptype.name, target.title, wanted, options, ceiling)
    products = [target, *_near_misses(rng, ids, ptype, goal)]
    pool = [t for t in (ID_TYPES + OOD_TYPES if split == "ood" else ID_TYPES) if t is not ptype]
    for i in rng.choice(len(pool), size=4, replace=False):
        other = pool[int(i)]
        for _ in range(4):
            products.append(_product(rng, ids, other, (), _price(rng, other)))
    order = rng.permutation(len(products))
    return Shop(seed, split, tuple(products[int(i)] for i in order)), goal


def _goal_type_and_attributes(rng: np.random.Generator, split: str) -> tuple[ProductType, tuple[str, ...]]:
    k = int(rng.integers(2, 4))  # 2 or 3 wanted attributes
    if split == "ood" and rng.random() < 0.5:
        ptype = OOD_TYPES[int(rng.integers(len(OOD_TYPES)))]
        picks = rng.choice(len(ptype.all_attributes), size=k, replace=False)
        return ptype, tuple(ptype.all_attributes[int(i)] for i in sorted(picks))
    ptype = ID_TYPES[int(rng.integers(len(ID_TYPES)))]
    held = sorted(held_out_pairs(ptype))
    if split == "ood":  # a familiar type asked with a held-out attribute value
        unseen = ptype.ood_attributes[int(rng.integers(len(ptype.ood_attributes)))]
        seen = rng.choice(len(ptype.attributes), size=k - 1, replace=False)
        return ptype, (*(ptype.attributes[int(i)] for i in sorted(seen)), unseen)
    if split == "combo":
        i, j = held[int(rng.integers(len(held)))]
        picks = {i, j}
        if k == 3:
            picks.add(int(rng.choice([x for x in range(len(ptype.attributes)) if x not in picks])))
        return ptype, tuple(ptype.attributes[x] for x in sorted(picks))
    while True:  # id: no held-out pair among the wanted attributes
        picks = sorted(int(i) for i in rng.choice(len(ptype.attributes), size=k, replace=False))
        if not any((a, b) in held_out_pairs(ptype) for a in picks for b in picks if a < b):
            return ptype, tuple(ptype.attributes[x] for x in picks)


class _IdMaker:
    """Unique ``B0xxxxxxxx`` product ids from the shop's RNG."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng, self.used = rng, set[str]()

    def __call__(self) -> str:
        while True:
            pid = "B0" + "".join(_ID_CHARS[int(i)] for i in self.rng.integers(len(_ID_CHARS), size=8))
            if pid not in self.used:
                self.used.add(pid)
                return pid


def _price(rng: np.random.Generator, ptype: ProductType) -> float:
    low, high = ptype.price_range
    return round(float(rng.uniform(low, high)), 2)


def _product(
    rng: np.random.Generator,
    ids: _IdMaker,
    ptype: ProductType,
    required: Sequence[str],
    price: float,
    *,
    must_offer: Sequence[tuple[str, str]] = (),
) -> Product:
    extra_pool = [a for a in ptype.all_attributes if a not in required]
    n_extra = int(rng.integers(1, 3)) if len(required) else int(rng.integers(2, 5))
    extra = [extra_pool[int(i)] for i in rng.choice(len(extra_pool), size=n_extra, replace=False)]
    attributes = tuple(required) + tuple(extra)
    wanted = dict(must_offer)
    options = []
    for group, values in ptype.option_groups:
        k = int(rng.integers(2, len(values) + 1))
        offered = {values[int(i)] for i in rng.choice(len(values), size=k, replace=False)}
        if group in wanted:
            offered.add(wanted[group])
        options.append((group, tuple(v for v in values if v in offered)))
    brand = BRANDS[int(rng.integers(len(BRANDS)))]
    picks = sorted(rng.choice(len(attributes), size=min(2, len(attributes)), replace=False))
    shown = [attributes[int(i)] for i in picks]
    title = " ".join([brand, *(w.title() for w in shown), ptype.name.title()])
    return Product(ids(), title, ptype.name, brand, attributes, tuple(options), price)


def _near_misses(rng: np.random.Generator, ids: _IdMaker, ptype: ProductType, goal: Goal) -> list[Product]:
    """Products of the goal's type that each fail the goal in one way (plus a few random ones)."""
    out = []
    low = ptype.price_range[0]
    cheap = lambda: round(float(rng.uniform(low, max(low + 1.0, goal.price_upper * 0.95))), 2)  # noqa: E731
    for i in range(len(goal.attributes)):  # one goal attribute missing
        kept = goal.attributes[:i] + goal.attributes[i + 1 :]
        out.append(_product(rng, ids, ptype, kept, cheap(), must_offer=goal.options))
    over = round(goal.price_upper * float(rng.uniform(1.05, 1.6)), 2)  # everything right but the price
    out.append(_product(rng, ids, ptype, goal.attributes, over, must_offer=goal.options))
    for group, value in goal.options:  # the wanted option value not offered
        out.append(_without_option(_product(rng, ids, ptype, goal.attributes, cheap()), group, value))
    for _ in range(3):
        out.append(_product(rng, ids, ptype, (), _price(rng, ptype)))
    return [_break(p, goal, rng) if satisfies(p, goal) else p for p in out]


def _without_option(product: Product, group: str, value: str) -> Product:
    options = tuple((g, tuple(v for v in vs if not (g == group and v == value))) for g, vs in product.options)
    return dataclasses.replace(product, options=options)


def _break(product: Product, goal: Goal, rng: np.random.Generator) -> Product:
    """Make a random product that happens to satisfy the goal miss one wanted attribute."""
    drop = goal.attributes[int(rng.integers(len(goal.attributes)))]
    attributes = tuple(a for a in product.attributes if a != drop)
    title = product.title if drop.title() not in product.title else product.title.replace(f" {drop.title()}", "")
    return dataclasses.replace(product, title=title, attributes=attributes)
