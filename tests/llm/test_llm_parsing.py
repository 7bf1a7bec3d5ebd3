"""parse_action and the tool schemas: every shape a model answers in, fuzzed; schemas from the wire model."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gpu_arena import GpuArenaEnv
from gpu_arena.core.engine import Episode
from gpu_arena.core.policy import RandomPolicy
from gpu_arena.core.records import action_to_dict
from gpu_arena.core.types import ACTION_TYPES, RejectedAction
from gpu_arena.llm import (
    FORMAT_ERROR_CODES,
    FormatError,
    action_schema,
    action_tools,
    json_mode_instruction,
    parse_action,
)
from gpu_arena.llm.tools import ACTION_FIELDS, REQUIRED_FIELDS
from gpu_arena.models import ArenaAction


def same(a: ArenaAction | FormatError, data: dict[str, Any]) -> None:
    assert isinstance(a, ArenaAction), a
    assert a.model_dump(exclude={"metadata"}) == ArenaAction.model_validate(data).model_dump(exclude={"metadata"})


OFFER = {"action_type": "send_offer", "target_lab_id": "lab_1", "block_ids": ["b_0_1"],
         "requested_block_ids": ["b_1_0"], "payment": 12.5, "conditions": {"no_resale": True}}


@pytest.mark.parametrize("text", [
    json.dumps(OFFER),
    f"```json\n{json.dumps(OFFER)}\n```",
    f"```\n{json.dumps(OFFER, indent=2)}\n```",
    f"I should buy b_1_0, it is worth 24 to me. {json.dumps(OFFER)} That is my move.",
    f"Thinking: {{not json}} ... final answer: {json.dumps(OFFER)}",
    f"<tool_call>\n{json.dumps({'name': 'send_offer', 'arguments': {k: v for k, v in OFFER.items() if k != 'action_type'}})}\n</tool_call>",
    json.dumps([{"name": "send_offer", "arguments": json.dumps({k: v for k, v in OFFER.items() if k != "action_type"})}]),
])
def test_text_shapes(text: str) -> None:
    same(parse_action(text), OFFER)


def test_tool_call_shapes() -> None:
    args = {k: v for k, v in OFFER.items() if k != "action_type"}
    same(parse_action({"type": "function", "function": {"name": "send_offer", "arguments": json.dumps(args)}}), OFFER)
    same(parse_action({"name": "send_offer", "arguments": args}), OFFER)
    same(parse_action([{"function": {"name": "send_offer", "arguments": json.dumps(args)}},
                       {"function": {"name": "wait", "arguments": "{}"}}]), OFFER)  # the first call acts
    same(parse_action({"function": {"name": "wait", "arguments": ""}}), {"action_type": "wait"})
    same(parse_action(OFFER), OFFER)

    class Fn:  # the shape of openai's ChatCompletionMessageToolCall
        name = "accept_offer"
        arguments = '{"offer_id": "o_3"}'

    class Call:
        function = Fn()

    same(parse_action(Call()), {"action_type": "accept_offer", "offer_id": "o_3"})


@pytest.mark.parametrize(("output", "code"), [
    ("", "format_empty"),
    ("   \n ", "format_empty"),
    (None, "format_empty"),
    ([], "format_empty"),
    ("I will wait.", "format_no_action"),
    ('{"a": 1}', "format_no_action"),
    ("42", "format_no_action"),
    ('{"action_type": "send_offer", "payment": 12', "format_invalid_json"),
    ("```json\n{'action_type': 'wait'}\n```", "format_invalid_json"),
    ('{"action_type": "launch_rockets"}', "format_unknown_action"),
    ({"name": "launch_rockets", "arguments": "{}"}, "format_unknown_action"),
    ('{"action_type": "send_offer", "payment": "lots"}', "format_invalid_arguments"),
    ('{"action_type": "wait", "bogus": 1}', "format_invalid_arguments"),
    ('{"action_type": "send_offer", "block_ids": "b_0_1"}', "format_invalid_arguments"),
    ({"name": "wait", "arguments": "[1, 2]"}, "format_invalid_arguments"),
    ({"name": "wait", "arguments": "{oops"}, "format_invalid_json"),
    ({"name": "wait", "arguments": '{"action_type": "finish"}'}, "format_invalid_arguments"),
    (12345, "format_no_action"),
    # numbers and text no record can carry (JSON out has no NaN; UTF-8 has no lone surrogate)
    ('{"action_type": "send_offer", "target_lab_id": "lab_1", "payment": NaN}', "format_invalid_arguments"),
    ('{"action_type": "make_pitch", "payment": Infinity}', "format_invalid_arguments"),
    ('{"action_type": "send_offer", "target_lab_id": "lab_1", "payment": 1e400}', "format_invalid_arguments"),
    ('{"action_type": "send_message", "message": "hi \\ud800"}', "format_invalid_arguments"),
    ({"name": "form_coalition", "arguments": '{"shares": {"lab_0": NaN}}'}, "format_invalid_arguments"),
])
def test_format_errors(output: Any, code: str) -> None:
    err = parse_action(output)
    assert isinstance(err, FormatError) and isinstance(err, RejectedAction)
    assert err.code == code and err.message
    assert code in FORMAT_ERROR_CODES


def test_illegal_but_well_formed_actions_parse() -> None:
    # meaning is the rules' business: a negative payment or an unknown offer is a rules error later
    a = parse_action('{"action_type": "send_offer", "target_lab_id": "lab_9", "payment": -5}')
    assert isinstance(a, ArenaAction) and a.payment == -5


def test_long_whitespace_in_a_tool_tag_is_read_in_linear_time() -> None:
    # a lazy group between two \s* tried every split of a run of spaces: 10 KB took 158 ms, 30 KB
    # 1.4 s. Guarded by the pattern, not by a timer (speed lives in benchmarks); the long tag still parses
    from gpu_arena.llm.parsing import _TOOL_TAG

    assert "\\s*(.*?)\\s*" not in _TOOL_TAG.pattern
    text = "<tool_call>" + " " * 15_000 + '{"action_type": "wait"}' + " " * 15_000 + "</tool_call>"
    action = parse_action(text)
    assert not isinstance(action, FormatError) and action.action_type == "wait"


def test_huge_and_nested_inputs_are_bounded() -> None:
    assert isinstance(parse_action("{" * 100_000), FormatError)
    assert isinstance(parse_action("[" * 50_000 + "]" * 50_000), FormatError)
    assert isinstance(parse_action('{"action_type": "wait"}' + " x" * 100_000), ArenaAction)


json_values = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=True) | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12)
field_names = st.sampled_from([*ArenaAction.model_fields, "bogus", "name", "arguments", "function"])
action_like = st.builds(
    lambda t, extra: {"action_type": t, **extra},
    st.sampled_from([*ACTION_TYPES, "fly", ""]),
    st.dictionaries(field_names, json_values, max_size=5))
tool_like = st.builds(
    lambda name, args, as_text: {"function": {"name": name, "arguments": json.dumps(args) if as_text else args}},
    st.sampled_from([*ACTION_TYPES, "fly"]), st.dictionaries(field_names, json_values, max_size=4), st.booleans())


def wrapped(obj: Any, style: int) -> str:
    text = json.dumps(obj)
    return [text, f"```json\n{text}\n```", f"Sure. {text} Done.", f"<tool_call>{text}</tool_call>", text[: len(text) // 2]][style]


@settings(max_examples=400)
@given(st.one_of(
    st.text(max_size=300),
    st.binary(max_size=200),
    json_values,
    action_like,
    tool_like,
    st.lists(tool_like, max_size=3),
    st.builds(wrapped, st.one_of(action_like, tool_like, json_values), st.integers(0, 4)),
))
@example("```")
@example("<tool_call>")
@example('{"action_type": "wait"}{')
@example({"function": None})
@example({"function": {"name": None}})
@example({"action_type": None})
@example(b"\xff\xfe{")
def test_parse_never_raises(output: Any) -> None:
    result = parse_action(output)
    assert isinstance(result, ArenaAction | FormatError)
    if isinstance(result, FormatError):
        assert result.code in FORMAT_ERROR_CODES
        assert not result.message.startswith("unreadable output"), result  # the last-resort guard never fires
        assert len(result.raw) <= 300


@settings(max_examples=30)
@given(st.sampled_from(["single_trade", "market_round", "coalition_market"]), st.integers(0, 10_000),
       st.integers(0, 4))
def test_round_trip_of_real_actions(task: str, seed: int, style: int) -> None:
    """Actions a policy really plays survive every text wrapping and the tool-call form."""
    ep = Episode.new(task, "train", seed, controlled=())
    policies = {lid: RandomPolicy(seed + i) for i, lid in enumerate(ep.world.labs)}
    for _ in range(2):
        actions = {lid: p.act(ep.observe(lid, aids=False)) for lid, p in policies.items()}
        for action in actions.values():
            data = action_to_dict(action)
            if style == 4:
                args = {k: v for k, v in data.items() if k != "action_type"}
                same(parse_action({"function": {"name": data["action_type"], "arguments": json.dumps(args)}}), data)
                jsonschema.validate(args, action_schema(data["action_type"]))
            else:
                same(parse_action(wrapped(data, style)), data)
        ep.step(actions)


def test_format_error_reaches_the_env_with_its_code_and_the_bounded_penalty() -> None:
    env = GpuArenaEnv(task="market_round", opponents="wait")
    env.reset(seed=4)
    err = parse_action("I am not sure what to do")
    obs = env.step(err)
    assert not obs.last_action_result.ok and obs.last_action_result.code == "format_no_action"
    assert obs.reward_breakdown["invalid_action_penalty"] == pytest.approx(-0.01)
    assert env.episode is not None
    assert env.episode.transcript[-1]["actions"]["lab_0"] == {"rejected": "format_no_action", "message": err.message}


def test_format_error_of_an_opponent_keeps_its_code() -> None:
    class Garbler:
        def act(self, observation: Any) -> Any:
            return parse_action("```json\n{broken\n```")

    env = GpuArenaEnv(task="single_trade", opponents={"lab_1": Garbler()})
    env.reset(seed=2)
    env.step(ArenaAction(action_type="wait"))
    assert env.episode is not None
    res = env.episode.last_results["lab_1"]
    assert (res.ok, res.code) == (False, "format_invalid_json")
    assert env.episode.last_rewards["lab_1"]["invalid_action_penalty"] == pytest.approx(-0.01)


# ---------------------------------------------------------------------- tools


def test_one_tool_per_action_type_generated_from_the_wire_model() -> None:
    tools = action_tools()
    assert [t["function"]["name"] for t in tools] == list(ACTION_TYPES)
    wire = ArenaAction.model_json_schema()["properties"]
    used: set[str] = set()
    for tool in tools:
        name, params = tool["function"]["name"], tool["function"]["parameters"]
        assert tool["type"] == "function" and tool["function"]["description"]
        jsonschema.Draft202012Validator.check_schema(params)
        assert list(params["properties"]) == list(ACTION_FIELDS[name])
        assert set(params["required"]) == set(REQUIRED_FIELDS.get(name, ())) <= set(params["properties"])
        for field, schema in params["properties"].items():
            # the type comes from the pydantic model (optional fields lose only their null branch)
            branches = [b for b in wire[field].get("anyOf", [wire[field]]) if b.get("type") != "null"]
            assert schema["type"] == branches[0]["type"]
            used.add(field)
        jsonschema.validate({}, {**params, "required": []})
    assert used == set(wire) - {"metadata", "action_type"}  # every action field is reachable by some tool
    assert action_tools() is not action_tools() and action_tools() == tools  # fresh copies


def test_tool_schemas_refuse_what_parsing_refuses() -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"payment": "lots"}, action_schema("make_pitch"))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"offer_id": "o_1", "bogus": 1}, action_schema("accept_offer"))
    with pytest.raises(ValueError, match="unknown action type"):
        action_schema("fly")


def test_json_mode_instruction_lists_every_action_and_field() -> None:
    text = json_mode_instruction()
    for t in ACTION_TYPES:
        assert f"\n{t}(" in text
        for field in ACTION_FIELDS[t]:
            assert field in text
    example_json = text.split("e.g. ", 1)[1].split("\n", 1)[0]
    assert isinstance(parse_action(example_json), ArenaAction)
