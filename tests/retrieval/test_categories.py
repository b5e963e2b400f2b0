"""Categories YAML: validation, errors and allowlist resolution."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from confide.errors import ConfigurationError, PermissionDeniedError, ValidationError
from confide.retrieval.categories import SYSTEM_CATEGORIES, ContextMode, load_categories

SYSTEM = list(SYSTEM_CATEGORIES)


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
        ("categories: [{context: rag}]", "name"),
        ("categories: [{name: fact}, {name: fact}]", "twice"),
        ("categories: [{name: Fact}]", "snake_case"),
        ("categories: {system: [{name: fact}], custom: [{name: fact}]}", "redefine"),
        ("categories: {fact: {context: sometimes}}", "context"),
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


LISTED = """
categories:
  - name: fact
    context: rag
    rag_length: 10
    description: What is true of the user.
  - name: preference
    context: all
  - name: billing
    context: explicit
    rag_length: 3
allowlists:
  support: [fact, billing]
  admin: "*"
"""


def test_the_list_form_is_read_as_the_sections_form(tmp_path: Path) -> None:
    listed = load_categories(_write(tmp_path, LISTED))
    sections = load_categories(
        _write(
            tmp_path,
            """
categories:
  system:
    fact: {context: rag, rag_length: 10, description: What is true of the user.}
    preference: {context: all}
  custom:
    billing: {context: explicit, rag_length: 3}
allowlists:
  support: [fact, billing]
  admin: "*"
""",
        )
    )
    assert listed == sections
    # Confide's own names are system categories, the others custom.
    assert list(listed.categories.system) == ["fact", "preference"]
    assert list(listed.categories.custom) == ["billing"]
    assert listed.spec("billing").context is ContextMode.EXPLICIT
    assert listed.resolve("admin") == ("fact", "preference")
    assert listed.resolve("support", ["billing"]) == ("billing",)


def test_a_mapping_of_names_and_listed_sections_are_read_too(tmp_path: Path) -> None:
    flat = load_categories(
        _write(tmp_path, "categories: {fact: {context: rag}, billing: {context: all}}")
    )
    assert (list(flat.categories.system), list(flat.categories.custom)) == (["fact"], ["billing"])
    listed = load_categories(
        _write(
            tmp_path,
            "categories: {system: [{name: fact, rag_length: 4}], custom: [{name: billing}]}",
        )
    )
    assert listed.spec("fact").rag_length == 4 and "billing" in listed.categories.custom


def test_an_allowlist_naming_an_undefined_category_loads_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _write(
        tmp_path,
        """
categories: [{name: fact}, {name: preference, context: all}]
allowlists:
  support: [fact, ghost, wellbeing]
  admin: "*"
""",
    )
    with caplog.at_level(logging.WARNING, logger="confide.retrieval.categories"):
        config = load_categories(path)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "support: ghost, wellbeing" in warnings[0] and str(path) in warnings[0]
    assert config.undefined_in_allowlists() == {"support": ("ghost", "wellbeing")}
    # The undefined names grant nothing: asking for one is refused like any other.
    assert config.resolve("support") == ("fact",)
    with pytest.raises(PermissionDeniedError, match="ghost"):
        config.resolve("support", ["ghost"])
    assert config.resolve("admin") == ("fact", "preference")
