"""Memory categories (how each reaches an agent's context) and per-agent allowlists.

The YAML file has ``categories`` and ``allowlists`` (agent name → category names, or ``"*"``
for all), and optionally ``profiles`` (agent name → :class:`AgentProfile`). Confide ships
:data:`DEFAULT_CATEGORIES_FILE`. ``categories`` is written in any of three forms, each
category a ``context: all | rag | explicit``, an optional ``rag_length`` and an optional
``description``:

- sections: ``{system: {name: spec}, custom: {name: spec}}`` (each section may also be a
  list, as below);
- a list: ``[{name: fact, context: rag, rag_length: 10}, ...]``;
- a mapping of names: ``{fact: {context: rag}, billing: {context: rag}}``.

In the last two a category named after one of Confide's own (:data:`SYSTEM_CATEGORIES`) is a
system one, any other a custom one. An allowlist may name a category the file does not
define: that name grants nothing, and :func:`load_categories` logs a warning naming it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import pydantic
import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from confide.errors import ConfigurationError, PermissionDeniedError, ValidationError
from confide.retrieval.profiles import AgentProfile

__all__ = [
    "DEFAULT_CATEGORIES_FILE",
    "SYSTEM_CATEGORIES",
    "CategoriesConfig",
    "CategorySpec",
    "ContextMode",
    "load_categories",
]

log = logging.getLogger(__name__)

DEFAULT_CATEGORIES_FILE = Path(__file__).with_name("default_categories.yaml")
SYSTEM_CATEGORIES = (
    "fact",
    "preference",
    "follow_up",
    "context",
    "history",
    "wellbeing",
    "insight",
    "relationship_dynamic",
    "procedural",
    "episodic",
    "conversation_summary",
    "subject_fact",
)
"""Confide's own categories (the shipped file's ``system`` section): in a file that lists its
categories without sections, these names are system categories and the others custom."""
_SECTIONS = frozenset({"system", "custom"})
WILDCARD = "*"
_NAME = re.compile(r"^[a-z][a-z0-9_\-]{0,63}$")
_STRICT = ConfigDict(frozen=True, extra="forbid")


class ContextMode(StrEnum):
    """``all``: every memory of the category goes to context; ``rag``: the most relevant;
    ``explicit``: only when a request names the category (then as ``rag``)."""

    ALL = "all"
    RAG = "rag"
    EXPLICIT = "explicit"


class CategorySpec(BaseModel):
    """How one category reaches an agent's context."""

    model_config = _STRICT

    context: ContextMode = ContextMode.RAG
    rag_length: Annotated[int, Field(ge=1, le=1000)] | None = None
    description: Annotated[str, Field(max_length=1000)] | None = None


def _check_names(names: Iterable[str]) -> None:
    for name in names:
        if not _NAME.fullmatch(name):
            raise ValueError(f"category name {name!r} must be lower-case snake_case")


def _named(entries: list[Any]) -> dict[str, Any]:
    """A list of ``{name: ..., context: ..., ...}`` entries as a mapping of name → spec."""
    out: dict[str, Any] = {}
    for position, entry in enumerate(entries):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            raise ValueError(f"entry {position} must be a mapping with a name")
        spec = {k: v for k, v in entry.items() if k != "name"}
        if entry["name"] in out:
            raise ValueError(f"category {entry['name']!r} is listed twice")
        out[entry["name"]] = spec
    return out


def _sections(value: Any) -> Any:
    """``categories`` in any of its forms (see the module docstring) as sections."""
    if isinstance(value, list):
        value = _named(value)
    elif not isinstance(value, Mapping) or set(value) <= _SECTIONS:
        return value  # sections (or not a mapping at all: the model says why)
    system = {k: v for k, v in value.items() if k in SYSTEM_CATEGORIES}
    return {"system": system, "custom": {k: v for k, v in value.items() if k not in system}}


class CategorySections(BaseModel):
    """``system`` categories ship with Confide; ``custom`` ones are the operator's."""

    model_config = _STRICT

    system: dict[str, CategorySpec] = Field(default_factory=dict)
    custom: dict[str, CategorySpec] = Field(default_factory=dict)

    @field_validator("system", "custom", mode="before")
    @classmethod
    def _listed(cls, value: Any) -> Any:
        return _named(value) if isinstance(value, list) else value

    @model_validator(mode="after")
    def _distinct(self) -> CategorySections:
        _check_names([*self.system, *self.custom])
        clash = sorted(set(self.system) & set(self.custom))
        if clash:
            raise ValueError(f"custom categories redefine system ones: {', '.join(clash)}")
        return self


class CategoriesConfig(BaseModel):
    """Validated categories and allowlists; :meth:`resolve` answers who may read what."""

    model_config = _STRICT

    categories: CategorySections
    allowlists: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    profiles: dict[str, AgentProfile] = Field(default_factory=dict)
    _undefined: dict[str, tuple[str, ...]] = PrivateAttr(default_factory=dict)

    @field_validator("categories", mode="before")
    @classmethod
    def _any_form(cls, value: Any) -> Any:
        return _sections(value)

    @field_validator("allowlists", mode="before")
    @classmethod
    def _wildcard_string(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: [v] if isinstance(v, str) else v for k, v in value.items()}
        return value

    @model_validator(mode="after")
    def _known_categories(self) -> CategoriesConfig:
        known = self.all_categories()
        for agent, allowed in self.allowlists.items():
            undefined = tuple(c for c in allowed if c != WILDCARD and c not in known)
            if undefined:
                self._undefined[agent] = undefined
        return self

    def undefined_in_allowlists(self) -> dict[str, tuple[str, ...]]:
        """The categories each allowlist names that the file does not define (agent → names;
        agents whose allowlist names none are left out). Such a name grants nothing."""
        return dict(self._undefined)

    def profile(self, agent: str) -> AgentProfile:
        """The profile of ``agent``; :class:`ValidationError` when it has none."""
        found = self.profiles.get(agent)
        if found is None:
            raise ValidationError(f"agent {agent!r} has no profile")
        return found

    def all_categories(self) -> dict[str, CategorySpec]:
        """Every category, system first, by name."""
        return {**self.categories.system, **self.categories.custom}

    def spec(self, category: str) -> CategorySpec:
        """The spec of one category; :class:`ValidationError` when it is not defined."""
        found = self.all_categories().get(category)
        if found is None:
            raise ValidationError(f"unknown category {category!r}")
        return found

    def allowed(self, agent: str) -> tuple[str, ...]:
        """The categories ``agent`` may read; :class:`PermissionDeniedError` if unknown."""
        allowed = self.allowlists.get(agent)
        if allowed is None:
            raise PermissionDeniedError(f"agent {agent!r} has no category allowlist")
        if WILDCARD in allowed:
            return tuple(self.all_categories())
        undefined = self._undefined.get(agent)
        return allowed if not undefined else tuple(c for c in allowed if c not in undefined)

    def resolve(self, agent: str, requested: Iterable[str] | None = None) -> tuple[str, ...]:
        """The categories a request may read.

        ``requested=None`` means every category the agent is allowed but ``explicit`` ones
        (those only a request naming them reads). Raises
        :class:`PermissionDeniedError` for an unknown agent or a requested category
        outside its allowlist (an undefined category is outside every allowlist).
        """
        allowed = self.allowed(agent)
        if requested is None:
            known = self.all_categories()
            return tuple(
                c for c in allowed if c not in known or known[c].context is not ContextMode.EXPLICIT
            )
        wanted = tuple(dict.fromkeys(requested))
        denied = [c for c in wanted if c not in allowed]
        if denied:
            raise PermissionDeniedError(
                f"agent {agent!r} may not read categories: {', '.join(denied)}"
            )
        return wanted


def load_categories(path: str | Path | None = None) -> CategoriesConfig:
    """Load and validate a categories YAML file (the packaged default when ``None``).

    An allowlist naming a category the file does not define is not refused: the name grants
    nothing, and one warning for the file names each such category and its agent.

    Raises :class:`ConfigurationError` when the file cannot be read or parsed and
    :class:`ValidationError` when its content is invalid (the message names the field).
    """
    source = Path(path) if path is not None else DEFAULT_CATEGORIES_FILE
    try:
        raw = yaml.safe_load(source.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigurationError(f"cannot read categories file {source}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigurationError(f"categories file {source} is not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise ValidationError(f"categories file {source} must hold a mapping")
    try:
        config = CategoriesConfig.model_validate(raw)
    except pydantic.ValidationError as exc:
        details = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}"
            for err in exc.errors()
        )
        raise ValidationError(f"invalid categories file {source}: {details}") from None
    undefined = config.undefined_in_allowlists()
    if undefined:
        named = "; ".join(f"{agent}: {', '.join(names)}" for agent, names in undefined.items())
        log.warning(
            "categories file %s: allowlists name categories it does not define (they grant "
            "nothing): %s",
            source,
            named,
        )
    return config
