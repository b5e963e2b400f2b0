"""Categories YAML: validation, errors and allowlist resolution."""

from __future__ import annotations

from pathlib import Path

import pytest

from confide.errors import ConfigurationError, PermissionDeniedError, ValidationError
from confide.retrieval.categories import ContextMode, load_categories

SYSTEM = [
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
]


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "categories.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_packaged_default_defines_the_system_categories() -> None:
    config = load_categories()
    assert list(config.categories.system) == SYSTEM
    # Procedural memories are read only by a request that names them.
    assert config.resolve("default") == tuple(c for c in SYSTEM if c != "procedural")
    assert config.resolve("default", ["procedural"]) == ("procedural",)
    assert config.spec("procedural").context is ContextMode.EXPLICIT
    assert config.spec("preference").context is ContextMode.ALL
    assert config.spec("fact").rag_length == 10


def test_resolve_checks_the_allowlist(tmp_path: Path) -> None:
    config = load_categories(
        _write(
            tmp_path,
            """
categories:
  system:
    fact: {context: rag, rag_length: 5}
    preference: {context: all}
  custom:
    billing: {context: rag}
allowlists:
  support: [fact, billing]
  admin: "*"
""",
        )
    )
    assert config.resolve("support") == ("fact", "billing")
    assert config.resolve("support", ["billing", "billing"]) == ("billing",)
    assert config.resolve("admin", ["preference"]) == ("preference",)
    with pytest.raises(PermissionDeniedError, match="preference"):
        config.resolve("support", ["fact", "preference"])
    with pytest.raises(PermissionDeniedError, match="nobody"):
        config.resolve("nobody")
    with pytest.raises(PermissionDeniedError):
        config.resolve("support", ["undefined"])


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("categories: {system: {fact: {context: sometimes}}}", "context"),
        ("categories: {system: {fact: {context: rag, rag_length: 0}}}", "rag_length"),
        ("categories: {system: {fact: {}}, custom: {fact: {}}}", "redefine"),
        ("categories: {system: {Fact: {}}}", "snake_case"),
        ("categories: {system: {fact: {}}}\nallowlists: {a: [ghost]}", "ghost"),
        ("categories: {system: {fact: {}}}\nextra: 1", "extra"),
        ("- just a list", "mapping"),
    ],
)
def test_invalid_content_raises_validation_error(tmp_path: Path, text: str, match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        load_categories(_write(tmp_path, text))


def test_unreadable_or_unparsable_file_raises_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot read"):
        load_categories(tmp_path / "missing.yaml")
    with pytest.raises(ConfigurationError, match="YAML"):
        load_categories(_write(tmp_path, "categories: [unclosed"))
