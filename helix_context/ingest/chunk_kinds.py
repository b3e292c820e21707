"""Segments for everything that is not code: markdown, logs, config files, JSON and diffs."""

from __future__ import annotations

import re

from helix_context.ingest.chunk_lines import Doc, Seg, new_group, segments_from_anchors, segments_paragraphs

# --------------------------------------------------------------------------- #
# markdown
# --------------------------------------------------------------------------- #
_ATX = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_SETEXT = re.compile(r" {0,3}(=+|-+)[ \t]*$")
_RST_UNDER = re.compile(r"([=\-~^\"'`*+#:.<>_])\1{2,}[ \t]*$")


def segments_markdown(doc: Doc, language: str | None) -> list[Seg]:
    lines = doc.lines
    n = doc.n
    anchors: list[tuple[int, str | None]] = []
    fence: str | None = None
    rst = language == "rst"
    i = 0
    if n and lines[0].rstrip() == "---":  # YAML front matter
        j = 1
        while j < n and lines[j].rstrip() not in ("---", "..."):
            j += 1
        i = j + 1
    while i < n:
        line = lines[i]
        if fence is not None:
            stripped = line.strip()
            if stripped.startswith(fence) and not stripped.strip(fence[0]):
                fence = None
            i += 1
            continue
        if not line:
            i += 1
            continue
        c = line.lstrip(" ")[:1]
        if c in "`~":
            m = _FENCE.match(line)
            if m:
                fence = m.group(1)
                i += 1
                continue
        if c == "#" and not rst:
            m = _ATX.match(line[:1000])
            if m:
                anchors.append((i, (m.group(2) or "").strip() or None))
                i += 1
                continue
        if i + 1 < n and line.strip() and not line.startswith(("    ", "\t")):
            nxt = lines[i + 1]
            if nxt[:1] in "=-~^\"'`*+#:.<>_" and nxt.strip():
                prev_blank = i == 0 or not lines[i - 1].strip()
                if rst:
                    m = _RST_UNDER.match(nxt)
                    ok = bool(m) and len(nxt.rstrip()) >= len(line.rstrip()) and not _RST_UNDER.match(line)
                    if ok:
                        start = i - 1 if i > 0 and lines[i - 1].strip() and _RST_UNDER.match(lines[i - 1]) else i
                        anchors.append((start, line.strip()))
                        i += 2
                        continue
                else:
                    m = _SETEXT.match(nxt)
                    if m and (m.group(1)[0] == "=" or prev_blank) and not line.lstrip().startswith(
                            ("-", "*", "+", ">", "|")):
                        anchors.append((i, line.strip()))
                        i += 2
                        continue
        i += 1
    if not anchors:
        return segments_paragraphs(doc)
    return segments_from_anchors(anchors, 0, n)


# --------------------------------------------------------------------------- #
# logs
# --------------------------------------------------------------------------- #

from helix_context.ingest.detect import LOG_LINE_RE as _LOG_START  # noqa: E402 - kept beside the log section that uses it

_CONT = re.compile(r"(?:[ \t]|Traceback \(most recent call last\)|During handling of the above exception|"
                   r"The above exception was the direct cause|Caused by[: ]|\.\.\. \d+ (?:more|common)|"
                   r"[\w.$]*(?:Error|Exception|Warning|Exit|Interrupt)\b[^ ]*(?::|$)|at [\w$.<>]+\()")
_TB_START = "Traceback (most recent call last)"


def segments_log(doc: Doc) -> list[Seg]:
    lines = doc.lines
    n = doc.n
    # does this log have timestamped / levelled records at all?
    sample = [ln for ln in lines[:200] if ln.strip()]
    stamped = sum(1 for ln in sample if _LOG_START.match(ln)) * 5 >= max(1, len(sample))
    starts: list[tuple[int, str | None]] = []
    in_tb = False
    after_blank = True
    for i in range(n):
        line = lines[i]
        if not line.strip():
            after_blank = True
            continue
        new = False
        if in_tb:
            # a traceback runs until its unindented exception line (included)
            if line.startswith(_TB_START) or line.startswith(("During handling", "The above exception")):
                pass
            elif line[0] not in " \t":
                if stamped and _LOG_START.match(line):
                    new = True
                in_tb = False
        elif stamped:
            if _LOG_START.match(line):
                new = True
            elif after_blank and not _CONT.match(line):
                new = True
        else:
            if after_blank and not _CONT.match(line):
                new = True
        if line.startswith(_TB_START):
            in_tb = True
        if new or not starts:
            starts.append((i, None))
        after_blank = False
    if not starts:
        return []
    return segments_from_anchors(starts, 0, n)


# --------------------------------------------------------------------------- #
# config
# --------------------------------------------------------------------------- #

_SECTION = re.compile(r"\s*\[\[?\s*([^\]\n]+?)\s*\]\]?\s*(?:[#;].*)?$")
_YAML_KEY = re.compile(r"(?:\"([^\"]+)\"|'([^']+)'|([^\s#:\-\"'][^:#]*?))\s*:(?:\s|$)")
_MAKE_TARGET = re.compile(r"([A-Za-z0-9_./%$() -]+?)\s*::?(?:\s|$)(?!=)")
_DOCKER_STAGE = re.compile(r"FROM\s+\S+(?:\s+AS\s+(\S+))?", re.I)
_COMMENT_PREFIX = ("#", ";", "//")


def segments_config(doc: Doc, language: str | None) -> list[Seg]:
    lines = doc.lines
    anchors: list[tuple[int, str | None]] = []
    lang = language or ""

    def attach_comments(i: int) -> int:
        start = i
        while start - 1 >= 0 and lines[start - 1].lstrip().startswith(_COMMENT_PREFIX):
            start -= 1
        return start

    if lang in ("yaml", "yml"):
        for i, line in enumerate(lines):
            if not line or line[0] in " \t#-%\r" or line.startswith("..."):
                if line.startswith("---"):
                    anchors.append((i, None))
                continue
            m = _YAML_KEY.match(line[:400])
            if m:
                anchors.append((attach_comments(i), m.group(1) or m.group(2) or m.group(3)))
    elif lang == "makefile":
        for i, line in enumerate(lines):
            if not line or line[0] in " \t#\r.":
                continue
            m = _MAKE_TARGET.match(line[:400])
            if m and "=" not in line.split(":", 1)[0]:
                anchors.append((attach_comments(i), m.group(1).strip()))
    elif lang == "dockerfile":
        for i, line in enumerate(lines):
            m = _DOCKER_STAGE.match(line[:400])
            if m:
                anchors.append((attach_comments(i), m.group(1) or line.split()[1] if len(line.split()) > 1 else None))
    else:
        for i, line in enumerate(lines):
            if line[:1] == "[" or (line[:1] in " \t" and line.lstrip()[:1] == "["):
                m = _SECTION.match(line[:400])
                if m:
                    anchors.append((attach_comments(i), m.group(1)))
    # fewer than two anchors: sections do not help, group by blank lines instead
    if len(anchors) < 1:
        return segments_paragraphs(doc)
    segs = segments_from_anchors(anchors, 0, doc.n)
    return segs


# --------------------------------------------------------------------------- #
# json
# --------------------------------------------------------------------------- #

_JSON_KEY = re.compile(r"([ \t]*)\"((?:[^\"\\]|\\.){0,200})\"\s*:")


def segments_json(doc: Doc, language: str | None) -> list[Seg]:
    lines = doc.lines
    n = doc.n
    if n <= 1:
        return [Seg(0, n)]
    first = next((i for i in range(n) if lines[i].strip()), 0)
    head = lines[first].lstrip()
    if language == "jsonl" or (head.startswith("{") and head.rstrip().endswith("}") and n > first + 1
                               and lines[first + 1].lstrip().startswith("{")):
        return [Seg(i, i + 1) for i in range(n) if lines[i].strip()]
    # pretty-printed: members of the outermost value have the smallest indentation inside it
    indent: int | None = None
    for i in range(first + 1, min(n, first + 400)):
        ln = lines[i]
        st = ln.lstrip(" \t")
        if st and st[0] not in "}]":
            indent = len(ln) - len(st)
            break
    if not indent:
        return segments_paragraphs(doc) if n > 1 else [Seg(0, n)]
    anchors: list[tuple[int, str | None]] = []
    for i in range(first + 1, n):
        ln = lines[i]
        if len(ln) > indent and ln[indent] not in " \t}]" and (indent == 0 or not ln[:indent].strip()):
            if ln[indent] == "\"":
                m = _JSON_KEY.match(ln)
                anchors.append((i, m.group(2) if m else None))
            else:
                anchors.append((i, None))
    if not anchors:
        return [Seg(0, n)]
    anchors[0] = (first, anchors[0][1])
    return segments_from_anchors(anchors, 0, n)


# --------------------------------------------------------------------------- #
# diff
# --------------------------------------------------------------------------- #

_DIFF_FILE = re.compile(r"(?:diff --git a/(\S+) b/(\S+)|diff (?:-\S+ )*(\S+) (\S+)$|Index: (\S+))")
_PLUS_FILE = re.compile(r"\+\+\+ (?:b/)?([^\t\n\r]+)")


def segments_diff(doc: Doc, max_chars: int) -> list[Seg]:
    lines = doc.lines
    n = doc.n
    files: list[tuple[int, str | None]] = []
    hunks: list[list[int]] = []
    i = 0
    while i < n:
        line = lines[i]
        if line.startswith(("diff ", "Index: ")):
            m = _DIFF_FILE.match(line)
            name = None
            if m:
                name = m.group(2) or m.group(4) or m.group(5)
            files.append((i, name))
            hunks.append([])
        elif line.startswith("--- ") and i + 1 < n and lines[i + 1].startswith("+++ "):
            m = _PLUS_FILE.match(lines[i + 1])
            name = m.group(1).strip() if m else None
            if files and files[-1][0] < i and not hunks[-1]:
                # header of the file opened by the `diff` line above: name it
                files[-1] = (files[-1][0], files[-1][1] or name)
            else:
                files.append((i, name))
                hunks.append([])
            i += 2
            continue
        elif line.startswith("@@"):
            if not files:
                files.append((i, None))
                hunks.append([])
            hunks[-1].append(i)
        i += 1
    if not files:
        return segments_paragraphs(doc)
    segs: list[Seg] = []
    if files[0][0] > 0:
        segs.append(Seg(0, files[0][0], None))  # commit message / patch preamble
    for k, (start, name) in enumerate(files):
        end = files[k + 1][0] if k + 1 < len(files) else n
        if doc.size(start, end) <= max_chars or len(hunks[k]) < 2:
            segs.append(Seg(start, end, name))
            continue
        group = new_group()
        hs = [h for h in hunks[k] if start < h < end]
        # the file header goes with its first hunk
        bounds = [start, *hs[1:]] if hs else [start]
        for j, b in enumerate(bounds):
            e = bounds[j + 1] if j + 1 < len(bounds) else end
            segs.append(Seg(b, e, name, group))
    return segs
