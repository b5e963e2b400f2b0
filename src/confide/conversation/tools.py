"""The agent's memory tools as OpenAI function-calling schemas, plus their argument models.

Two export forms: chat completions (``{"type": "function", "function": {...}}``) and the
Realtime API (``{"type": "function", "name": ..., "description": ..., "parameters": ...}``).
The descriptions tell the model to store proactively and silently; their example sentences
live in :data:`TOOL_EXAMPLES` so a test can check the offline extractor handles each one.

Every argument has two names: its snake_case one (``memory_type``, as these schemas spell it)
and its camelCase one (``memoryType``, as the HTTP tool bodies and MCP spell it); every door
takes either. :func:`parse_arguments` is the one place a tool's arguments are validated, so
every door refuses the same arguments with the same :class:`~confide.errors.ValidationError`.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    AliasGenerator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic import ValidationError as PydanticValidationError
from pydantic.alias_generators import to_camel

from confide.conversation.validation import MAX_EXTRACTED_VALUE_CHARS
from confide.conversation.writing import check_semantic
from confide.errors import ValidationError
from confide.llm.third_person import as_memory
from confide.types import MemoryType, invalid

__all__ = [
    "EXTRACTABLE_TYPE_NAMES",
    "TOOL_EXAMPLES",
    "TOOL_NAMES",
    "ForgetMemoryArgs",
    "MarkPrivateArgs",
    "MemoryHistoryArgs",
    "MemoryQueryArgs",
    "StoreMemoryArgs",
    "ToolExample",
    "UpdateMemoryArgs",
    "chat_tools",
    "parse_arguments",
    "realtime_tools",
    "reminder_offer",
    "tool_parameters",
    "tools_json",
]

EXTRACTABLE_TYPE_NAMES: tuple[str, ...] = (
    "fact",
    "preference",
    "follow_up",
    "context",
    "history",
    "wellbeing",
    "insight",
    "procedural",
)


@dataclass(frozen=True)
class ToolExample:
    """A user sentence and the memory the agent should store for it."""

    sentence: str
    type: str
    key: str
    value: str


TOOL_EXAMPLES: tuple[ToolExample, ...] = (
    ToolExample("Please call me Maggie.", "preference", "preferred_name", "Maggie"),
    ToolExample("My daughter Sarah lives in Denver.", "fact", "daughter_name", "Sarah"),
    ToolExample("I have two cats, Milo and Luna.", "fact", "pet_cat_count", "2 cats"),
    ToolExample("I live in Portland.", "fact", "city", "Portland"),
    ToolExample("I can't stand loud music.", "preference", "dislikes", "loud music"),
    ToolExample(
        "I worked as a nurse for thirty years.",
        "history",
        "former_occupation",
        "nurse for thirty years",
    ),
    ToolExample("I use a walker and live alone.", "fact", "mobility", "The user uses a walker"),
    ToolExample(
        "I use a walker and live alone.", "fact", "living_situation", "The user lives alone"
    ),
    ToolExample(
        "I have a doctor's appointment on Tuesday at 10am.",
        "follow_up",
        "appointment",
        "doctor's appointment on Tuesday at 10am",
    ),
    ToolExample(
        "My grandson is coming over next Friday.",
        "follow_up",
        "visit",
        "grandson is coming over next Friday",
    ),
    ToolExample(
        "I've been feeling lonely since my husband passed.",
        "wellbeing",
        "mood",
        "The user feels lonely since their husband passed",
    ),
    ToolExample("I'm at the hospital right now.", "context", "current_location", "hospital"),
    ToolExample("Please speak a little slower.", "preference", "communication_style", "slower"),
)

_STORE_DESCRIPTION = (
    "Save something worth remembering about the user for future conversations. Call it "
    "proactively, the moment the user mentions it, without being asked: names and what "
    "they like to be called, family and pets (with names and counts), where they live, "
    "likes and dislikes, work and life history, living situation and mobility, "
    "appointments and visits (with the day and time), and how they are feeling. Storage is "
    "silent: never say that you are saving, storing or remembering something, and never "
    "confirm it aloud; just carry on the conversation. Do not store small talk, things you "
    "said yourself, or anything the user asks you not to remember. Use snake_case keys "
    "that name a kind of memory, never the user's words: for things a person has many of "
    "(likes, dislikes, prefers, appointment, visit, pain) the kind alone, with the specifics "
    "in the value. Keep values short (one or two sentences). Types: fact, preference, follow_up "
    "(something coming up to ask about later), context (the situation right now), history "
    "(the user's past), wellbeing (mood, sleep, pain), insight (a pattern you noticed), "
    "procedural (a procedure the user asked you to keep, as numbered steps: '1. Boil the "
    "water. 2. Steep the tea for four minutes.'; a single habit is a preference). For a "
    "follow_up set suggest_reminder to offer a reminder. Examples:\n"
    + "\n".join(f'- "{e.sentence}" -> {e.type} {e.key} = "{e.value}"' for e in TOOL_EXAMPLES)
)

_TYPE_PROPERTY: dict[str, Any] = {
    "type": "string",
    "enum": list(EXTRACTABLE_TYPE_NAMES),
    "description": "What kind of memory this is.",
}
_CONFIDENCE_PROPERTY: dict[str, Any] = {
    "type": "number",
    "minimum": 0,
    "maximum": 1,
    "description": "How sure you are, 0 to 1 (default 1 when the user said it plainly).",
}
_TARGET_PROPERTIES: dict[str, Any] = {
    "key": {"type": "string", "description": "The memory's key (case-insensitive)."},
    "memory_id": {"type": "string", "description": "The memory's id, if you know it."},
}

_SPECS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    (
        "store_memory",
        _STORE_DESCRIPTION,
        {
            "type": "object",
            "properties": {
                "memory_type": _TYPE_PROPERTY,
                "key": {
                    "type": "string",
                    "description": "A snake_case key, e.g. preferred_name, daughter_name.",
                },
                "value": {"type": "string", "description": "What to remember, briefly."},
                "confidence": _CONFIDENCE_PROPERTY,
                "suggest_reminder": {
                    "type": "boolean",
                    "description": "For a follow_up: offer the user a reminder.",
                },
            },
            "required": ["memory_type", "key", "value"],
        },
    ),
    (
        "update_memory",
        "Change something you already remember when the user corrects it or it changes "
        '(e.g. "Actually, I moved to Tucson last month" updates city). Match the existing '
        "key case-insensitively; if no memory has that key, one is created. Silent, like "
        "store_memory: never announce the update.",
        {
            "type": "object",
            "properties": {
                "existing_key": {"type": "string", "description": "The key to change."},
                "new_value": {"type": "string", "description": "The new value."},
                "memory_type": {
                    **_TYPE_PROPERTY,
                    "description": "Type to use if the memory must be created (default fact).",
                },
                "confidence": _CONFIDENCE_PROPERTY,
            },
            "required": ["existing_key", "new_value"],
        },
    ),
    (
        "forget_memory",
        'Forget a memory when the user asks you to ("forget what I said about my '
        'neighbour"). Give its key or its memory_id. It can be restored for a while.',
        {"type": "object", "properties": dict(_TARGET_PROPERTIES)},
    ),
    (
        "mark_private",
        "Keep a memory private to this user when they ask you to keep something between "
        'you ("don\'t tell my daughter about the fall"). Give its key or its memory_id.',
        {"type": "object", "properties": dict(_TARGET_PROPERTIES)},
    ),
    (
        "memory_query",
        "Look up what you remember about the user when it would help you answer, e.g. "
        "before asking about a follow-up or when the user refers to something from an "
        "earlier conversation.",
        {
            "type": "object",
            "properties": {
                "agent": {"type": "string", "description": "Your agent name."},
                "query": {"type": "string", "description": "What you want to recall."},
                "categories": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Only these categories.",
                },
                "filters": {
                    "type": "object",
                    "description": 'Extra filters, e.g. {"type": "follow_up"}.',
                },
                "top_k": {"type": "integer", "minimum": 1, "maximum": 50, "default": 3},
                "return": {"type": "string", "enum": ["bullets", "full"], "default": "bullets"},
                "budget_tokens": {"type": "integer", "minimum": 1},
                "threshold": {"type": "number", "minimum": 0, "maximum": 1},
            },
            "required": ["query"],
        },
    ),
)

TOOL_NAMES: tuple[str, ...] = tuple(name for name, _, _ in _SPECS)

_PARAMETERS: dict[str, dict[str, Any]] = {
    **{name: params for name, _, params in _SPECS},
    # MCP only: the audit history of one memory, by key or id.
    "memory_history": {"type": "object", "properties": dict(_TARGET_PROPERTIES)},
}


def realtime_tools() -> list[dict[str, Any]]:
    """The tools in the Realtime API's session form (``type``, ``name``, ...)."""
    return [
        {"type": "function", "name": name, "description": desc, "parameters": params}
        for name, desc, params in _SPECS
    ]


def tool_parameters(name: str, *, camel: bool = False) -> dict[str, Any]:
    """The JSON schema of tool ``name``'s arguments (snake_case, or camelCase with ``camel``).

    Raises:
        ValidationError: an unknown tool.
    """
    params = _PARAMETERS.get(name)
    if params is None:
        raise ValidationError(f"unknown tool {name!r}")
    spelled = copy.deepcopy(params)  # a copy the caller may change
    if camel:
        spelled["properties"] = {to_camel(k): v for k, v in spelled["properties"].items()}
        if "required" in spelled:
            spelled["required"] = [to_camel(k) for k in spelled["required"]]
    return spelled


def chat_tools() -> list[dict[str, Any]]:
    """The tools in the chat-completions form (``{"type": "function", "function": ...}``)."""
    return [
        {
            "type": "function",
            "function": {"name": name, "description": desc, "parameters": params},
        }
        for name, desc, params in _SPECS
    ]


def tools_json(form: Literal["chat", "realtime"] = "chat") -> str:
    """The tools as a JSON document in the given form."""
    return json.dumps(chat_tools() if form == "chat" else realtime_tools(), indent=2)


def reminder_offer(value: str) -> str:
    """The message the agent may use to offer a reminder for a follow-up."""
    return f"Would you like me to remind you about this? ({value})"


# Each argument under its camelCase name or its snake_case one; a missing argument is named
# in camelCase (the HTTP tool bodies' spelling), one given as the caller spelled it.
_ARGS = ConfigDict(
    frozen=True,
    extra="ignore",
    populate_by_name=True,
    alias_generator=AliasGenerator(validation_alias=lambda n: AliasChoices(to_camel(n), n)),
)
_Text = Annotated[str, Field(min_length=1, max_length=16_000)]
_Conf = Annotated[float, Field(ge=0.0, le=1.0)]


class _Args(BaseModel):
    """A tool's arguments: a blank string or ``null`` counts as not given (on every door)."""

    model_config = _ARGS

    @model_validator(mode="before")
    @classmethod
    def _drop_blanks(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        return {
            k: v
            for k, v in data.items()
            if v is not None and not (isinstance(v, str) and not v.strip())
        }


_STEPS = re.compile(r"^\s*1[.)]\s")
_WHY = {
    "not_third_person": "write it about the user in the third person ('The user prefers "
    "tea'), not to someone ('you')",
    "not_self_contained": "name whom or what it is about: it opens with a word that points "
    "outside it (he, she, they, it, this...)",
    "incomplete": "write a complete sentence or a short value; it ends mid-sentence or "
    "lacks a verb",
    "no_subject": "give the sentence its subject",
    "too_long": f"keep it to two sentences and {MAX_EXTRACTED_VALUE_CHARS} characters",
    "too_many_sentences": f"keep it to two sentences and {MAX_EXTRACTED_VALUE_CHARS} characters",
    "question": "store what is known, not a question",
    "instruction": "store what is known about the user, not an instruction",
}


def written_value(value: str, memory_type: MemoryType | None = None) -> str:
    """The value a memory tool stores: ``value`` through the writing rules, normalised
    where that is safe, refused otherwise.

    Normalised: first person becomes third (the agent wrote down the user's words: ``I
    live alone`` -> ``The user lives alone``, ``my daughter Sarah`` -> ``the user's daughter
    Sarah``), a value that opens with its verb gets the user as its subject (``uses a
    walker`` -> ``The user uses a walker``), and what a model adds around a value (wrapping
    quotes, a list marker, a label such as ``Fact:``) goes. Then the semantic guard,
    keyed (:func:`~confide.conversation.writing.check_semantic`: a short value such as
    ``Tucson`` passes). Procedural steps (``procedural``, or a value opening with ``1.``)
    are exempt: numbered steps are not one or two sentences.

    Raises:
        ValueError: the value breaks a rule that cannot be mended without guessing (second
            person, a pronoun whose referent is gone, a question, an instruction, more than
            two sentences or 280 characters); the message names the rule, never the value.
    """
    if memory_type is MemoryType.PROCEDURAL or _STEPS.match(value):
        return value
    verdict = check_semantic(as_memory(" ".join(value.split())), keyed=True)
    if verdict.text is None or verdict.reason in ("too_long", "too_many_sentences"):
        reason = verdict.reason or "incomplete"
        raise ValueError(f"breaks the writing rules ({reason}): {_WHY.get(reason, reason)}")
    return verdict.text


class StoreMemoryArgs(_Args):
    """Arguments of ``store_memory``; ``value`` passes :func:`written_value`."""

    memory_type: MemoryType
    key: Annotated[str, Field(min_length=1, max_length=128)]
    value: _Text
    confidence: _Conf = 1.0
    suggest_reminder: bool = False

    @field_validator("value")
    @classmethod
    def _written(cls, value: str, info: ValidationInfo) -> str:
        return written_value(value, info.data.get("memory_type"))


class UpdateMemoryArgs(_Args):
    """Arguments of ``update_memory``; ``new_value`` passes :func:`written_value`."""

    existing_key: Annotated[str, Field(min_length=1, max_length=128)]
    memory_type: MemoryType | None = None
    new_value: _Text
    confidence: _Conf | None = None

    @field_validator("new_value")
    @classmethod
    def _written(cls, value: str, info: ValidationInfo) -> str:
        return written_value(value, info.data.get("memory_type"))


_TARGET_FIELDS = ("key", "memoryId")  # a tool acting on one memory needs one of them


class _TargetArgs(_Args):
    key: Annotated[str, Field(max_length=128)] | None = None
    memory_id: Annotated[str, Field(max_length=256)] | None = None

    @model_validator(mode="after")
    def _one_target(self) -> _TargetArgs:
        if not (self.key or self.memory_id):
            # Confide's error inside pydantic's: :func:`confide.types.invalid` names its fields.
            raise ValidationError(f"give {' or '.join(_TARGET_FIELDS)}", fields=_TARGET_FIELDS)
        return self


class ForgetMemoryArgs(_TargetArgs):
    """Arguments of ``forget_memory``: ``key`` or ``memory_id``."""


class MarkPrivateArgs(_TargetArgs):
    """Arguments of ``mark_private``: ``key`` or ``memory_id``."""


class MemoryHistoryArgs(_TargetArgs):
    """Arguments of ``memory_history`` (MCP only): ``key`` or ``memory_id``."""


class MemoryQueryArgs(_Args):
    """Arguments of ``memory_query``."""

    agent: str | None = None
    query: _Text
    categories: tuple[str, ...] | None = None
    filters: dict[str, Any] = Field(default_factory=dict)
    top_k: Annotated[int, Field(ge=1, le=50)] = 3
    return_: Literal["bullets", "full"] = Field(default="bullets", alias="return")
    budget_tokens: Annotated[int, Field(ge=1)] | None = None
    threshold: _Conf | None = None


ToolArgs = StoreMemoryArgs | UpdateMemoryArgs | ForgetMemoryArgs | MarkPrivateArgs | MemoryQueryArgs

_MODELS: dict[str, type[BaseModel]] = {
    "store_memory": StoreMemoryArgs,
    "update_memory": UpdateMemoryArgs,
    "forget_memory": ForgetMemoryArgs,
    "mark_private": MarkPrivateArgs,
    "memory_query": MemoryQueryArgs,
    "memory_history": MemoryHistoryArgs,
}


def parse_arguments(name: str, arguments: str | Mapping[str, Any]) -> BaseModel:
    """Validate a tool call's arguments (JSON text or a mapping) into its argument model.

    The one producer of a tool call's :class:`ValidationError`, whichever door the call came
    through: the message is ``<tool>: invalid arguments: <field>: <why>`` for each field at
    fault, ``fields`` names them (as the caller spelled them; a missing one in camelCase) and
    ``allowed`` lists the values of a field with a fixed set. Values are never echoed.

    Raises:
        ValidationError: unknown tool, arguments that are not a JSON object, a missing
            argument or a field out of range.
    """
    model = _MODELS.get(name)
    if model is None:
        raise ValidationError(f"unknown tool {name!r}")
    if isinstance(arguments, str):
        try:
            data = json.loads(arguments or "{}")
        except (json.JSONDecodeError, RecursionError):
            raise ValidationError(f"{name}: arguments are not valid JSON") from None
    else:
        data = arguments
    if not isinstance(data, Mapping):
        raise ValidationError(f"{name}: arguments must be a JSON object")
    try:
        return model.model_validate(dict(data))
    except PydanticValidationError as exc:
        raise invalid(exc, what=f"{name}: invalid arguments") from None
