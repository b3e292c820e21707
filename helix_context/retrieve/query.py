"""Query text → QuerySignals: terms, identifiers (whole and split), path tokens, phrases, synonyms.

A query may be a whole pasted issue: prose, code blocks, tracebacks, error
output. Beyond words it yields what such text carries about *where* the answer
is: traceback frames (file + function), names used as code (calls, `quoted`,
dotted paths, exception classes), and how often each word is repeated. Which
words matter is decided later against the genome (retrieve/terms.py), by how
rare they are there — never by a word list about one project.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterator, Mapping

from helix_context.genome.fts_text import compound_parts, is_compound
from helix_context.models import QuerySignals
from helix_context.retrieve.frames import frames as traceback_frames, locations

MAX_TERMS = 48  # identifiers / phrases kept in first-seen order
MAX_WORDS = 2000  # distinct words weighed against the genome (a 1 MB query stays bounded)
MAX_QUERY_CHARS = 64_000  # a pasted issue with its traceback fits; past that, the tail is ignored

STOP_WORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being below between both but by
can could did do does doing down during each few for from further had has have having he her here hers herself him
himself his how i if in into is it its itself just me more most my myself no nor not now of off on once only or other
our ours ourselves out over own same she should so some such than that the their theirs them themselves then there
these they this those through to too under until up very was we were what when where which while who whom why will
with would you your yours yourself yourselves please show tell find get give use using used need want let make
does doesn don isn wasn whats where's what's how's it's file files code
""".split())

_PHRASE_RE = re.compile(r'"([^"]{2,200})"')
# starts only where a name starts, segments at most 255 characters: a 64 KB run of letters
# otherwise costs quadratic backtracking (seconds per query)
_FILE_EXTENSIONS = ("py|js|ts|tsx|jsx|go|rs|java|c|h|cpp|hpp|cs|rb|php|sh|md|rst|txt|toml|ini|cfg|yaml|yml|json|jsonl|log|"
                    "sql|html|css|env|bat|ps1|kt|swift|lock")
_PATH_RE = re.compile(r"(?<![\w\-])(?:(?:[\w.\-]{1,255}[\\/])+[\w.\-]{1,255}|[\w\-]{1,255}\.(?:" + _FILE_EXTENSIONS + r")\b)")
_FILE_EXTENSION_SET = frozenset(_FILE_EXTENSIONS.split("|"))
_PATH_SEP_RE = re.compile(r"[\\/]+")
_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_WORD_RE = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)
# the same words in ASCII text (where `’` cannot occur), and what splits it into runs that hold them
_ASCII_WORD_RE = re.compile(r"[A-Za-z0-9]+(?:'[A-Za-z0-9]+)?")
_NOT_IN_WORDS = str.maketrans({chr(c): " " for c in range(128) if not (chr(c).isalnum() or chr(c) == "'")})
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_BACKTICK_RE = re.compile(r"`([^`\n]{1,200})`")
_CALL_RE = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*\(")
_EXC_RE = re.compile(r"\b([A-Z][A-Za-z0-9]*(?:Error|Exception|Warning))\b")
_CODE_BLOCK_RE = re.compile(r"```.*?(?:```|\Z)|^(?:>>>|\.\.\.) .*$|^(?: {4}|\t).*$", re.S | re.M)
# lines of a pasted issue that are program text or output, not what the writer means
_OUTPUT_LINE_RE = re.compile(r"^[ \t]*(?:In \[\d+\]:|Out\[\d+\]:|Traceback \(most recent call last\)|File \"[^\"\n]*\", line "
                             r"|[A-Za-z_][\w.]*(?:Error|Exception|Warning):|I?Python \d+\.\d+[\w.+]*\s*[(|\-]"
                             r"|Type \"(?:help|copyright)).*$",
                             re.M)
MAX_TITLE_CHARS = 200
_KEYWORDS = frozenset("""if else elif for while return def class import from as with try except finally raise in is not
and or lambda yield print assert pass break continue global nonlocal del self cls true false none""".split())


def _unique(items: list[str], limit: int = MAX_TERMS) -> tuple[str, ...]:
    return tuple(dict.fromkeys(filter(None, items)))[:limit]  # (filter: a pasted issue has ~800 words)


def _definitions(text: str, identifiers: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """Names the query uses as code, most telling first: frames, errors, `quoted`, calls, dotted parts.

    Only the first MAX_TERMS names are kept, so the kinds are read in that order and the reading stops
    once enough are kept: a pasted issue's frames alone often fill the list, and the later kinds
    (calls and names in all of its code) were most of the cost of reading a 20 KB issue."""
    frames = traceback_frames(text)
    keep: dict[str, None] = {}
    for names in _name_kinds(text, identifiers, frames):
        for name in names:
            if name not in keep and len(name) > 2 and name.lower() not in _KEYWORDS and name.lower() not in STOP_WORDS:
                keep[name] = None
        if len(keep) >= MAX_TERMS:
            break
    return list(keep)[:MAX_TERMS], list(dict.fromkeys(frames))[:MAX_TERMS]


def _name_kinds(text: str, identifiers: list[str], frames: list[tuple[str, str]]) -> Iterator[list[str]]:
    """The kinds of names used as code, most telling first, each read only when asked for."""
    yield [func for _, func in frames if not func.startswith("<")]
    yield _EXC_RE.findall(text)
    yield [m.group(0).rsplit(".", 1)[-1] for quoted in _BACKTICK_RE.findall(text) for m in _IDENT_RE.finditer(quoted)]
    code = " ".join(_code_blocks(text)[0])
    yield _CALL_RE.findall(code)
    yield _CALL_RE.findall(text)
    yield [part for ident in identifiers for part in ident.split(".")]
    yield [w for w in dict.fromkeys(_IDENT_RE.findall(code)) if is_compound(w)]


@functools.lru_cache(maxsize=8)
def _code_blocks(text: str) -> tuple[tuple[str, ...], str]:
    """(the text's code blocks and prompt/indented lines, the text with each replaced by a space).

    Why remembered: extraction (meaning, names used as code) and the query's kind (program_share)
    each split the same text this way; the last few texts are kept. The split is what
    `_CODE_BLOCK_RE.finditer` gives, found with str.find instead (the regex tried three alternatives
    at each of a 20 KB issue's positions): a fenced block runs to the next ``` (or the end); a line
    that starts with a prompt or an indent starts a block that runs to the end of the text, since
    the pattern's `.*$` is read with DOTALL. tests/retrieve/test_request_reads.py checks the two agree."""
    blocks: list[str] = []
    rest: list[str] = []
    at, end = 0, len(text)
    while at < end:
        fence = text.find("```", at)
        line = _first_code_line(text, at, end if fence == -1 else fence)
        if line != -1:
            blocks.append(text[line:])
            rest.append(text[at:line])
            at = end
        elif fence == -1:
            break
        else:
            close = text.find("```", fence + 3)
            stop = end if close == -1 else close + 3
            blocks.append(text[fence:stop])
            rest.append(text[at:fence])
            at = stop
    rest.append(text[at:])
    return tuple(blocks), " ".join(rest)


_CODE_LINE_HEADS = (">>> ", "... ", "    ", "\t")


def _first_code_line(text: str, start: int, stop: int) -> int:
    """The first line start in [start, stop) whose line begins with a prompt or an indent; -1: none.
    (A head that starts before `stop` ends before it: `stop` is a fence, and no head holds a backtick.)"""
    if start == 0 and text.startswith(_CODE_LINE_HEADS):
        return 0
    first = -1
    for head in _CODE_LINE_HEADS:
        i = text.find("\n" + head, max(start - 1, 0), stop)
        if i != -1 and (first == -1 or i + 1 < first):
            first = i + 1
    return first


def meaning(text: str) -> tuple[str, ...]:
    """What the embedding model should read of a query.

    A short question is read whole. A pasted issue is mostly code, program
    output and tracebacks, and the model reads only its first ~128 word pieces:
    an IPython banner or a matrix printout fills them and says nothing about
    where the bug is. So an issue is read as its title (the first line) and its
    prose (code blocks, prompts, tracebacks and output lines removed), and
    retrieval adds the two vectors. On the swe-dev issues this lifted the
    dense signal alone from file Hit@5 0.49 to 0.62 (README, "How code is ranked").
    """
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 2:
        return (text,)
    prose = " ".join(_OUTPUT_LINE_RE.sub(" ", _code_blocks(text)[1]).split())
    title = lines[0].strip()
    is_title = len(title) <= MAX_TITLE_CHARS and not _CODE_BLOCK_RE.match(title) and not _OUTPUT_LINE_RE.match(title)
    views = [title] if is_title else []
    if prose and prose != title:
        views.append(prose)
    return tuple(views) or (text,)


def program_share(text: str) -> float:
    """Share of the text's characters that are program text or output: code blocks, prompts, tracebacks.

    Why: how much of a query is pasted program text says how it should be searched
    (retrieve/question.py); a question in words has none.
    """
    size = len(text.strip())
    if size == 0:
        return 0.0
    blocks, rest = _code_blocks(text)
    code = sum(len(block.strip()) for block in blocks)
    # each line's head decides whether it is output (a 64 KB line costs its head, not a backtracking scan)
    code += sum(len(line.strip()) for line in rest.splitlines() if _OUTPUT_LINE_RE.match(line[:MAX_TITLE_CHARS]))
    return min(1.0, code / size)


def _path_tokens(text: str) -> list[str]:
    """Segments and file-name stems of the paths the text writes, each once, the first MAX_TERMS of them.

    Only MAX_TERMS are kept (`_unique`), so the scan stops there: a pasted issue's tracebacks write
    hundreds of paths, and finding them all cost more than the rest of the words."""
    tokens: dict[str, None] = {}
    seen: set[str] = set()
    for match in _PATH_RE.finditer(text):
        path = match.group(0)
        if path in seen:  # the same path gives the same tokens
            continue
        seen.add(path)
        segments = [s for s in _PATH_SEP_RE.split(path) if s]
        for segment in segments:
            tokens[segment.lower()] = None
        name = segments[-1] if segments else path
        stem = name.rsplit(".", 1)[0].lower()
        if stem:  # `.env` has no stem
            tokens[stem] = None
        if len(tokens) >= MAX_TERMS:
            break
    return list(tokens)


def _spellings(text: str) -> Counter[str]:
    """`Counter(_WORD_RE.findall(text))`: each word as written with its count, in first-seen order.

    Why not the regex alone: it costs ~1 ms on a 20 KB issue, most of extraction's cost. ASCII text
    (nearly every issue) is cut into runs of letters, digits and `'` by str.translate and split, in C;
    a run without `'` is one word, and only a run with one goes through the regex. No word crosses
    a run's ends (every other character ends a word), so the words, counts and order are the same."""
    if not text.isascii():
        return Counter(_WORD_RE.findall(text))
    runs = Counter(text.translate(_NOT_IN_WORDS).split())
    if "'" not in text:
        return runs
    words: Counter[str] = Counter()
    get = words.get
    for run, n in runs.items():
        for word in _ASCII_WORD_RE.findall(run) if "'" in run else (run,):
            words[word] = get(word, 0) + n
    return words


def _word_counts(text: str) -> Counter[str]:
    """Each word (lowercased, stop words and single letters left out) with its count, in first-seen order.

    A pasted issue repeats its words many times: each distinct spelling is looked at once, and the
    counts are summed with `dict.get` (Counter's `+=` on a new word runs its Python __missing__)."""
    counts: Counter[str] = Counter()
    get = counts.get
    for word, n in _spellings(text).items():
        term = word.lower()
        if term not in STOP_WORDS and (len(term) > 1 or term.isdigit()):
            counts[term] = get(term, 0) + n
    return counts


def _names(text: str, counts: Counter[str]) -> tuple[list[str], list[str]]:
    """(identifiers: compound names and dotted names with their parts, the compound names' split parts);
    each piece's count is added to `counts` under its lowercase."""
    identifiers: list[str] = []
    parts: list[str] = []
    get = counts.get
    for word, n in Counter(_IDENT_RE.findall(text)).items():
        if word.isascii() and word.isalnum() and word.islower():  # a plain word: no parts, not a name
            continue
        pieces = word.split(".")
        for piece in pieces:
            split = compound_parts(piece)  # one cached split per piece: empty unless a compound name
            if split or len(pieces) > 1:
                identifiers.append(piece)
                key = piece.lower()
                counts[key] = get(key, 0) + n
            parts.extend(split)
        if len(pieces) > 1 and not _is_file_name(pieces):
            identifiers.append(word)
    return identifiers, parts


def _is_file_name(pieces: list[str]) -> bool:
    """Whether a dotted name (split at its dots) is what _PATH_RE matches whole: `name.ext`, a known extension.

    The same answer as `_PATH_RE.fullmatch` for a name _IDENT_RE found (no slashes, so only the
    pattern's `name.ext` branch can match), without running the pattern: an issue's tracebacks write
    a hundred file names."""
    return len(pieces) == 2 and 0 < len(pieces[0]) <= 255 and pieces[1] in _FILE_EXTENSION_SET


def extract(query: str, synonyms: Mapping[str, tuple[str, ...]] | None = None) -> QuerySignals:
    text = _CONTROL_RE.sub(" ", query or "")[:MAX_QUERY_CHARS]
    phrases = [p.strip() for p in _PHRASE_RE.findall(text)]
    path_tokens = _path_tokens(text)
    counts = _word_counts(text)
    terms = list(counts)
    said = set(terms)
    identifiers, parts = _names(text, counts)
    expansions: list[str] = []
    if synonyms:
        for term in terms:
            expansions.extend(synonyms.get(term, ()))
    definitions, frames = _definitions(text, identifiers)
    return QuerySignals(
        text=text,
        terms=_unique(terms),
        identifiers=_unique(identifiers),
        identifier_parts=_unique(parts),
        path_tokens=_unique(path_tokens),
        phrases=_unique(phrases, 8),
        expansions=_unique([e for e in expansions if e not in said], 16),
        term_counts=tuple(counts.most_common(MAX_WORDS)),
        definitions=tuple(definitions),
        frames=tuple(frames),
        locations=tuple(dict.fromkeys(locations(text)))[:MAX_TERMS],
        meaning=meaning(text),
    )
