"""One episode in flight, on the environment side: everything a turn needs except the model.

A :class:`Session` owns an environment, the seat's conversation, its prompt ids and the
:class:`Rollout` being written. Given the model's reply (the generated ids, a text from a server,
or a scripted move) it reads the reply as the agents read it, steps the environment, renders the
next turn, appends that turn's ids to the prompt (:mod:`gpu_arena.rollouts.chat`) and writes the
seat's action grammar, and hands back a :class:`Turn`: the few hundred new ids and the grammar, all
the generation side needs. Sessions live in worker processes (:mod:`gpu_arena.rollouts.workers`),
so none of this runs on the generation path.

A session's episode is the same one, bit for bit, as today's loop played: the same environment
(the Rust engine where it may play), the same prompts (checked against the full render), the same
reading of replies (a reply in the tool-call shape the grammar writes is read directly; anything
else goes through the tokenizer's response parser and :func:`~gpu_arena.llm.parsing.parse_action`
exactly as before).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from ..core.policy import seat_view
from ..core.types import REWARD_COLUMNS
from ..llm.parsing import FormatError, one_tool_call, parse_action
from ..llm.prompts import Conversation, prompt_tools
from ..llm.shortform import expand, shorten
from ..native.episode import bind_world
from .chat import ChatTokens

Answer = tuple[str, list[dict[str, Any]] | None, int]  # (text, tool calls or None, generated tokens)
Reply = list[int] | str  # what a backend wrote: new token ids, or text (a server that returns text)


@dataclass(frozen=True)
class World:
    """One episode to play: ``task``, ``split`` and world ``seed`` (opponents and shocks follow)."""

    task: str
    split: str
    seed: int
    opponents: str | None = None  # who plays the other seats (None: the engine's setting)


@dataclass
class Rollout:
    """One finished (or cut) episode of the controlled seat."""

    world: World
    messages: list[dict[str, Any]]  # the chat as the model saw it and answered it
    actions: list[Any] = field(default_factory=list)  # ArenaAction or FormatError, one per round
    episode_return: float = 0.0
    columns: dict[str, float] = field(default_factory=lambda: dict.fromkeys(REWARD_COLUMNS, 0.0))
    valid_turns: int = 0
    format_errors: int = 0
    refusals: dict[str, int] = field(default_factory=dict)  # the rules' code -> turns refused with it
    generated_tokens: int = 0
    # the lookahead's changed turns as prompt-completion records (training.lookahead.correction_record)
    corrections: list[dict[str, Any]] = field(default_factory=list)
    # the lookahead's ranked turns as preference records (training.lookahead.pair_record)
    pairs: list[dict[str, Any]] = field(default_factory=list)
    engine: str = ""  # which engine played the episode ("rust" | "python")
    # why the Python core played it (gpu_arena.native.report's reasons; None: Rust did)
    engine_reason: str | None = None
    # verbatim prompts (SessionConfig.verbatim): the first prompt's ids, every id after it (the model's
    # replies and the environment's turns), and 1 where the model wrote the id
    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    completion_mask: list[int] = field(default_factory=list)

    @property
    def turns(self) -> int:
        return len(self.actions)

    def record(self, policy: str, mode: str = "tools") -> dict[str, Any]:
        """The episode as an SFT record (``gpu_arena.sft/1`` row in prompt ``mode``, tools or compact:
        both answer with tool calls), or ``{}`` when a turn could not be read (a format error has no
        action to write). ``tools`` holds the schemas the prompt carried (none in compact mode)."""
        from ..llm.tools import render_reply

        if self.format_errors:
            return {}
        conv_msgs = [m for m in self.messages if m["role"] != "assistant"]
        out: list[dict[str, Any]] = [conv_msgs[0]]
        for i, action in enumerate(self.actions):
            out.append(conv_msgs[i + 1])
            content, calls = render_reply(action, "tools", f"call_{i}")
            msg: dict[str, Any] = {"role": "assistant", "content": content}
            if calls:
                msg["tool_calls"] = calls
                # the next turn answers this call (a tool message) as in the teacher's records
                if i + 2 < len(conv_msgs) and conv_msgs[i + 2]["role"] == "tool":
                    conv_msgs[i + 2] = {**conv_msgs[i + 2], "tool_call_id": calls[0]["id"],
                                        "name": calls[0]["function"]["name"]}
            out.append(msg)
        if len(conv_msgs) > len(self.actions) + 1:  # the final "The episode is over." turn, answered empty
            out.append(conv_msgs[len(self.actions) + 1])
            out.append({"role": "assistant", "content": ""})
        return {"messages": out, "tools": prompt_tools(mode) or [], "task": self.world.task, "split": self.world.split,
                "seed": self.world.seed, "policy": policy, "mode": mode, "episode_return": self.episode_return,
                "steps": self.turns, "invalid_actions": self.turns - self.valid_turns, "columns": dict(self.columns)}


@dataclass(slots=True)
class Turn:
    """What the generation side needs after a move: the prompt ids from position ``ids_from`` on
    (the episode's prompt is cut there and ``ids`` appended), the seat's action grammar as
    ``(lark, max_bytes)`` when decoding is constrained, and whether the episode is over."""

    key: int
    ids_from: int
    ids: list[int]
    grammar: tuple[str, int] | None
    done: bool
    model_len: int = 0  # verbatim prompts: the first model_len of ``ids`` are the model's own reply
    # the seat's legal ids the grammar was built from, by list (gpu_arena.llm.constrain.legal_lists): a
    # greedy reply is checked against them without compiling the grammar (gpu_arena.llm.matching.reply_fits)
    legal: dict[str, list[str]] | None = None


@dataclass(frozen=True)
class SessionConfig:
    """How every session of a worker plays: the tokenizer (any picklable Hugging Face tokenizer),
    the seat, the opponents spec, whether replies are constrained, how prompt ids are built
    (``chat_mode``: ``incremental`` or ``full``, :func:`gpu_arena.rollouts.chat.incremental`), the
    environment's engine and the prompt mode (``prompt_mode``: ``tools`` or ``compact``,
    :data:`gpu_arena.llm.prompts.MODES`; both answer with tool calls). In compact mode each turn's
    prompt is the system prompt and that turn alone: a new prompt each turn, not an extension."""

    tokenizer: Any
    seat: str = "lab_0"
    opponents: Any = None
    constrained: bool = False
    chat_mode: str = "incremental"
    engine: str | None = None
    # the prompt carries the model's reply as it generated it, then what the template adds after the
    # reply's end token (token in, token out: what a policy gradient trains on); needs incremental prompts
    verbatim: bool = False
    prompt_mode: str = "tools"

    def __post_init__(self) -> None:
        if self.prompt_mode not in ("tools", "compact"):
            raise ValueError(f"sessions play in tools or compact mode (tool-call replies), not {self.prompt_mode!r}")
        if self.verbatim and self.windowed:
            raise ValueError("verbatim prompts extend one conversation; compact mode shows each turn alone")

    @property
    def windowed(self) -> bool:
        """Whether each turn's prompt is the system prompt and that turn alone (compact mode)."""
        return self.prompt_mode == "compact"


def read_reply(tok: Any, new: list[int], prompt: list[int], tools: list[dict[str, Any]]) -> Answer:
    """The ``(content, tool calls, tokens)`` of generated ids ``new``, read as
    :class:`~gpu_arena.llm.TransformersAgent` reads them: the tokenizer's response parser for tool
    calls, else the text. A reply that is exactly one call in the template's shape (what the action
    grammar writes) is read directly: the parser reads it the same way (tested), at a fraction of
    the cost."""
    text = tok.decode(new, skip_special_tokens=True)
    parsed = fast_call(text) if getattr(tok, "response_template", None) is not None else None
    if parsed is None:
        import torch

        from ..llm.agents import _parsed_tool_calls

        parsed = _parsed_tool_calls(tok, torch.tensor(new, dtype=torch.long), torch.tensor(prompt, dtype=torch.long),
                                    tools)
    if parsed is not None:
        return parsed[0], parsed[1], len(new)
    return text, None, len(new)


def fast_call(text: str) -> tuple[str, list[dict[str, Any]]] | None:
    """``("", [call])`` for a text that is exactly one ``<tool_call>`` block holding a JSON object
    with a string ``name`` and an object ``arguments`` (:func:`~gpu_arena.llm.parsing.one_tool_call`);
    ``None`` for anything else."""
    call = one_tool_call(text)
    if call is None:
        return None
    return "", [{"type": "function", "function": {"name": call[0], "arguments": call[1]}}]


class Session:
    """One episode of ``world`` with the model in ``config.seat``; see the module docstring. Keys
    are the engine's; a session never talks to the generation side itself."""

    def __init__(self, key: int, world: World, config: SessionConfig, tools: list[dict[str, Any]]) -> None:
        self.key = key
        self.world = world
        self.config = config
        self.tools = tools
        self.env: Any = None
        self.conv = Conversation("compact" if config.windowed else "tools")
        # the schemas a prompt carries (prompt_tools: tools mode alone) are the worker's copy, read
        # only: a fresh copy per episode parsed 14 schemas, 0.6 ms a turn of single_trade's
        schemas = None if config.windowed else tools
        self.chat = ChatTokens(config.tokenizer, schemas, mode=config.chat_mode)
        self.rollout = Rollout(world=world, messages=self.conv.transcript)
        self.obs: Any = None
        self.legal: dict[str, list[str]] | None = None

    @property
    def done(self) -> bool:
        return bool(self.obs is not None and self.obs.done)

    def start(self, grammar: bool = True) -> Turn:
        """Reset the environment on the world; the first prompt (its grammar built unless
        ``grammar`` is False, as :meth:`answer`)."""
        from ..env import GpuArenaEnv

        c = self.config
        opponents = self.world.opponents if self.world.opponents is not None else c.opponents
        self.env = GpuArenaEnv(task=self.world.task, split=self.world.split, seat=c.seat, opponents=opponents,
                               engine=c.engine)
        self.obs = self.env.reset(seed=self.world.seed)
        self.conv.observe(self.obs)
        ids = self.chat.start(self.conv.messages() if c.windowed else self.conv.transcript)
        return Turn(self.key, 0, ids, self._grammar(grammar), False, legal=self.legal)

    def answer(self, reply: Reply | Answer, grammar: bool = True) -> Turn:
        """Play the model's reply (generated ids, text, or an already read answer); the next turn,
        its grammar built unless ``grammar`` is False (its legal ids always)."""
        if isinstance(reply, tuple):
            answer = reply
        elif isinstance(reply, str):
            answer = (reply, None, 0)
        else:
            answer = read_reply(self.config.tokenizer, reply, self.chat.ids, self.tools)
        before = len(self.conv.transcript)
        self.obs = self.play(answer)
        self.conv.observe(self.obs)  # after the last move: "The episode is over.", as the teacher's records end
        verbatim = self.config.verbatim and isinstance(reply, list)
        start = len(self.chat.ids) if self.chat.mode == "incremental" else 0
        if self.obs.done:
            self.rollout.engine, self.rollout.engine_reason = self.engine, self.engine_reason
            # verbatim: the last reply closes the trajectory (a policy gradient needs its tokens too)
            last = list(reply) if verbatim and isinstance(reply, list) else []
            return Turn(self.key, len(self.chat.ids), last, None, True, len(last))
        if self.config.windowed:  # the system prompt and this turn: a new prompt from position 0
            return Turn(self.key, 0, self.chat.start(self.conv.messages()), self._grammar(grammar), False,
                        legal=self.legal)
        if verbatim:
            assert isinstance(reply, list)
            ids = self.chat.extend_verbatim(reply, self.conv.transcript[before:])
            return Turn(self.key, start, ids, self._grammar(grammar), False, len(reply), legal=self.legal)
        ids = self.chat.extend(self.conv.transcript[before:])
        return Turn(self.key, start, ids, self._grammar(grammar), False, legal=self.legal)

    def play(self, answer: Answer) -> Any:
        """Write ``answer`` into the conversation, step it, book it on the rollout; the new observation."""
        content, calls, n_new = answer
        action = expand(parse_action(calls if calls else content), self.obs)  # the short forms' fill: this turn's view
        self.conv.reply(content, calls)
        r = self.rollout
        r.generated_tokens += n_new
        r.actions.append(action)
        if isinstance(action, FormatError):
            r.format_errors += 1
        o = self.env.step(action)
        r.episode_return += float(o.reward or 0.0)
        for c in REWARD_COLUMNS:
            r.columns[c] += float(o.reward_breakdown[c])
        result = o.last_action_result
        if result.ok:
            r.valid_turns += 1
        else:
            r.refusals[result.code] = r.refusals.get(result.code, 0) + 1
        return o

    @property
    def engine(self) -> str:
        """Which engine plays the episode now (``rust`` | ``python``)."""
        report = self.env.engine_report() if self.env is not None else None
        return report.playing if report is not None else "python"

    @property
    def engine_reason(self) -> str | None:
        """Why the Python core plays the episode (None while Rust does)."""
        report = self.env.engine_report() if self.env is not None else None
        return report.reason if report is not None else None

    def _grammar(self, build: bool = True) -> tuple[str, int] | None:
        """The seat's grammar this turn as ``(lark, max_bytes)`` (None unconstrained, or where
        ``build`` is False: the engine checks the next reply first and builds it only if needed);
        :attr:`legal` holds its legal ids either way."""
        if not self.config.constrained:
            self.legal = None
            return None
        from ..llm.constrain import grammar_of, legal_lists

        self.legal = legal_lists(self.obs)  # the seat's observation of this turn (no second observe)
        if not build:
            return None
        g = grammar_of(self.legal, self.config.seat)
        return g.lark, g.max_bytes

    # ------------------------------------------------------------------ lookahead

    def propose(self, policy: str, seed: int) -> Answer:
        """``policy``'s move for the seat's current view, written as a tool call."""
        from ..llm.tools import render_reply
        from ..policies import make_policy

        driver = make_policy(policy, seed=seed)
        bind_world(self.env.episode, driver)  # a policy that plans with the world moves the episode, saying why
        # shortened against the observation play() expands it with: the round trip is exact
        content, calls = render_reply(shorten(driver.act(seat_view(driver, self.env.episode, self.config.seat)),
                                              self.obs), "tools", "call_0")
        return content, calls, 0

    def fork(self, key: int) -> Session:
        """An independent copy standing where this one stands (environment, chat, prompt, rollout)."""
        other = Session.__new__(Session)
        other.key, other.world, other.config, other.tools = key, self.world, self.config, self.tools
        other.env = self.env.fork()
        other.conv = copy.deepcopy(self.conv)
        other.chat = ChatTokens(self.config.tokenizer, self.chat.tools, mode=self.chat.mode)
        other.chat.ids = list(self.chat.ids)
        other.chat._messages = other.conv.transcript[:len(self.chat._messages)]
        other.rollout = Rollout(world=self.world, messages=other.conv.transcript)
        other.obs, other.legal = self.obs, self.legal
        return other

    def finish_with(self, policy: str, seed: int) -> float:
        """Play the episode to its end with the scripted ``policy`` in the seat; the return-to-go."""
        from ..policies import make_policy
        from ..rollout import play_seat

        return play_seat(self.env, make_policy(policy, seed=seed)).episode_return


__all__ = ["Answer", "Reply", "Rollout", "Session", "SessionConfig", "Turn", "World", "fast_call", "read_reply"]
