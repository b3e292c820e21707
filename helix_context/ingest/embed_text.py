"""What the embedding model reads for each gene, and how many word pieces of it.

MiniLM is a sentence model: what it understands in a piece of code is its
natural language — the names it defines (split into words), its docstrings
and its comments — not the punctuation and keywords between them, which the
full-text index covers anyway. So a code gene is embedded from a short
digest that puts those first (then the code itself, for code without them),
capped at ``[embedding] code_max_tokens`` word pieces; prose, config and logs
are embedded from their own text, capped at ``[embedding] max_tokens``.

Measured by benchmarks/bench_code_retrieval.py (66 plain-language questions
over the standard-library corpus of bench_ingest): the 32-piece digest ranks
as well as the first 128 pieces of the gene's own text (nDCG@10 0.641 against
0.643 hybrid, 0.633 against 0.624 dense alone) for a sixth of the model's
time; the first 32 pieces of the own text fall to 0.592 and 0.451.
"""

from __future__ import annotations

import re

from helix_context.config import EmbeddingSettings
from helix_context.genome.fts_text import split_identifier
from helix_context.models import Gene

# comment syntax by language family; Python and Julia docstrings count as comments
_HASH = re.compile(r"#+[ \t]?(.*)")
_SLASH = re.compile(r"//+!?[ \t]?([^\n]*)|/\*+(.*?)\*/", re.DOTALL)
_DASH = re.compile(r"--+[ \t]?(.*)")
_SEMI = re.compile(r";+[ \t]?(.*)")
_PERCENT = re.compile(r"%+[ \t]?(.*)")
_DOCSTRING = re.compile(r"(\"\"\"|''')(.*?)\1", re.DOTALL)
_COMMENTS: dict[str, tuple[re.Pattern[str], ...]] = {}
for _langs, _patterns in (
    ("python julia", (_DOCSTRING, _HASH)),
    ("ruby bash fish powershell perl r elixir nim graphql", (_HASH,)),
    (("javascript typescript tsx go rust java c cpp cuda objc csharp php kotlin swift scala groovy dart "
      "zig v proto solidity verilog glsl css scss vue svelte"), (_SLASH,)),
    ("sql lua haskell vhdl", (_DASH,)),
    ("clojure elisp", (_SEMI,)),
    ("erlang", (_PERCENT,)),
):
    for _lang in _langs.split():
        _COMMENTS[_lang] = _patterns

# a definition's name is followed by code (a parameter list, a base, a body, generics) or ends the line:
# prose in a docstring ("the type of handler to create") starts lines with these keywords too
_DEFINED = re.compile(
    r"^[ \t]*(?:(?:export|pub|public|private|protected|static|async|abstract|final|default)[ \t]+)*"
    r"(?:def|class|function|func|fn|interface|struct|enum|trait|impl|module|type)[ \t]+([A-Za-z_]\w*)"
    r"(?=[ \t]*(?:[(<:{=\[;,]|$|(?:extends|implements|for|where|struct|interface|with|derives)\b))",
    re.MULTILINE)
_MAX_NAMES = 6
_MAX_COMMENT_CHARS = 600  # far more than 32 pieces: the cap is the embedder's, this only bounds the work


def _words(identifier: str) -> str:
    """``MIMEPart`` → ``mime part``: the index's own identifier splitter, plain words as they are."""
    return " ".join(split_identifier(identifier)) or identifier.strip("_").lower()


def _where(gene: Gene) -> str:
    """The file's folder and stem as words: ``email/_header_value_parser.py`` → ``email header value parser``."""
    if not gene.source_path:
        return ""
    parts = _path_tail(gene.source_path).split("/")
    parts[-1] = parts[-1].rsplit(".", 1)[0] if "." in parts[-1].lstrip(".") else parts[-1]
    return " ".join(_words(p) for p in parts)


def _comment_text(content: str, language: str | None) -> str:
    found: list[str] = []
    size = 0
    for pattern in _COMMENTS.get(language or "", ()):
        for match in pattern.finditer(content):
            text = " ".join((match.group(match.lastindex or 0) or "").replace("*", " ").split())
            if text:
                found.append(text)
                size += len(text)
                if size > _MAX_COMMENT_CHARS:
                    return " ".join(found)
    return " ".join(found)


def code_digest(gene: Gene) -> str:
    """Where the code lives and the names it defines, as words; its comments; then the code.

    Names as words because the model's word pieces spend 7 pieces on
    ``MIMEPart.add_attachment`` and 4 on "mime part add attachment".
    """
    names = [_words(part) for part in (gene.symbol or "").split(".") if part]
    for name in dict.fromkeys(_DEFINED.findall(gene.content)):
        if len(names) >= _MAX_NAMES:
            break
        words = _words(name)
        if words not in names:
            names.append(words)
    head = " | ".join(part for part in (_where(gene), ", ".join(names)) if part)
    return head + "\n" + _comment_text(gene.content, gene.language) + "\n" + gene.content


def embedding_text(gene: Gene) -> str:
    """The text the embedder reads for this gene (see the module docstring)."""
    if gene.content_type == "code":
        return code_digest(gene)
    head = [part for part in (_path_tail(gene.source_path), gene.symbol) if part]
    return (" | ".join(head) + "\n" + gene.content) if head else gene.content


def _path_tail(path: str | None) -> str:
    return "/".join(path.replace("\\", "/").rstrip("/").split("/")[-2:]) if path else ""


def embedding_tokens(gene: Gene, cfg: EmbeddingSettings) -> int:
    """How many word pieces of ``embedding_text(gene)`` the model reads."""
    return cfg.code_max_tokens if gene.content_type == "code" else cfg.max_tokens
