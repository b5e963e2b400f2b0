"""Settings: built once from the environment (prefix ``CONFIDE_``) and passed down.

Well-known variables keep their own names: ``MEMORY_ENCRYPTION_KEY``, ``XAI_API_KEY``,
``XAI_GROK_MODEL``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, SecretStr, field_validator
from pydantic import ValidationError as PydanticValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from confide.errors import ConfigurationError

EmbedderPrecision = Literal["int8", "float32"]
"""The local MiniLM graph a setting selects (``CONFIDE_EMBEDDER_PRECISION``)."""


def default_home() -> Path:
    """The embedded data folder: ``~/.confide`` unless ``CONFIDE_HOME`` says otherwise."""
    return Path("~/.confide").expanduser()


class RankingWeights(BaseModel):
    """The ranking knobs; every weight at 0 switches its component off."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    w_dense: float = Field(default=0.6, ge=0.0, le=1.0)
    w_speaker: float = Field(default=0.3, ge=0.0)
    w_time: float = Field(default=0.05, ge=0.0)
    w_entity: float = Field(default=0.0, ge=0.0)
    w_adjacent: float = Field(default=0.5, ge=0.0)
    w_related: float = Field(default=0.0, ge=0.0)
    w_importance: float = Field(default=0.02, ge=0.0)
    w_pinned: float = Field(default=0.05, ge=0.0)
    w_insight: float = Field(
        default=0.3,
        ge=0.0,
        le=1.0,
        description="share of an insight's own score taken off: inferred, not said",
    )
    w_brief: float = Field(
        default=0.0, ge=0.0, description="penalty on memories with few content words"
    )
    w_named: float = Field(
        default=0.1, ge=0.0, description="lift for names when the question asks for names"
    )
    w_session: float = Field(
        default=0.0, ge=0.0, description="lift from the best other memory of the same episode"
    )
    w_diverse: float = Field(
        default=0.0, ge=0.0, description="penalty per better-ranked memory of the same episode"
    )
    expand_top: int = Field(default=30, ge=0, description="seeds whose edges are followed")
    common_name_share: float = Field(
        default=0.2,
        ge=0.0,
        le=1.0,
        description=(
            "a name of the question held by at least this share of the user's memories "
            "(and by 20 or more) is embedded as 'they'; 0 embeds the question as asked"
        ),
    )


class LLMPrice(BaseModel):
    """Cost units of LLM calls: per 1,000 prompt tokens, per 1,000 completion tokens, per
    call (a row of the price table ``CONFIDE_LLM_PRICES``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    prompt_per_1k: float = Field(default=1.0, ge=0.0)
    completion_per_1k: float = Field(default=2.0, ge=0.0)
    per_call: float = Field(default=0.0, ge=0.0)


class Settings(BaseSettings):
    """Confide's configuration. Every field can be set by an ``CONFIDE_<NAME>`` variable."""

    model_config = SettingsConfigDict(
        env_prefix="CONFIDE_",
        extra="ignore",
        frozen=True,
        env_nested_delimiter="__",
        populate_by_name=True,
    )

    home: Path = Field(default_factory=default_home)
    storage_url: str | None = Field(
        default=None,
        description="sqlite:///path/to/file.db or postgresql://...; default: SQLite in home",
    )
    keystore_url: str | None = Field(
        default=None,
        description=(
            "where wrapped user keys live, apart from the data: sqlite:///path/keys.db or "
            "postgresql://...; default: keys.db in home (SQLite data) or the data "
            "database's name + '_keys' on the same server (PostgreSQL data)"
        ),
    )
    encryption_key: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("MEMORY_ENCRYPTION_KEY", "CONFIDE_ENCRYPTION_KEY"),
    )
    old_encryption_keys: SecretStr | None = Field(
        default=None,
        description="comma-separated former key-encryption keys, readable during a rotation",
    )
    soft_delete_retention_days: float = Field(default=30.0, ge=0)
    thread_header_bullets: int = Field(default=3, ge=1, le=20)
    user_key_cache_size: int = Field(default=4096, ge=1)
    embedder: str = Field(
        default="local:all-MiniLM-L6-v2",
        description="'local:all-MiniLM-L6-v2', 'openai:<model>@<base_url>' or 'none'",
    )
    embedder_api_key: SecretStr | None = None
    embedder_precision: EmbedderPrecision = Field(
        default="int8",
        description="the local model's graph: 'int8' (quantised, faster; the default) or 'float32'",
    )
    categories_file: Path | None = Field(
        default=None, description="categories and allowlists YAML; default: the shipped one"
    )
    ranking: RankingWeights = Field(
        default_factory=RankingWeights, description="CONFIDE_RANKING__W_DENSE=0.5 and so on"
    )
    link_top_k: int = Field(default=5, ge=0, le=50)
    link_min: float = Field(default=0.5, ge=-1.0, le=1.0)
    run_context: float = Field(
        default=0.6,
        ge=0.0,
        le=4.0,
        description=(
            "weight of the previous memory of the same run_id in a memory's stored vector "
            "(0: each memory embedded alone; 0.6 measured best on LoCoMo, see "
            "docs/retrieval.md); takes effect for vectors written from now on"
        ),
    )
    postgres_pool_min: int = Field(default=1, ge=1)
    postgres_pool_max: int = Field(default=8, ge=1)
    postgres_ef_search: int = Field(
        default=128,
        ge=1,
        le=1000,
        description=(
            "pgvector's hnsw.ef_search on every pooled connection: candidates the HNSW graph "
            "keeps per search (more: higher recall, slower search; docs/retrieval.md)"
        ),
    )

    xai_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("XAI_API_KEY")
    )
    xai_grok_model: str = Field(
        default="grok-3-fast", validation_alias=AliasChoices("XAI_GROK_MODEL")
    )
    llm_base_url: str | None = None
    llm_api_key: SecretStr | None = None
    llm_model: str | None = None
    min_session_seconds: float = Field(default=30.0, ge=0)
    metrics_public: bool = Field(
        default=False,
        description="Serve /metrics without an API key (counts across every tenant).",
    )
    metrics_app_labels: int = Field(
        default=100,
        ge=0,
        le=10_000,
        description="App ids /metrics labels per-app counts with (later apps: '_other'; "
        "0: none, no app id shown).",
    )
    api_docs: Literal["auto", "on", "off"] = Field(
        default="auto",
        description="/docs, /redoc and /openapi.json: auto serves them only on loopback.",
    )
    session_sweep_seconds: float = Field(
        default=60.0,
        gt=0,
        description="How often call sessions idle for 30 minutes are dropped from memory.",
    )
    keep_alive_seconds: int = Field(
        default=75,
        ge=1,
        description=(
            "How long confide serve keeps an idle HTTP connection open. Longer than the "
            "clients' and load balancers' own idle timeouts, so they close first: a request "
            "sent on a connection the server is closing at that moment fails."
        ),
    )
    max_body_bytes: int = Field(
        default=1_048_576,
        ge=1024,
        description="The largest HTTP request body accepted (413 above it).",
    )
    dedup_text_threshold: float = Field(default=0.92, ge=0.0, le=1.0)
    dedup_cosine_threshold: float = Field(default=0.95, ge=0.0, le=1.0)
    proposal_ttl_days: float = Field(default=7.0, gt=0)
    sensitive_keys: tuple[str, ...] | None = Field(
        default=None, description="keys whose changes wait for confirmation; default: built in"
    )
    consent_min_confidence: float = Field(
        default=0.7,
        ge=0.0,
        le=1.0,
        description="the confidence that counts as a consent signal for a benign write",
    )
    procedural_min_confidence: float = Field(
        default=0.9,
        ge=0.0,
        le=1.0,
        description="the confidence at which procedural steps are stored without being asked",
    )
    agent_instructions: str = "You are a warm, patient voice companion."
    message_retention_days: float | None = Field(
        default=None,
        ge=0,
        description="days a chat message is kept once summarised; unset keeps every message "
        "(retention is the operator's choice)",
    )
    history_window: int = Field(
        default=20, ge=1, le=500, description="recent messages a conversation's history returns"
    )
    history_summary_min_cosine: float = Field(
        default=0.15,
        ge=-1.0,
        le=1.0,
        description="the cosine to the input a summary chunk needs to reach a chat's history "
        "(the best 3 above it do; chosen on LoCoMo by bench/summary_threshold.py)",
    )
    summary_trigger: int = Field(
        default=30, ge=2, description="unsummarised messages above which a summary is made"
    )
    summary_batch: int = Field(
        default=20, ge=1, description="oldest unsummarised messages one summary covers"
    )
    app_memory_cap: int = Field(
        default=10, ge=1, le=100, description="memories an app scope keeps (per app: overridable)"
    )
    app_llm_timeout: float = Field(
        default=30.0, gt=0, description="seconds an app-memory LLM call may take before fallback"
    )
    llm_budget_units: float | None = Field(
        default=None,
        gt=0,
        description="cost units of LLM calls an account may spend per day (none: no budget)",
    )
    multifact_min_chars: int = Field(
        default=200,
        ge=1,
        description="a user turn longer than this gets the multi-fact pass (1-5 candidate facts)",
    )
    multifact_daily_cap: int = Field(
        default=20, ge=0, description="memories the multi-fact pass writes per user per UTC day"
    )
    llm_prices: dict[str, LLMPrice] = Field(
        default_factory=dict,
        description='prices by operation, "*" for the rest: {"app_compaction": {"per_call": 1}}',
    )
    consolidation_cosine_min: float = Field(
        default=0.6,
        ge=-1.0,
        le=1.0,
        description="lowest cosine of two memories consolidation considers judging as one fact",
    )
    consolidation_cosine_max: float = Field(
        default=1.0, ge=-1.0, le=1.0, description="highest cosine of that band"
    )
    consolidation_same_cosine: float = Field(
        default=0.69,
        ge=0.0,
        le=1.0,
        description="cosine of the two values the offline judge needs to call them one fact",
    )
    consolidation_same_key_cosine: float = Field(
        default=0.65,
        ge=0.0,
        le=1.0,
        description="the same, for two memories whose keys are of one vocabulary family",
    )
    consolidation_pairs_per_day: int = Field(
        default=50, ge=0, description="pairs consolidation judges per user and day at most"
    )
    consolidation_recheck_days: float = Field(
        default=14.0, ge=0, description="days before consolidation judges a pair again"
    )
    consolidation_changed_hours: float = Field(
        default=72.0,
        gt=0,
        description="memories changed this recently are consolidation candidates",
    )
    consolidation_recent_days: float = Field(
        default=90.0, gt=0, description="both memories of a judged pair changed within these days"
    )
    consolidation_neighbours: int = Field(
        default=5, ge=1, le=50, description="nearest memories each candidate is paired with"
    )
    ttl_idle_days: float = Field(
        default=60.0,
        gt=0,
        description="days unread and unchanged after which a low-importance memory is retired",
    )
    ttl_importance_below: int = Field(
        default=3,
        ge=1,
        le=6,
        description="the TTL retires idle memories below this importance (3: keeps 3 and up)",
    )
    serve_worker: Literal["auto", "on", "off"] = Field(
        default="auto",
        description="run the background worker inside 'confide serve' (auto: on SQLite only)",
    )
    worker_lease_seconds: float = Field(
        default=60.0, gt=0, description="how long a claimed job is held before another may take it"
    )
    worker_job_timeout: float = Field(
        default=300.0, gt=0, description="seconds a job may run before it is given up and retried"
    )
    worker_max_attempts: int = Field(
        default=5, ge=1, le=100, description="attempts of a job before it is marked failed"
    )
    worker_backoff_seconds: float = Field(
        default=30.0, gt=0, description="first retry delay of a failed job (doubles each time)"
    )
    worker_poll_seconds: float = Field(
        default=5.0, gt=0, description="how often an idle worker looks for due jobs"
    )

    def __init__(self, **values: Any) -> None:
        """Read the settings from ``values``, then the environment.

        Raises:
            ConfigurationError: a value is invalid; one line per setting, named as its
                environment variable (``CONFIDE_TTL_IDLE_DAYS: Input should be greater than
                0``), never echoing the value.
        """
        try:
            super().__init__(**values)
        except PydanticValidationError as exc:
            raise ConfigurationError(_describe(exc)) from None

    @classmethod
    def defaults(cls) -> Settings:
        """Every setting at its default, without reading the environment (for libraries)."""
        return cls.model_construct()

    @field_validator("home", mode="after")
    @classmethod
    def _expand_home(cls, value: Path) -> Path:
        return value.expanduser()

    @field_validator("encryption_key", mode="after")
    @classmethod
    def _check_key(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            parse_hex_key(value.get_secret_value(), name="MEMORY_ENCRYPTION_KEY")
        return value

    def resolved_storage_url(self) -> str:
        """The storage URL, defaulting to ``sqlite:///<home>/confide.db``."""
        return self.storage_url or f"sqlite:///{self.home / 'confide.db'}"

    def resolved_keystore_url(self) -> str:
        """The key store URL (see ``keystore_url``); never the data database itself."""
        if self.keystore_url:
            return self.keystore_url
        data = self.resolved_storage_url()
        if data.startswith("sqlite"):
            return f"sqlite:///{self.home / 'keys.db'}"
        parts = urlsplit(data)
        name = parts.path.lstrip("/") or "postgres"
        return urlunsplit(parts._replace(path=f"/{name}_keys"))


def parse_hex_key(text: str, *, name: str) -> bytes:
    """Decode a 256-bit key given as 64 hex characters, or refuse it with a clear message."""
    cleaned = text.strip()
    if len(cleaned) != 64:
        raise ConfigurationError(
            f"{name} must be 64 hex characters (a 256-bit key); got {len(cleaned)} characters"
        )
    try:
        return bytes.fromhex(cleaned)
    except ValueError:
        raise ConfigurationError(f"{name} must contain only hex characters 0-9a-f") from None


def _describe(exc: PydanticValidationError) -> str:
    """The invalid settings of ``exc``, each named as the variable that sets it."""
    problems = []
    for error in exc.errors(include_url=False, include_input=False):
        loc = [str(part) for part in error["loc"]]
        name = env_name(loc[0]) + "".join(f"__{part.upper()}" for part in loc[1:])
        problems.append(f"{name}: {error['msg']}")
    return "invalid setting " + "; ".join(problems)


def env_name(field: str) -> str:
    """The environment variable that sets ``field`` of :class:`Settings`."""
    info = Settings.model_fields.get(field)
    alias = None if info is None else info.validation_alias
    if isinstance(alias, AliasChoices) and isinstance(alias.choices[0], str):
        return alias.choices[0]
    return f"CONFIDE_{field.upper()}"
