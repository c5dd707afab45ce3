"""WebShop's purchase reward on hand-computed cases (formula in turnkit/envs/web/webshop/reward.py)."""

from __future__ import annotations

import pytest

from turnkit.envs.web.webshop.catalogue import Goal, Product
from turnkit.envs.web.webshop.reward import purchase_reward, type_factor, type_level

GOAL = Goal(
    type_name="t-shirt",
    title="Northwind Cotton Slim Fit T-Shirt",
    attributes=("cotton", "slim fit"),
    options=(("size", "large"), ("color", "navy")),
    price_upper=30.0,
)
"""2 attributes + 2 options + price: the denominator is 5."""


def _shirt(**changes) -> Product:
    fields = {
        "pid": "B0AAAAAAAA",
        "title": "Northwind Cotton Slim Fit T-Shirt",
        "type_name": "t-shirt",
        "brand": "Northwind",
        "attributes": ("cotton", "slim fit", "crew neck"),
        "options": (("size", ("medium", "large")), ("color", ("navy", "red"))),
        "price": 25.0,
    }
    fields.update(changes)
    return Product(**fields)


def test_exact_purchase_scores_one() -> None:
    parts = purchase_reward(_shirt(), {"size": "large", "color": "navy"}, GOAL)
    assert parts.total == 1.0
    assert (parts.attributes_matched, parts.options_matched, parts.price_ok, parts.r_type) == (2, 2, True, 1.0)


def test_missing_attribute_option_and_price_each_cost_a_fifth() -> None:
    # (1 attribute + 1 option + 0 price) / 5 with the type right: 2/5
    shirt = _shirt(title="Kestrel Crew Neck T-Shirt", brand="Kestrel", attributes=("cotton", "crew neck"), price=31.0)
    parts = purchase_reward(shirt, {"size": "large", "color": "red"}, GOAL)
    assert (parts.attributes_matched, parts.options_matched, parts.price_ok) == (1, 1, False)
    assert parts.total == pytest.approx(2 / 5)


def test_attribute_found_in_the_title_as_whole_words_only() -> None:
    # "slim fit" is not among the attributes but is in the title: it counts; "cotton" inside "cottonwood" does not
    shirt = _shirt(title="Cottonwood Slim Fit T-Shirt", brand="Cottonwood", attributes=("crew neck",))
    parts = purchase_reward(shirt, {}, GOAL)
    assert parts.attributes_matched == 1
    # title nouns of the goal: northwind, t, shirt -> 2 of 3 in the title: r_type stays 1
    assert parts.total == pytest.approx((1 + 0 + 1) / 5)


def test_type_factor_levels() -> None:
    # same category path at two levels (clothing > ...), no noun of the goal title: title_score 0 -> r_type 0
    shoes = _shirt(title="Kestrel Lightweight Running Shoes", brand="Kestrel", type_name="running shoes")
    assert type_factor(shoes, GOAL) == (0.0, 0.0, False, False)  # clothing/shoes vs clothing/tops: one level
    # brand matches (1 of 3 nouns = 0.33 > 0.2): r_type 1 although type and category differ (WebShop's quirk)
    pan = _shirt(title="Northwind Non Stick Frying Pan", brand="Northwind", type_name="frying pan")
    assert type_factor(pan, GOAL)[0] == 1.0


@pytest.mark.parametrize(
    ("query_match", "category_match", "title_score", "expected"),
    [
        (True, False, 0.5, 1.0),
        (False, True, 0.15, 1.0),  # category match keeps 1 while the title score is >= 0.1
        (False, False, 0.25, 1.0),  # > 0.2 alone is enough
        (False, False, 0.2, 0.5),  # exactly 0.2 is not > 0.2
        (False, False, 0.1, 0.5),
        (True, True, 0.09, 0.1),  # under 0.1 overrides the matches
        (True, True, 0.0, 0.0),
    ],
)
def test_type_level_thresholds(query_match: bool, category_match: bool, title_score: float, expected: float) -> None:
    assert type_level(query_match, category_match, title_score) == expected


def test_wrong_type_zeroes_everything() -> None:
    lamp = _shirt(title="Lumen Led Desk Lamp", brand="Lumen", type_name="desk lamp")
    parts = purchase_reward(lamp, {"size": "large", "color": "navy"}, GOAL)
    assert parts.r_type == 0.0 and parts.total == 0.0
