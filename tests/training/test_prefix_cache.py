"""The transformers backend's kept KV caches: a prompt is prefilled from where it parts from what
the backend computed before, the replies are those of a prefill from scratch, the store stays in
its budget, and the engine drops it when a run starts (the weights may have been trained)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_arena.rollouts import TransformersBackend, World
from gpu_arena.rollouts.kvcache import BLOCK, PrefixStore, block_hashes
from gpu_arena.training.lookahead import improve
from gpu_arena.training.presets import load_pretrained
from gpu_arena.training.rollouts import BatchedSampler


def _kv(n: int, value: float = 0.0) -> list[tuple[object, object]]:
    import torch

    return [(torch.full((2, n, 4), value), torch.full((2, n, 4), value)) for _ in range(3)]


def test_the_longest_shared_prefix_is_found_and_checked() -> None:
    store = PrefixStore()
    a = list(range(100))
    b = list(range(40)) + [999] * 60
    store.add(a, _kv(100, 1.0))
    store.add(b, _kv(100, 2.0))
    entry, n = store.lookup([*range(70), 5, 6])
    assert entry is not None and entry.ids == a and n == 70  # whole blocks, then id by id
    entry, n = store.lookup([*range(40), 999, 999, 7])
    assert entry is not None and entry.ids == b and n == 42
    entry, n = store.lookup(a)
    assert entry is not None and n == len(a) - 1  # the last id is always fed, for its logits
    assert store.lookup([7] * 50) == (None, 0)
    assert store.lookup(list(range(10))) == (None, 0)  # shorter than a block: nothing to share
    assert store.hits == 3 and store.lookups == 5 and store.reused_tokens == 70 + 42 + 99


def test_a_hash_collision_is_not_a_hit() -> None:
    store = PrefixStore()
    store.add(list(range(32)), _kv(32))
    key = next(iter(store.entries))
    store.entries[key].ids[3] = -1  # the index says "this prefix", the ids say otherwise
    assert store.lookup(list(range(40))) == (None, 0)


def test_the_store_keeps_to_its_budget_least_recently_used_out() -> None:
    one = sum(k.numel() * 4 + v.numel() * 4 for k, v in _kv(BLOCK * 2))
    store = PrefixStore(budget_bytes=2 * one)
    seqs = [[s] * (BLOCK * 2) for s in range(3)]
    store.add(seqs[0], _kv(BLOCK * 2))
    store.add(seqs[1], _kv(BLOCK * 2))
    assert store.lookup(seqs[0] + [1])[1] == BLOCK * 2  # seqs[0] is now the most recently used
    store.add(seqs[2], _kv(BLOCK * 2))
    assert store.bytes <= store.budget_bytes and len(store.entries) == 2
    assert store.lookup(seqs[1] + [1]) == (None, 0)  # the least recently used went
    assert store.lookup(seqs[0] + [1])[1] == BLOCK * 2
    assert all(h in store.index for e in store.entries.values() for h in e.hashes)
    store.clear()
    assert not store.entries and not store.index and store.bytes == 0
    assert len(block_hashes(list(range(BLOCK * 3 + 5)))) == 3


def test_episodes_played_with_kept_caches_are_the_episodes_played_without(tiny_sft: Path) -> None:
    model, tok = load_pretrained(tiny_sft)
    worlds = [World("single_trade", "train", s) for s in (3, 4)] + [World("market_round", "train", 5)]
    played = {}
    for budget in (0, 1 << 28):
        sampler = BatchedSampler(model, tok, temperature=0.0, max_new_tokens=40, constrained=True)
        sampler.backend = sampler.engine.backend = TransformersBackend(model, tok, prefix_cache_bytes=budget)
        rollouts, _ = sampler.play(worlds)
        played[budget] = ([r.actions for r in rollouts], [r.messages for r in rollouts],
                          sampler.backend.stats.prompt_tokens, sampler.backend.prefixes)
    assert played[0][:2] == played[1 << 28][:2]
    store = played[1 << 28][3]
    assert played[0][3] is None and store is not None and store.hits > 0
    assert played[1 << 28][2] < played[0][2]  # fewer prompt tokens prefilled


def test_a_lookahead_with_kept_caches_improves_as_without(tiny_sft: Path) -> None:
    model, tok = load_pretrained(tiny_sft)
    worlds = [World("single_trade", "train", s) for s in (3, 4)]
    out = {}
    for budget in (0, 1 << 28):
        sampler = BatchedSampler(model, tok, temperature=1.0, max_new_tokens=40, constrained=True,
                                 proposal="rule_expert")
        sampler.backend = sampler.engine.backend = TransformersBackend(model, tok, prefix_cache_bytes=budget)
        improved, _ = improve(sampler, worlds, samples=1, proposals=1, seed=3, finisher="rule_expert")
        out[budget] = [x.greedy_return for x in improved]
    assert out[0] == pytest.approx(out[1 << 28], abs=1e-12)  # the greedy episodes are the same


def test_a_run_starts_with_no_kept_caches(tiny_sft: Path) -> None:
    model, tok = load_pretrained(tiny_sft)
    sampler = BatchedSampler(model, tok, temperature=0.0, max_new_tokens=40, constrained=True)
    sampler.play([World("single_trade", "train", 3)])
    store = sampler.backend.prefixes
    assert store is not None and store.entries
    sampler.engine.begin()  # what play and the lookahead do first: training may have changed the weights
    assert not store.entries


def test_no_forward_pass_of_a_played_episode_computes_every_positions_logits(tiny_sft: Path) -> None:
    """A prefill wants the KV cache; every position's logits are batch x length x vocabulary floats
    (200 coalition_market prompts: some 10 GB, which ended an evaluation in the out-of-memory killer)."""
    model, tok = load_pretrained(tiny_sft)
    widths: list[int] = []
    hook = model.register_forward_hook(lambda _m, _a, out: widths.append(int(out.logits.shape[1])))
    try:
        sampler = BatchedSampler(model, tok, temperature=0.0, max_new_tokens=40, constrained=True)
        sampler.play([World("coalition_market", "train", s) for s in (3, 4)])
    finally:
        hook.remove()
    store = sampler.backend.prefixes
    assert store is not None and store.hits > 0  # later turns were prefilled from kept caches
    assert widths and set(widths) == {1}


def test_a_prefill_in_chunks_plays_the_episodes_of_one_piece_within_its_budget(tiny_sft: Path) -> None:
    """A lookahead's forks of long coalition_market prompts prefilled in one forward took gigabytes
    (rows x new ids x width of attention mask, decision 0040): a bounded prefill runs in chunks."""
    from gpu_arena.rollouts.backends import PREFILL_BUDGET, prefill_chunk

    model, tok = load_pretrained(tiny_sft)
    worlds = [World("coalition_market", "train", s) for s in (3, 4)]
    budget = 50_000  # a few dozen ids a forward for two rows of some thousand ids
    shapes: list[tuple[int, int, int]] = []

    def record(_m: object, _args: object, kwargs: dict[str, object]) -> None:
        ids, mask = kwargs.get("input_ids"), kwargs.get("attention_mask")
        if ids is not None and mask is not None and ids.shape[1] > 1:  # type: ignore[attr-defined]
            shapes.append((int(ids.shape[0]), int(ids.shape[1]), int(mask.shape[1])))  # type: ignore[attr-defined]

    played = {}
    for limit in (PREFILL_BUDGET, budget):
        sampler = BatchedSampler(model, tok, temperature=0.0, max_new_tokens=40, constrained=True)
        sampler.backend = sampler.engine.backend = TransformersBackend(model, tok, prefill_budget=limit)
        hook = model.register_forward_pre_hook(record, with_kwargs=True) if limit == budget else None
        try:
            rollouts, _ = sampler.play(worlds)
        finally:
            if hook is not None:
                hook.remove()
        played[limit] = [r.actions for r in rollouts]
    assert played[budget] == played[PREFILL_BUDGET]
    assert shapes and all(rows * new * width <= budget for rows, new, width in shapes)
    assert sum(rows * new for rows, new, _ in shapes) > 4 * max(rows * new for rows, new, _ in shapes)  # chunks
    assert prefill_chunk(96, 4045) == (1 << 27) // (96 * 4045) and prefill_chunk(10**6, 10**6) == 1


def test_prefill_groups_cover_every_row_once_at_the_least_cost() -> None:
    """Runs of the rows sorted by rest, each group paying its longest rest a row plus one forward's
    cost, and no cheaper grouping exists (checked against every split of the sorted rows)."""
    import itertools
    import random

    from gpu_arena.rollouts.backends import prefill_groups

    def cost(groups: list[list[int]], rest: list[int], per: int) -> int:
        return sum(len(g) * (max(rest[r] for r in g) - 1) + per for g in groups if max(rest[r] for r in g) > 1)

    rng = random.Random(0)
    for _ in range(200):
        rest = [rng.choice([1, 1, rng.randint(2, 40), rng.randint(2, 600)]) for _ in range(rng.randint(1, 8))]
        per = rng.choice([0, 16, 256])
        groups = prefill_groups(rest, per)
        assert sorted(r for g in groups for r in g) == list(range(len(rest)))
        order = [r for g in groups for r in g]
        assert [rest[r] for r in order] == sorted(rest, reverse=True)
        assert sum(1 for g in groups if max(rest[r] for r in g) == 1) <= 1  # rows with nothing to prefill: together
        best = min(cost([order[a:b] for a, b in itertools.pairwise((0, *cuts, len(order)))], rest, per)
                   for k in range(len(order)) for cuts in itertools.combinations(range(1, len(order)), k))
        assert cost(groups, rest, per) == best
    assert prefill_groups([483, 10, 5, 400, 1, 1, 300, 20]) == [[0, 3, 6], [7, 1, 2], [4, 5]]


def test_a_prefill_in_groups_leaves_the_cache_of_one_prefill(tiny_sft: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows parting from their kept caches at different columns are prefilled in groups, each from its
    own longest rest: every key and value the mask shows is the one-piece prefill's, and the replies
    are the same."""
    import torch

    from gpu_arena.rollouts import backends

    model, tok = load_pretrained(tiny_sft)
    rng = torch.Generator().manual_seed(0)
    kept = [torch.randint(5, 200, (n,), generator=rng).tolist() for n in (60, 90)]
    prompts = [kept[0] + torch.randint(5, 200, (300,), generator=rng).tolist(), kept[0] + [7, 8, 9],
               kept[1] + [11], kept[1] + torch.randint(5, 200, (250,), generator=rng).tolist(), kept[1] + [12]]
    assert len(backends.prefill_groups([300, 3, 1, 250, 1])) > 1
    out = {}
    for grouped in (False, True):
        backend = TransformersBackend(model, tok)
        backend.generate(kept, temperature=0.0, top_p=1.0, max_new_tokens=1, seed=0)  # the store holds them
        if not grouped:
            monkeypatch.setattr(backends, "prefill_groups", lambda rest, cost=0: [list(range(len(rest)))])
        _ids, mask, cache, layout = backend._prepare(prompts)
        monkeypatch.undo()
        assert sorted(layout.rest) == [1, 1, 3, 250, 300] and layout.C == 90
        seen = mask[:, : layout.W - 1].bool()
        out[grouped] = ([layer.keys.permute(0, 2, 1, 3)[seen] for layer in cache.layers],
                        backend.generate(prompts, temperature=0.0, top_p=1.0, max_new_tokens=12, seed=0))
    for a, b in zip(out[False][0], out[True][0], strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    assert out[False][1] == out[True][1]
