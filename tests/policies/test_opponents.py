"""The ``opponents`` value is read by one parser, ``OpponentsSpec.parse``, in every form the package
takes: the environment's, the evaluation's, the command line's text and the server's wire."""

from __future__ import annotations

from typing import Any

import pytest

from gpu_arena.core.policy import WaitPolicy
from gpu_arena.policies import DEFAULT_OPPONENTS, SELF_PLAY, OpponentsError, OpponentsSpec
from gpu_arena.server.environment import parse_reset_args
from gpu_arena.server.errors import InvalidResetArguments

OTHERS = ["lab_1", "lab_2", "lab_3"]


@pytest.mark.parametrize(("value", "seats"), [
    (None, dict.fromkeys(OTHERS, DEFAULT_OPPONENTS)),
    ("", dict.fromkeys(OTHERS, DEFAULT_OPPONENTS)),
    ({}, dict.fromkeys(OTHERS, DEFAULT_OPPONENTS)),
    ("archetypes", dict.fromkeys(OTHERS, DEFAULT_OPPONENTS)),
    ("selfish", dict.fromkeys(OTHERS, "selfish")),
    (" selfish ", dict.fromkeys(OTHERS, "selfish")),
    ("llm:hf:model?mode=json&max_tokens=8", dict.fromkeys(OTHERS, "llm:hf:model?mode=json&max_tokens=8")),
    (["a", "b", "c"], {"lab_1": "a", "lab_2": "b", "lab_3": "c"}),
    (("a", "b", "c"), {"lab_1": "a", "lab_2": "b", "lab_3": "c"}),
    ("a, b,c", {"lab_1": "a", "lab_2": "b", "lab_3": "c"}),
    ({"lab_2": "wait"}, {"lab_1": DEFAULT_OPPONENTS, "lab_2": "wait", "lab_3": DEFAULT_OPPONENTS}),
    ("lab_2=wait", {"lab_1": DEFAULT_OPPONENTS, "lab_2": "wait", "lab_3": DEFAULT_OPPONENTS}),
    ("lab_1=llm:hf:m?mode=json,lab_3=selfish", {"lab_1": "llm:hf:m?mode=json", "lab_2": DEFAULT_OPPONENTS,
                                                 "lab_3": "selfish"}),
])
def test_every_form_reads_to_the_same_seats(value: Any, seats: dict[str, str]) -> None:
    spec = OpponentsSpec.parse(value)
    assert spec.for_seats(OTHERS) == seats
    assert OpponentsSpec.parse(spec) is spec  # parsed once: a spec passes through
    assert OpponentsSpec.parse(spec.to_value()) == spec  # its plain value reads back to it


def test_policy_objects_sit_in_seats() -> None:
    agent = WaitPolicy()
    assert OpponentsSpec.parse({"lab_1": agent}).for_seats(["lab_1", "lab_2"]) == {"lab_1": agent,
                                                                                 "lab_2": DEFAULT_OPPONENTS}
    assert OpponentsSpec.parse([agent, "selfish"]).names == ("selfish",)


def test_what_the_spec_says_about_itself() -> None:
    assert OpponentsSpec.parse(None).is_default and OpponentsSpec.parse("archetypes").is_default
    assert not OpponentsSpec.parse("archetypes,archetypes").is_default
    spec = OpponentsSpec.parse(SELF_PLAY)
    assert spec.self_play and spec.resolve_self("rule_expert") == OpponentsSpec.parse("rule_expert")
    assert OpponentsSpec.parse("selfish").resolve_self("rule_expert").one == "selfish"
    assert OpponentsSpec.parse("a,b").one is None and OpponentsSpec.parse("lab_1=a").one is None
    assert OpponentsSpec.parse("lab_1=a").to_value() == {"lab_1": "a"}
    assert OpponentsSpec.parse("a,b").to_value() == ["a", "b"]
    assert OpponentsSpec.parse(None).to_value() == DEFAULT_OPPONENTS
    assert OpponentsSpec.parse("lab_1=a").name_for("lab_1") == "a"
    assert OpponentsSpec.parse("lab_1=a").name_for("lab_2") is None


@pytest.mark.parametrize(("value", "words"), [
    ("lab_1=a,b", "expected seat=policy pairs"),
    ("lab_1=", "expected seat=policy pairs"),
    (7, "opponents must be a policy name"),
    ({"lab_1": 3}, "opponent for lab_1 must be a policy name"),
    ({1: "a"}, "not opponents"),
    ([None], "expected policy names"),
])
def test_a_value_of_no_form_is_a_clear_error(value: Any, words: str) -> None:
    with pytest.raises(OpponentsError, match=words):
        OpponentsSpec.parse(value)
    assert issubclass(OpponentsError, ValueError)


@pytest.mark.parametrize(("value", "words"), [
    (["a", "b"], "lists 2 policies for 3 seats"),
    ({"lab_0": "a"}, "names seats that are not opponents: lab_0"),
])
def test_a_spec_that_does_not_fit_the_seats_says_so(value: Any, words: str) -> None:
    with pytest.raises(OpponentsError, match=words):
        OpponentsSpec.parse(value).for_seats(OTHERS)


def test_the_wire_takes_what_it_took() -> None:
    """A reset's ``opponents`` on the server: one registered name as typed, a list or seat -> name;
    the command line's text forms are not names there."""
    for good in ("selfish", "archetypes", ["selfish", "wait"], {"lab_1": "wait"}):
        assert parse_reset_args({"opponents": good}).opponents == good
    for bad in ("", " selfish", "selfish,wait", "lab_1=wait", "nope", ["nope"], [], {}):
        with pytest.raises(InvalidResetArguments):
            parse_reset_args({"opponents": bad})
