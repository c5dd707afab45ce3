"""The shop's product types: category paths, attribute vocabularies, option groups and price ranges.

Two groups of types split the shop for generalisation tests (the PhyWorld protocol every turnkit family
follows): :data:`ID_TYPES` are seen in training; :data:`OOD_TYPES` are whole categories never seen there. Each
type also holds back ``ood_attributes`` (attribute values only out-of-distribution goals use) and a set of
held-out attribute *pairs* (:func:`held_out_pairs`) that only combinatorial goals combine.

Example:
    >>> t = type_named("t-shirt")
    >>> t.path, t.option_groups[0][0], len(t.attributes)
    (('clothing', 'tops', 't-shirt'), 'size', 6)
    >>> (0, 1) in held_out_pairs(t)
    True
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cache


@dataclass(frozen=True)
class ProductType:
    """One kind of product the shop sells.

    Attributes:
        name: The type's name as a shopper says it (``"t-shirt"``); the noun part of product titles.
        path: Category path, broadest first; its last element is ``name``.
        attributes: Attribute values in-distribution goals and products use.
        ood_attributes: Attribute values only out-of-distribution goals ask for (products still carry them).
        option_groups: ``(group, values)`` pairs, e.g. ``("size", ("small", ...))``; a goal picks one value per group.
        price_range: ``(low, high)`` list prices in dollars.
    """

    name: str
    path: tuple[str, ...]
    attributes: tuple[str, ...]
    ood_attributes: tuple[str, ...]
    option_groups: tuple[tuple[str, tuple[str, ...]], ...]
    price_range: tuple[float, float]

    @property
    def all_attributes(self) -> tuple[str, ...]:
        """In-distribution and held-out attribute values together."""
        return self.attributes + self.ood_attributes


_SIZES = ("small", "medium", "large", "x-large")
_COLOURS = ("black", "white", "navy", "red", "grey", "green", "beige")

ID_TYPES: tuple[ProductType, ...] = (
    ProductType(
        "t-shirt",
        ("clothing", "tops", "t-shirt"),
        ("cotton", "slim fit", "short sleeve", "machine wash", "crew neck", "moisture wicking"),
        ("organic hemp", "v neck"),
        (("size", _SIZES), ("color", _COLOURS)),
        (9.0, 35.0),
    ),
    ProductType(
        "running shoes",
        ("clothing", "shoes", "running shoes"),
        ("lightweight", "breathable", "non slip", "rubber sole", "memory foam", "lace up"),
        ("waterproof", "carbon plate"),
        (("size", ("7", "8", "9", "10", "11")), ("color", _COLOURS)),
        (35.0, 140.0),
    ),
    ProductType(
        "coffee maker",
        ("kitchen", "appliances", "coffee maker"),
        ("programmable", "stainless steel", "auto shut off", "dishwasher safe", "12 cup", "thermal carafe"),
        ("cold brew", "built in grinder"),
        (("color", ("black", "silver", "red")),),
        (25.0, 180.0),
    ),
    ProductType(
        "frying pan",
        ("kitchen", "cookware", "frying pan"),
        ("non stick", "oven safe", "induction compatible", "cast iron", "pfoa free", "dishwasher safe"),
        ("ceramic coated", "carbon steel"),
        (("size", ("8 inch", "10 inch", "12 inch")),),
        (15.0, 90.0),
    ),
    ProductType(
        "bluetooth headphones",
        ("electronics", "audio", "bluetooth headphones"),
        ("noise cancelling", "over ear", "long battery life", "foldable", "built in microphone", "fast charging"),
        ("bone conduction", "spatial audio"),
        (("color", ("black", "white", "blue", "rose gold")),),
        (20.0, 250.0),
    ),
    ProductType(
        "phone case",
        ("electronics", "accessories", "phone case"),
        ("shockproof", "slim", "wireless charging compatible", "clear", "kickstand", "card holder"),
        ("magnetic", "biodegradable"),
        (("model", ("iphone 15", "iphone 15 pro", "galaxy s24", "pixel 8")), ("color", ("black", "clear", "blue"))),
        (6.0, 40.0),
    ),
    ProductType(
        "bath towel",
        ("home", "bath", "bath towel"),
        ("100% cotton", "quick dry", "highly absorbent", "oversized", "machine washable", "hotel quality"),
        ("bamboo", "turkish cotton"),
        (("pack", ("2 pack", "4 pack", "6 pack")), ("color", _COLOURS)),
        (12.0, 70.0),
    ),
    ProductType(
        "desk lamp",
        ("home", "lighting", "desk lamp"),
        ("led", "dimmable", "usb charging port", "adjustable arm", "touch control", "eye caring"),
        ("clamp mount", "wireless charger"),
        (("color", ("black", "white", "silver")),),
        (15.0, 80.0),
    ),
)
"""Product types of in-distribution and combinatorial goals."""

OOD_TYPES: tuple[ProductType, ...] = (
    ProductType(
        "garden hose",
        ("garden", "watering", "garden hose"),
        ("expandable", "kink free", "lightweight", "brass fittings", "leak proof", "uv resistant"),
        ("heavy duty", "drinking water safe"),
        (("length", ("25 ft", "50 ft", "100 ft")), ("color", ("green", "blue", "black"))),
        (18.0, 75.0),
    ),
    ProductType(
        "yoga mat",
        ("sports", "fitness", "yoga mat"),
        ("non slip", "extra thick", "eco friendly", "carrying strap", "tpe", "alignment lines"),
        ("natural rubber", "cork"),
        (("thickness", ("4 mm", "6 mm", "8 mm")), ("color", ("purple", "blue", "black", "grey"))),
        (15.0, 90.0),
    ),
    ProductType(
        "dog leash",
        ("pet supplies", "dogs", "dog leash"),
        ("reflective", "padded handle", "nylon", "retractable", "heavy duty", "waste bag dispenser"),
        ("hands free", "bungee"),
        (("length", ("4 ft", "6 ft", "16 ft")), ("color", ("black", "red", "blue", "orange"))),
        (8.0, 45.0),
    ),
    ProductType(
        "backpack",
        ("sports", "outdoor", "backpack"),
        ("water resistant", "laptop compartment", "lightweight", "padded straps", "anti theft", "usb port"),
        ("hydration bladder", "rolltop"),
        (("capacity", ("20 l", "30 l", "40 l")), ("color", ("black", "grey", "navy", "olive"))),
        (25.0, 150.0),
    ),
)
"""Whole categories that only out-of-distribution goals ask for (absent from in-distribution catalogues)."""

BRANDS: tuple[str, ...] = (
    "Northwind",
    "Alderbrook",
    "Kestrel",
    "Brightline",
    "Oakhaven",
    "Lumen",
    "Tidewater",
    "Summitco",
    "Fernway",
    "Copperfield",
    "Maplecrest",
    "Bluejay",
)
"""Brand names in product titles."""


def type_named(name: str) -> ProductType:
    """The product type called ``name`` (in-distribution or out-of-distribution).

    Raises:
        KeyError: No such type; the message lists the known names.
    """
    for t in ID_TYPES + OOD_TYPES:
        if t.name == name:
            return t
    raise KeyError(f"no product type {name!r}; known: {[t.name for t in ID_TYPES + OOD_TYPES]}")


@cache
def held_out_pairs(ptype: ProductType) -> frozenset[tuple[int, int]]:
    """Index pairs ``(i, j)``, ``i < j``, of ``ptype.attributes`` that only combinatorial goals combine.

    A fixed third of all pairs (those with ``(i + j) % 3 == 1``), so every attribute still appears in
    in-distribution goals, with other partners.

    Example:
        >>> sorted(held_out_pairs(type_named("desk lamp")))[:3]
        [(0, 1), (0, 4), (1, 3)]
    """
    n = len(ptype.attributes)
    return frozenset((i, j) for i, j in itertools.combinations(range(n), 2) if (i + j) % 3 == 1)
