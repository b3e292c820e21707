"""Request bodies of the JSON API. Limits live here so bad input is a 422 that names the field."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

MAX_QUERY_CHARS = 1_000_000
# one project, or several ("a,b" or ["a", "b"]); unknown names are refused with the known ones listed
ProjectScope = str | list[Annotated[str, Field(max_length=500)]] | None
PROJECT_HELP = "answer from this project (or these projects) only; default: the project the evidence leads to"


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ContextRequest(_Body):
    query: str = Field(..., max_length=MAX_QUERY_CHARS, description="what the model needs context for")
    budget_tokens: int | None = Field(None, gt=0, le=1_000_000, description="token budget (default [budget] token_budget)")
    model: str | None = Field(None, max_length=200, description="target model; small/MoE models get the small layout")
    project: ProjectScope = Field(None, max_length=500, description=PROJECT_HELP)
    party: str | None = Field(None, max_length=200, description="only genes from this device / user / org / agent")
    prompt_tokens: int = Field(0, ge=0, le=10_000_000, description="size of the caller's prompt (budget zone)")
    context_window: int | None = Field(None, gt=0, le=10_000_000)


class PacketRequest(_Body):
    query: str = Field(..., max_length=MAX_QUERY_CHARS)
    task_type: str = Field("edit", max_length=40, description="plan | explain | review | edit | debug | ops | quote")
    project: ProjectScope = Field(None, max_length=500, description=PROJECT_HELP)
    party: str | None = Field(None, max_length=200)
    max_genes: int | None = Field(None, gt=0, le=200)
    group_by: Literal["symbol", "file"] = Field(
        "symbol", description="symbol: items point at the matching function/class; file: also rank files")


class FingerprintRequest(_Body):
    query: str = Field(..., max_length=MAX_QUERY_CHARS)
    max_results: int = Field(10, gt=0, le=1000)
    project: ProjectScope = Field(None, max_length=500, description=PROJECT_HELP)
    party: str | None = Field(None, max_length=200)
    group_by: Literal["symbol", "file"] = Field(
        "symbol", description="symbol: ranked spans of functions/classes; file: files ranked by their symbols")


class IngestMetadata(BaseModel):
    model_config = ConfigDict(extra="allow")
    path: str | None = Field(None, max_length=4096)
    project: str | None = Field(None, max_length=500)
    language: str | None = Field(None, max_length=50)
    source_kind: Literal["file", "api", "session", "import"] = "api"
    authority_class: Literal["primary", "derived", "inferred"] | None = None
    volatility_class: Literal["stable", "medium", "hot"] = "stable"


class IngestRequest(_Body):
    content: str | None = Field(None, description="text to ingest")
    content_type: Literal["code", "markdown", "text", "log", "config", "json", "diff"] | None = None
    metadata: IngestMetadata = Field(default_factory=lambda: IngestMetadata.model_validate({}))
    path: str | None = Field(None, max_length=4096, description="a file or folder under [server] allowed_ingest_roots")
    project: str | None = Field(None, max_length=500)
    embed: bool = True

    def metadata_dict(self) -> dict[str, Any]:
        data = self.metadata.model_dump(exclude_none=True)
        if self.metadata.authority_class is None:
            data.pop("authority_class", None)
        return data
