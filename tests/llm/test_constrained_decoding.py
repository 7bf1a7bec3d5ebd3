"""Grammar-constrained decoding: the legal ids come from the seat's own view and satisfy the
rules' id checks; every reply the action grammar allows parses as an action the grammar offers (a
random walk through the grammar, property test); the teacher's own actions are in it; and a
constrained model — in the batched sampler and in ``llm:hf:DIR?constrained=1`` alike — writes only
legal ids and never an answer the parser rejects."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_arena.env import GpuArenaEnv
from gpu_arena.llm.constrain import FIELDS, action_grammar, by_action, legal_ids, legal_lists, seat_grammar
from gpu_arena.llm.matching import grammar_tokenizer
from gpu_arena.llm.parsing import FormatError, parse_action
from gpu_arena.models import ArenaAction
from gpu_arena.training.presets import load_pretrained
from gpu_arena.training.rollouts import BatchedSampler, World

ID_CODES = {"unknown_block", "block_not_owned", "block_started", "unknown_offer", "offer_not_addressed",
            "unknown_job", "job_not_owned", "unknown_lab", "unknown_coalition", "not_a_member"}
TASKS = ["single_trade", "market_round", "coalition_market"]


def _walk(tokenizer: Any, lark: str, rng: random.Random, stop_early: float) -> tuple[list[int], bool]:
    """A random sentence of the grammar, token by token from each step's mask: the end token with
    probability ``stop_early`` where it is allowed (else only when nothing else is). Returns the
    tokens and whether the grammar accepted them."""
    import llguidance
    import numpy as np

    lltok = grammar_tokenizer(tokenizer)
    m = llguidance.LLMatcher(lltok, lark, log_level=0)
    assert not m.is_error(), m.get_error()
    eos = tokenizer.eos_token_id
    out: list[int] = []
    while not m.is_stopped():
        bits = np.unpackbits(np.frombuffer(m.compute_bitmask(), dtype=np.uint8), bitorder="little")
        choices = [int(i) for i in bits[:lltok.vocab_size].nonzero()[0]]
        others = [c for c in choices if c != eos]
        t = eos if eos in choices and (not others or rng.random() < stop_early) else rng.choice(others)
        assert m.consume_token(t)
        out.append(t)
        if t == eos:
            break
    return out, m.is_accepting() or m.is_stopped()


def _read(tokenizer: Any, tokens: list[int], mode: str) -> ArenaAction | FormatError:
    """The action an agent reads from a reply (tools: the tokenizer's response parser first)."""
    import torch

    from gpu_arena.llm.agents import _parsed_tool_calls
    from gpu_arena.llm.tools import action_tools

    if mode == "tools":
        calls = _parsed_tool_calls(tokenizer, torch.tensor(tokens), torch.tensor([0]), action_tools())
        if calls is not None:
            return parse_action(calls[1])
    return parse_action(tokenizer.decode(tokens, skip_special_tokens=True))


def _view_after_waits(task: str, seed: int, rounds: int) -> Any:
    """lab_0's view of a train world after it waited ``rounds`` rounds (or until the end)."""
    env = GpuArenaEnv(task=task, split="train")
    env.reset(seed=seed)
    assert env.episode is not None
    for _ in range(rounds):
        if env.episode.done:
            break
        env.step(ArenaAction(action_type="wait"))
    return env.episode.observe("lab_0")


@pytest.fixture(scope="module")
def tokenizer(tiny_sft: Path) -> Any:
    return load_pretrained(tiny_sft)[1]


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), task=st.sampled_from(TASKS), rounds=st.integers(0, 4),
       mode=st.sampled_from(["tools", "json"]), walk=st.integers(0, 2**31), stop_early=st.sampled_from([0.0, 0.3]))
def test_every_reply_the_grammar_allows_parses(tokenizer: Any, seed: int, task: str, rounds: int, mode: str,
                                               walk: int, stop_early: float) -> None:
    """The parser never rejects a constrained answer: a random walk through a seat's grammar (any
    world, any round, either reply format) ends within the grammar's byte bound, and what it wrote
    parses as one of the actions the grammar offers, with ids from the seat's legal lists."""
    view = _view_after_waits(task, seed, rounds)
    grammar = seat_grammar(view, mode)
    tokens, accepted = _walk(tokenizer, grammar.lark, random.Random(walk), stop_early)
    assert accepted and len(tokens) <= grammar.max_bytes + 1
    action = _read(tokenizer, tokens, mode)
    assert not isinstance(action, FormatError), (tokenizer.decode(tokens), action)
    assert action.action_type in grammar.actions
    legal = legal_ids(view).get(action.action_type, {})
    for name, values in legal.items():
        written = getattr(action, name)
        written = written if isinstance(written, list) else [] if written is None else [written]
        assert set(written) <= set(values), (action.action_type, name, written, values)
    if action.action_type == "send_offer":  # and it asks only for blocks its target owns
        owners = {b.block_id: b.owner for b in view.public_market.blocks}
        assert {owners[b] for b in action.requested_block_ids or ()} <= {action.target_lab_id}


def test_an_offer_asks_only_for_its_targets_blocks(tokenizer: Any) -> None:
    """With two labs in the market an offer to one of them asks only for that lab's blocks, in the
    turn's grammar and in ``reply_fits`` alike; lists that do not say who owns what leave it open."""
    import llguidance

    from gpu_arena.llm.constrain import grammar_of, owned_by
    from gpu_arena.llm.matching import reply_fits

    lists = {src: [] for fields in FIELDS.values() for src in fields.values()}
    lists.update(own_free=["b_0_0"], jobs=["j_0_0"], labs=["lab_1", "lab_2"], market=["b_1_0", "b_2_0", "b_2_1"])
    lists.update(own_unoffered=lists["own_free"], market_unasked=lists["market"])
    paired = {**lists, owned_by("lab_1"): ["b_1_0"], owned_by("lab_2"): ["b_2_0", "b_2_1"]}
    cases = {("lab_1", '["b_1_0"]'): True, ("lab_2", '["b_2_0", "b_2_1"]'): True, ("lab_2", '["b_1_0"]'): False,
             ("lab_1", '["b_1_0", "b_2_0"]'): False, ("lab_1", '["b_2_1"]'): False}
    for (target, asked), expected in cases.items():
        text = (f'<tool_call>\n{{"name": "send_offer", "arguments": {{"target_lab_id": "{target}", '
                f'"requested_block_ids": {asked}, "payment": 2.5}}}}\n</tool_call>')
        ids = tokenizer.encode(text, add_special_tokens=False)
        for shown, want in ((paired, expected), (lists, True)):
            m = llguidance.LLMatcher(grammar_tokenizer(tokenizer), grammar_of(shown, "lab_0").lark, log_level=0)
            accepted = m.try_consume_tokens(ids) == len(ids) and m.is_accepting()
            assert accepted == want, (target, asked, shown is paired)
            assert reply_fits(tokenizer, [*ids, tokenizer.eos_token_id], shown, "tools") == want, (target, asked)


def test_actions_without_a_legal_required_id_are_not_offered() -> None:
    legal = {a: {f: [] for f in fields} for a, fields in FIELDS.items()}
    legal["send_offer"]["target_lab_id"] = ["lab_1"]
    grammar = action_grammar(legal)
    assert "accept_offer" not in grammar.actions and "release_capacity" not in grammar.actions
    assert "commit_to_coalition" not in grammar.actions and "reserve_capacity" not in grammar.actions
    assert {"wait", "finish", "allocate_to_job"} <= set(grammar.actions)
    assert "send_offer" not in grammar.actions  # a lab to write to but no block to name: money alone is no offer
    assert "block_ids" not in grammar.lark  # no legal block: no block field anywhere
    legal["send_offer"]["requested_block_ids"] = ["b_1_0"]
    assert "send_offer" in action_grammar(legal).actions


@pytest.mark.parametrize("task", TASKS)
def test_the_teachers_actions_are_in_the_grammar(tokenizer: Any, task: str) -> None:
    """What rule_expert writes (as the SFT data renders it) is a sentence of its turn's grammar,
    whenever the rules accept it: the grammar takes nothing away from the teacher's legal play."""
    import llguidance

    from gpu_arena.policies import make_policy
    from gpu_arena.training.data import render_reply

    lltok = grammar_tokenizer(tokenizer)
    for seed in range(3):
        env = GpuArenaEnv(task=task, split="train")
        env.reset(seed=seed)
        assert env.episode is not None
        teacher = make_policy("rule_expert", seed=seed)
        from gpu_arena.core.policy import seat_view

        while not env.episode.done:
            view = env.episode.observe("lab_0")
            action = teacher.act(seat_view(teacher, env.episode, "lab_0"))
            _, calls = render_reply(action, "tools", "call_0")
            text = tokenizer.apply_chat_template([{"role": "assistant", "content": "", "tool_calls": calls}],
                                                 tokenize=False)
            reply = text[text.index("<tool_call>"):text.index("</tool_call>") + len("</tool_call>")]
            m = llguidance.LLMatcher(lltok, seat_grammar(view).lark, log_level=0)
            ids = tokenizer.encode(reply, add_special_tokens=False)
            fits = m.try_consume_tokens(ids) == len(ids) and m.is_accepting()
            result = env.step(action).last_action_result
            assert fits or not result.ok, (task, seed, reply)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), task=st.sampled_from(["single_trade", "market_round", "coalition_market"]))
def test_every_legal_id_passes_the_rules_id_checks(seed: int, task: str) -> None:
    """A one-id action built from the legal lists is never refused for its id (it may be refused
    for something else: a price, a job the block cannot serve)."""
    env = GpuArenaEnv(task=task, split="train")
    env.reset(seed=seed)
    assert env.episode is not None
    view = env.episode.observe("lab_0")
    legal = legal_ids(view)
    assert set(legal) == set(FIELDS)
    actions: list[dict[str, Any]] = []
    for b in legal["allocate_to_job"]["block_ids"]:
        actions.append({"action_type": "allocate_to_job", "block_ids": [b]})
    for o in legal["accept_offer"]["offer_id"]:
        actions.append({"action_type": "accept_offer", "offer_id": o})
    labs = legal["send_offer"]["target_lab_id"]
    for b in legal["send_offer"]["requested_block_ids"]:
        owner = next(x.owner for x in view.public_market.blocks if x.block_id == b)
        assert owner in labs
        actions.append({"action_type": "send_offer", "target_lab_id": owner, "requested_block_ids": [b],
                        "payment": 0.01, "expires_in": 1})
    for a in actions:
        fork = env.fork()
        obs = fork.step(ArenaAction(**a))
        assert obs.last_action_result.ok or obs.last_action_result.code not in ID_CODES, (a, obs.last_action_result)


def _ids_are_legal(world: World, actions: list[Any]) -> None:
    env = GpuArenaEnv(task=world.task, split=world.split)
    env.reset(seed=world.seed)
    assert env.episode is not None
    for a in actions:
        legal = legal_ids(env.episode.observe("lab_0"))
        assert not isinstance(a, FormatError), a
        if a.action_type in legal:
            for name, values in legal[a.action_type].items():
                written = getattr(a, name)
                written = written if isinstance(written, list) else [] if written is None else [written]
                assert set(written) <= set(values), (a.action_type, name, written, values)
        env.step(a)


def test_a_constrained_sampler_writes_only_legal_ids(tiny_sft: Path) -> None:
    model, tok = load_pretrained(tiny_sft)
    worlds = [World("single_trade", "holdout", s) for s in range(6)] + [World("market_round", "holdout", 0)]
    for temperature in (0.0, 1.5):
        rollouts, _ = BatchedSampler(model, tok, temperature=temperature, max_new_tokens=48,
                                     constrained=True).play(worlds, seed=5)
        for r in rollouts:
            assert r.format_errors == 0
            _ids_are_legal(r.world, r.actions)


def test_the_constrained_agent_plays_as_the_constrained_sampler(tiny_sft: Path) -> None:
    """``llm:hf:DIR?constrained=1`` (one generate per turn) and the batched sampler give the same
    greedy episodes: the evaluated policy is the one the rollouts trained."""
    from gpu_arena.evaluation import run_evaluation

    model, tok = load_pretrained(tiny_sft)
    worlds = [World("single_trade", "holdout", s) for s in range(3)]
    rollouts, _ = BatchedSampler(model, tok, temperature=0.0, max_new_tokens=40, constrained=True).play(worlds)
    rows = run_evaluation([f"llm:hf:{tiny_sft}?mode=tools&max_tokens=40&constrained=1"], ["single_trade"],
                          "holdout", [0, 1, 2])
    assert [r.episode_return for r in sorted(rows, key=lambda r: r.seed)] == [r.episode_return for r in rollouts]
    with pytest.raises(ValueError, match="constrained"):
        run_evaluation([f"llm:hf:{tiny_sft}?constrained=2"], ["single_trade"], "holdout", [0])


def test_the_pipeline_evaluates_the_decoder_it_trained_with() -> None:
    from gpu_arena.training.pipeline import PipelineRun, llm_policy

    assert llm_policy(Path("run/rl"), True).endswith("&constrained=1")
    assert "constrained" not in llm_policy(Path("run/rl"))
    run = PipelineRun(output="run", constrained=True)
    assert "--constrained" in run.command_line() and run.resolved().constrained is True
    assert "--free" in PipelineRun(output="run", constrained=False).command_line()


@pytest.mark.parametrize("task", TASKS)
def test_accept_offers_only_what_can_settle(task: str) -> None:
    """``accept_offer`` names an incoming offer only when the seat's view says it can settle and
    it is worth taking, and leaves out only those the rules would refuse or that lower the seat's
    position: accepting each incoming offer on a fork agrees with the legal list, except where the
    view cannot tell."""
    from gpu_arena.core.policy import seat_view
    from gpu_arena.policies import make_policy

    seen = 0
    for seed in range(24):
        env = GpuArenaEnv(task=task, split="train")
        env.reset(seed=seed)
        assert env.episode is not None
        # seats that let offers wait while they use their blocks and money, so some go stale
        player = make_policy(("rule_expert", "greedy_hoarder", "random_valid")[seed % 3], seed=seed)
        while not env.episode.done:
            view = env.episode.observe("lab_0")
            acceptable = set(legal_ids(view)["accept_offer"]["offer_id"])
            for o in view.active_offers:
                if o.status != "open" or o.target != "lab_0":
                    continue
                seen += 1
                result = env.fork().step(ArenaAction(action_type="accept_offer", offer_id=o.offer_id)).last_action_result
                if o.offer_id in acceptable:
                    # what the view cannot show: another lab's must-allocate mark, a move made
                    # earlier in the same round (the rules settle a round's moves in order)
                    hidden = result.code == "no_resale" or result.message.startswith("conflict with an earlier move")
                    assert result.ok or hidden, (task, seed, o, result)
                    assert o.value_to_me >= -1e-9
                else:
                    # it cannot settle, or it would lower the seat's position (worth_taking)
                    assert not result.ok or o.value_to_me < 0, (task, seed, o)
            env.step(player.act(seat_view(player, env.episode, "lab_0")))
    assert seen > 0  # the opponents made offers for the check to judge


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), task=st.sampled_from(TASKS), rounds=st.integers(0, 4),
       mode=st.sampled_from(["tools", "json"]), walk=st.integers(0, 2**31), stop_early=st.sampled_from([0.0, 0.3]),
       source=st.sampled_from(["this", "other", "shuffled"]))
def test_a_reply_fits_exactly_when_its_turns_grammar_accepts_it(tokenizer: Any, seed: int, task: str, rounds: int,
                                                                 mode: str, walk: int, stop_early: float,
                                                                 source: str) -> None:
    """``reply_fits`` (the generic grammar, compiled once, and the ids checked in Python) agrees
    with the turn's own grammar: on sentences of that grammar, of another world's, and of one
    whose legal lists were shuffled (lists out of the view's order). It never accepts what the
    turn's grammar refuses; it may send a reply with coalition shares to the grammar instead."""
    import llguidance

    from gpu_arena.llm.matching import reply_fits

    view = _view_after_waits(task, seed, rounds)
    legal = legal_ids(view)
    rng = random.Random(walk)
    if source == "other":
        other = GpuArenaEnv(task=task, split="train")
        other.reset(seed=seed + 1)
        assert other.episode is not None
        lark = seat_grammar(other.episode.observe("lab_0"), mode).lark
    elif source == "shuffled":
        mixed = {a: {f: rng.sample(v, len(v)) for f, v in fields.items()} for a, fields in legal.items()}
        lark = action_grammar(mixed, mode, [view.controlled_lab_id, *legal["form_coalition"]["member_lab_ids"]]).lark
    else:
        lark = seat_grammar(view, mode).lark
    tokens, _ = _walk(tokenizer, lark, rng, stop_early)
    eos = tokenizer.eos_token_id
    reply = tokens if tokens and tokens[-1] == eos else [*tokens, eos]  # the decoder ends a stopped sentence
    m = llguidance.LLMatcher(grammar_tokenizer(tokenizer), seat_grammar(view, mode).lark, log_level=0)
    body = reply[:-1]
    accepted = m.try_consume_tokens(body) == len(body) and m.is_accepting()
    fits = reply_fits(tokenizer, reply, legal_lists(view), mode)
    text = tokenizer.decode(body)
    assert not fits or accepted, text
    if accepted and '"shares"' not in text:
        assert fits, text


def test_a_reply_out_of_its_turns_grammar_does_not_fit(tokenizer: Any) -> None:
    """Each way a well-formed reply leaves the turn's grammar is caught without compiling it: an id
    not legal, a list out of the view's order or with an id twice, an action not offered, an offer
    that names no block (empty, or money alone: decision 0042), a missing end token; the turn's own
    matcher agrees on every case."""
    import llguidance

    from gpu_arena.llm.matching import reply_fits

    lists = {src: [] for fields in FIELDS.values() for src in fields.values()}
    lists.update(own_free=["b_0_0", "b_0_1", "b_0_2"], jobs=["j_0_0"], labs=["lab_1"], market=["b_1_0"])
    lists.update(own_unoffered=lists["own_free"], market_unasked=lists["market"])
    grammar = action_grammar(by_action(lists))

    def reply(name: str, arguments: str, end: bool = True) -> list[int]:
        text = f'<tool_call>\n{{"name": "{name}", "arguments": {arguments}}}\n</tool_call>'
        ids = tokenizer.encode(text, add_special_tokens=False)
        return [*ids, tokenizer.eos_token_id] if end else ids

    cases = {
        ("allocate_to_job", '{"job_id": "j_0_0", "block_ids": ["b_0_0", "b_0_2"]}', True): True,
        ("allocate_to_job", '{"block_ids": ["b_0_1"]}', True): True,
        ("send_offer", '{"target_lab_id": "lab_1", "requested_block_ids": ["b_1_0"], "payment": 3.5}', True): True,
        ("wait", "{}", True): True,
        ("allocate_to_job", '{"job_id": "j_0_0", "block_ids": ["b_0_2", "b_0_0"]}', True): False,  # order
        ("allocate_to_job", '{"job_id": "j_0_0", "block_ids": ["b_0_0", "b_0_0"]}', True): False,  # twice
        ("allocate_to_job", '{"job_id": "j_0_9", "block_ids": ["b_0_0"]}', True): False,  # not legal
        ("send_offer", '{"target_lab_id": "lab_2", "payment": 1}', True): False,  # not legal
        ("accept_offer", '{"offer_id": "o_1"}', True): False,  # not offered
        ("send_offer", '{"target_lab_id": "lab_1"}', True): False,  # an empty offer
        ("send_offer", '{"target_lab_id": "lab_1", "payment": 0.0, "expires_in": 2}', True): False,  # empty
        ("send_offer", '{"target_lab_id": "lab_1", "payment": 0.0, "requested_payment": 2.5}', True): False,
        ("send_offer", '{"target_lab_id": "lab_1", "payment": 0.0001}', True): False,  # money alone
        ("send_offer", '{"target_lab_id": "lab_1", "block_ids": ["b_0_1"], "requested_payment": 2.5}', True): True,
        ("wait", "{}", False): False,  # no end token
    }
    for (name, arguments, end), expected in cases.items():
        ids = reply(name, arguments, end)
        m = llguidance.LLMatcher(grammar_tokenizer(tokenizer), grammar.lark, log_level=0)
        body = ids[:-1] if end else ids
        accepted = end and m.try_consume_tokens(body) == len(body) and m.is_accepting()
        assert accepted == expected, (name, arguments)
        assert reply_fits(tokenizer, ids, lists) == expected, (name, arguments)


@pytest.mark.parametrize("task", TASKS)
def test_an_open_offer_cannot_be_sent_again(tokenizer: Any, task: str) -> None:
    """Once the seat's offer is open, a new offer may neither give nor ask for any of its blocks
    (the turn's grammar and ``reply_fits`` agree); once it is rejected they are free again."""
    import llguidance

    from gpu_arena.llm.constrain import grammar_of, owned_by
    from gpu_arena.llm.matching import reply_fits

    sent = back = 0
    for seed in range(6):
        env = GpuArenaEnv(task=task, split="train")
        env.reset(seed=seed)
        assert env.episode is not None
        lists = legal_lists(env.episode.observe("lab_0"))
        target = next((lab for lab in lists["labs"] if lists[owned_by(lab)]), None)
        if target is None or not lists["own_free"]:
            continue
        asked, given = lists[owned_by(target)][-1], lists["own_free"][-1]
        offer = ArenaAction(action_type="send_offer", target_lab_id=target, block_ids=[given],
                            requested_block_ids=[asked], payment=1.0)
        assert env.step(offer).last_action_result.ok
        sent += 1
        view = env.episode.observe("lab_0")
        after = legal_lists(view)
        assert given not in after["own_unoffered"] and given in after["own_free"]
        assert asked not in after[owned_by(target)] and asked in after["market"]
        text = (f'<tool_call>\n{{"name": "send_offer", "arguments": {{"target_lab_id": "{target}", '
                f'"block_ids": ["{given}"], "requested_block_ids": ["{asked}"], "payment": 1.0}}}}\n</tool_call>')
        ids = tokenizer.encode(text, add_special_tokens=False)
        m = llguidance.LLMatcher(grammar_tokenizer(tokenizer), grammar_of(after, "lab_0").lark, log_level=0)
        assert not (m.try_consume_tokens(ids) == len(ids) and m.is_accepting())
        assert not reply_fits(tokenizer, [*ids, tokenizer.eos_token_id], after, "tools")
        mine = next(o.offer_id for o in view.active_offers if o.sender == "lab_0" and o.status == "open")
        withdrawn = env.step(ArenaAction(action_type="reject_offer", offer_id=mine)).last_action_result
        if not withdrawn.ok:  # the target accepted it first, in the same round
            continue
        freed = legal_lists(env.episode.observe("lab_0"))  # a round on: a block whose window opened is gone
        assert (given in freed["own_unoffered"]) == (given in freed["own_free"])
        assert (asked in freed[owned_by(target)]) == (asked in freed["market"])
        back += (given in freed["own_unoffered"]) + (asked in freed[owned_by(target)])
    assert sent > 0 and back > 0


def test_an_offer_that_lowers_the_seats_position_is_not_acceptable() -> None:
    """``worth_taking``: an offer whose ``value_to_me`` is negative is left out of ``accept_offer``
    (the teacher never accepts one); one worth nothing or more, or a view without aids, is kept."""
    from types import SimpleNamespace

    from gpu_arena.llm.constrain import worth_taking
    from gpu_arena.policies import make_policy

    assert not worth_taking(SimpleNamespace(value_to_me=-0.01))
    assert worth_taking(SimpleNamespace(value_to_me=0.0)) and worth_taking(SimpleNamespace(value_to_me=3.5))
    assert worth_taking(SimpleNamespace())  # no decision aid to judge by
    left_out = 0
    for seed in range(12):
        env = GpuArenaEnv(task="market_round", split="train")
        env.reset(seed=seed)
        assert env.episode is not None
        player = make_policy("rule_expert", seed=seed)
        while not env.episode.done:
            view = env.episode.observe("lab_0")
            acceptable = set(legal_ids(view).get("accept_offer", {}).get("offer_id", []))
            for o in view.active_offers:
                if o.status == "open" and o.target == "lab_0" and o.value_to_me < 0:
                    assert o.offer_id not in acceptable
                    left_out += 1
            env.step(player.act(view))
    assert left_out > 0  # the archetypes do send offers that would cost the seat


@pytest.mark.parametrize("task", TASKS)
def test_a_new_offer_asks_only_for_blocks_worth_something(task: str) -> None:
    """``worth_asking``: a ``send_offer`` may ask only for blocks whose ``marginal_value`` is above
    zero (the teacher asks for none other), in the whole list and in each target's part of it; a
    counter-offer keeps the whole market, and a view without aids keeps every block."""
    from types import SimpleNamespace

    from gpu_arena.llm.constrain import owned_by, worth_asking
    from gpu_arena.policies import make_policy

    assert not worth_asking(SimpleNamespace(marginal_value=0.0))
    assert not worth_asking(SimpleNamespace(marginal_value=-2.0))
    assert worth_asking(SimpleNamespace(marginal_value=0.01)) and worth_asking(SimpleNamespace())
    left_out = 0
    for seed in range(6):
        env = GpuArenaEnv(task=task, split="train")
        env.reset(seed=seed)
        assert env.episode is not None
        player = make_policy("rule_expert_short", seed=seed)
        while not env.episode.done:
            view = env.episode.observe("lab_0")
            lists = legal_lists(view)
            worth = {b.block_id: b.marginal_value for b in view.public_market.blocks}
            asked = set(lists["market_unasked"])
            assert all(worth[b] > 0 for b in asked)
            assert all(set(lists[owned_by(lab)]) <= asked for lab in lists["labs"])
            left_out += sum(1 for b in lists["market"] if worth[b] <= 0)
            assert set(legal_ids(view)["counter_offer"]["requested_block_ids"]) == set(lists["market"])
            env.step(player.act(view))
    assert left_out > 0  # blocks worth nothing to the seat do come up
