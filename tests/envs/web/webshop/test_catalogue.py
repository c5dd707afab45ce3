"""The generated shops: deterministic, exactly one product meets the goal, and the splits hold what they say."""

from __future__ import annotations

import pytest

from turnkit.envs.web.webshop.catalogue import SPLITS, find_target, generate_shop, satisfies
from turnkit.envs.web.webshop.search import RESULTS_PER_PAGE, search
from turnkit.envs.web.webshop.taxonomy import ID_TYPES, OOD_TYPES, held_out_pairs, type_named

SEEDS = range(200)


@pytest.mark.parametrize("split", SPLITS)
def test_one_product_satisfies_each_goal_and_ids_are_unique(split: str) -> None:
    for seed in SEEDS:
        shop, goal = generate_shop(seed, split)
        assert sum(satisfies(p, goal) for p in shop.products) == 1, (split, seed)
        assert len({p.pid for p in shop.products}) == len(shop.products)
        target = find_target(shop, goal)
        assert target.title == goal.title and target.price <= goal.price_upper


def test_same_seed_same_shop_and_seeds_differ() -> None:
    assert generate_shop(11, "id") == generate_shop(11, "id")
    assert generate_shop(11, "id")[0].products != generate_shop(12, "id")[0].products


def _pairs(ptype_name: str, attributes: tuple[str, ...]) -> set[tuple[int, int]]:
    ptype = type_named(ptype_name)
    idx = sorted(ptype.attributes.index(a) for a in attributes if a in ptype.attributes)
    return {(a, b) for a in idx for b in idx if a < b} & held_out_pairs(ptype)


def test_id_goals_are_familiar_and_never_combine_a_held_out_pair() -> None:
    id_names = {t.name for t in ID_TYPES}
    for seed in SEEDS:
        shop, goal = generate_shop(seed, "id")
        assert goal.type_name in id_names
        assert all(a in type_named(goal.type_name).attributes for a in goal.attributes)
        assert not _pairs(goal.type_name, goal.attributes)
        assert all(p.type_name in id_names for p in shop.products)


def test_combo_goals_combine_a_held_out_pair_of_familiar_values() -> None:
    for seed in SEEDS:
        _, goal = generate_shop(seed, "combo")
        assert all(a in type_named(goal.type_name).attributes for a in goal.attributes)
        assert _pairs(goal.type_name, goal.attributes)


def test_ood_goals_ask_for_an_unseen_category_or_value() -> None:
    ood_names = {t.name for t in OOD_TYPES}
    kinds = set()
    for seed in SEEDS:
        _, goal = generate_shop(seed, "ood")
        unseen_type = goal.type_name in ood_names
        unseen_value = any(a in type_named(goal.type_name).ood_attributes for a in goal.attributes)
        assert unseen_type or unseen_value
        kinds.add(unseen_type)
    assert kinds == {True, False}  # both kinds occur


@pytest.mark.parametrize("split", SPLITS)
def test_the_goal_words_find_the_target_on_the_first_result_page(split: str) -> None:
    for seed in SEEDS:
        shop, goal = generate_shop(seed, split)
        hits = search(shop, " ".join((*goal.attributes, goal.type_name)))
        assert find_target(shop, goal) in hits[:RESULTS_PER_PAGE], (split, seed)


def test_unknown_split_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown WebShop split 'test'"):
        generate_shop(0, "test")
