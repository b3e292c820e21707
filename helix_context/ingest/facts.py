"""key=value facts from a text: settings, constants and flags a user may ask about.

- config: TOML/INI ``key = value`` (qualified by their ``[section]``), YAML
  ``key: value`` (qualified by their parent keys), .env ``KEY=value``, Dockerfile
  ``ENV``/``ARG``/``EXPOSE``, Makefile ``VAR := value``, requirement pins;
- code: module- and class-level constants with a short literal value —
  Python ``PORT = 11437`` / ``MAX_RETRIES: int = 5`` (never inside a docstring,
  never a function's locals), JS/TS ``const port = 11437``, Go/Rust/C/Java/C#/
  Kotlin constants, shell ``PORT=11437``, C ``#define PORT 11437``;
- CLI flags ``--port 11437`` / ``--port=11437`` in prose, logs and shell code;
- markdown/text ``Key: value`` lines and assignments inside fenced code blocks;
  logs ``key=value`` tokens; json scalar members.

Values are short literals only: no call expressions (``x = foo(bar)``), no
multi-line or compound values beyond a one-line list of scalars, no prose.
Quotes are stripped; keys over 64 and values over 120 characters are dropped;
the first value of a key wins; at most 64 facts per text.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from itertools import chain

from helix_context.ingest.py_layout import python_string_lines

__all__ = ["extract_facts"]

MAX_KEY = 64
MAX_VALUE = 120
MAX_FACTS = 64

_NUM = r"[-+]?(?:0[xX][0-9a-fA-F_]+|0[oObB][0-7_]+|\d[\d_]*(?:\.\d[\d_]*)?(?:[eE][-+]?\d+)?|\.\d+)"
_DQ = r"\"(?:[^\"\\\n]|\\.){0,200}\""
_SQ = r"'(?:[^'\\\n]|\\.){0,200}'"
_SCALAR = rf"(?:{_NUM}|{_DQ}|{_SQ})"
_PY_SCALAR = rf"(?:{_NUM}|[rRbBuU]?{_DQ}|[rRbBuU]?{_SQ}|True\b|False\b|None\b)"
_PY_LITERAL = rf"(?:{_PY_SCALAR}|\((?:\s*{_PY_SCALAR}\s*,)+\s*(?:{_PY_SCALAR}\s*)?\)|\[\s*(?:{_PY_SCALAR}\s*,\s*)*(?:{_PY_SCALAR}\s*)?\])"
_C_SCALAR = rf"(?:{_NUM}[uUlLfF]{{0,3}}|{_DQ}|{_SQ}|true\b|false\b|null\b|nil\b|nullptr\b|None\b)"

_PY_ASSIGN = re.compile(
    rf"^([ \t]*)([A-Za-z_]\w*)[ \t]*(?::[ \t]*[^=\n]{{1,80}}?)?=[ \t]*({_PY_LITERAL})[ \t]*(?:#[^\n]*)?\r?$", re.M)
_PY_BLOCK = re.compile(r"[ \t]*(?:async[ \t]+)?(class|def)\b")

_JS_CONST = re.compile(  # module level only: locals are not facts
    rf"^(?:export[ \t]+)?(?:const|let|var)[ \t]+([A-Za-z_$][\w$]*)[ \t]*(?::[ \t]*[^=\n]{{1,60}}?)?=[ \t]*"
    rf"({_C_SCALAR})[ \t]*;?[ \t]*(?://[^\n]*)?\r?$", re.M)
_JS_STATIC = re.compile(
    rf"^[ \t]+(?:(?:public|private|protected|static|readonly)[ \t]+)+([A-Za-z_$][\w$]*)[ \t]*(?::[ \t]*[^=\n]{{1,60}}?)?"
    rf"=[ \t]*({_C_SCALAR})[ \t]*;?\r?$", re.M)
_GO_CONST = re.compile(  # `const X = 1` at top level, or `X = 1` inside a `const (` block
    rf"^(?:(?:const|var)[ \t]+|[ \t]+)([A-Za-z_]\w*)(?:[ \t]+[\w.*\[\]]+)?[ \t]*=[ \t]*({_C_SCALAR}|`[^`\n]{{0,200}}`)"
    rf"[ \t]*(?://[^\n]*)?\r?$", re.M)
_RUST_CONST = re.compile(
    rf"^[ \t]*(?:pub(?:\([^)\n]*\))?[ \t]+)?(?:const|static)[ \t]+(?:mut[ \t]+)?([A-Za-z_]\w*)[ \t]*:[^=\n]{{1,60}}="
    rf"[ \t]*(&?{_C_SCALAR})[ \t]*;", re.M)
_C_DEFINE = re.compile(rf"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+\(?({_C_SCALAR})\)?[ \t]*(?:/[/*][^\n]*)?\r?$",
                       re.M)
_TYPED_CONST = re.compile(  # C, C++, Java, C#, Kotlin, Swift, Scala, Dart, PHP; top or member level
    rf"^(?:[ ]{{0,4}}|\t)(?:(?:public|private|protected|internal|static|final|const|constexpr|readonly|inline|extern|"
    rf"override|open|lateinit)[ \t]+)*(?:const|final|readonly|constexpr|static|val|let|define)[ \t]+"
    rf"(?:[\w:<>,.\[\]*& ]{{1,60}}?[ \t*&]+)?\$?([A-Za-z_]\w*)[ \t]*(?::[ \t]*[\w.<>?\[\]]{{1,40}}[ \t]*)?=[ \t]*"
    rf"({_C_SCALAR})[ \t]*;?[ \t]*(?://[^\n]*)?\r?$", re.M)
_UPPER_CONST = re.compile(  # any language: SOME_CONSTANT = literal
    rf"^[ \t]*(?:[a-z]+[ \t]+){{0,3}}([A-Z][A-Z0-9_]{{1,63}})[ \t]*(?::[ \t]*[\w.<>\[\]]{{1,40}}[ \t]*)?:?=[ \t]*"
    rf"({_C_SCALAR}|true\b|false\b)[ \t]*[;,]?[ \t]*(?:(?://|#|--)[^\n]*)?\r?$", re.M)
_SHELL_VAR = re.compile(r"^(?:export[ \t]+|local[ \t]+|readonly[ \t]+|declare(?:[ \t]+-\w+)*[ \t]+)?"
                        r"([A-Za-z_][A-Za-z0-9_]*)=(\"[^\"`$\n]{0,200}\"|'[^'\n]{0,200}'|[^\s\"'`$;&|()<>]{1,200})"
                        r"[ \t]*(?:#[^\n]*)?\r?$", re.M)
_PS_VAR = re.compile(rf"^[ \t]*\$([A-Za-z_]\w*)[ \t]*=[ \t]*({_C_SCALAR}|\$true\b|\$false\b)[ \t]*\r?$", re.M)

_INI_KV = re.compile(r"^[ \t]*([A-Za-z0-9_][\w.\-]*|\"[^\"\n]{1,64}\"|'[^'\n]{1,64}')[ \t]*[=:][ \t]*(.*?)[ \t]*\r?$")
_TOML_VALUE = re.compile(
    rf"(?:{_NUM}|{_DQ}|'[^'\n]{{0,200}}'|true|false|\d{{4}}-\d{{2}}-\d{{2}}(?:[T ][\d:.+\-Z]+)?|"
    rf"\[[^\[\]\n]{{0,120}}\])(?=[ \t]*(?:#.*)?$)")
_SECTION = re.compile(r"^[ \t]*\[\[?[ \t]*([^\]\n]{1,80}?)[ \t]*\]\]?[ \t]*(?:[#;].*)?\r?$")
_YAML_KV = re.compile(r"^([ \t]*)(?:-[ \t]+)?([A-Za-z0-9_][\w.\-/]*|\"[^\"\n]{1,64}\"|'[^'\n]{1,64}'):(?:[ \t]+(.*?))?[ \t]*\r?$")
_DOTENV = re.compile(r"^[ \t]*(?:export[ \t]+)?([A-Za-z_][A-Za-z0-9_.]*)[ \t]*=[ \t]*(.*?)[ \t]*\r?$")
_DOCKER = re.compile(r"^[ \t]*(ENV|ARG|EXPOSE|LABEL)[ \t]+(.+?)[ \t]*\r?$", re.I)
_MAKE_VAR = re.compile(r"^([A-Za-z_][\w.]*)[ \t]*(?::::?=|\?=|:=|=)[ \t]*(.*?)[ \t]*\r?$")
_REQ = re.compile(r"^[ \t]*([A-Za-z0-9][A-Za-z0-9._\-]*(?:\[[\w,\- ]+\])?)[ \t]*((?:===?|~=|>=|<=|!=|>|<)[^;#\s]+(?:,[^;#\s]+)*)")
_FLAG = re.compile(
    r"(?<![\w-])--([A-Za-z][\w\-]{0,40})(?:=(\"[^\"\n]{0,120}\"|'[^'\n]{0,120}'|[^\s\"'`;|&<>()]{1,120})"
    r"|[ \t]+(\"[^\"\n]{0,120}\"|'[^'\n]{0,120}'|[-+]?\d[\w.:/\-]*|\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?|"
    r"(?:localhost|[\w\-]+\.[\w.\-]+):\d+|https?://[^\s\"'`;|&<>()]+|[~.]?/[\w.\-/]+)(?=[\s;|&)`\"',\]]|$))")
_MD_KV = re.compile(
    r"^[ \t]{0,3}(?:[-*+][ \t]+)?(?:\*\*|__)?([A-Za-z][\w\-./ ]{0,40}?)(?:\*\*|__)?[ \t]*(?:\*\*|__)?:(?:\*\*|__)?"
    r"[ \t]+(\S.{0,118}?)[ \t]*\r?$")
_LOG_KV = re.compile(r"(?<![\w.\-/])([A-Za-z_][\w.\-]{0,40})=(\"[^\"\n]{0,120}\"|'[^'\n]{0,120}'|[^\s,;\"'&)\]}]{1,120})")
_JSON_KV = re.compile(
    rf"^[ \t]*\"((?:[^\"\\\n]|\\.){{1,64}})\"[ \t]*:[ \t]*({_NUM}|{_DQ}|true|false|null)[ \t]*,?[ \t]*\r?$", re.M)
_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")
_FENCED_ASSIGN = re.compile(
    rf"^[ \t]*(?:export[ \t]+|set[ \t]+)?([A-Za-z_][\w.\-]*)[ \t]*(?:=|:[ \t])[ \t]*"
    rf"({_SCALAR}|true\b|false\b|[\w.\-:/]{{1,80}})[ \t]*(?:#.*)?\r?$")

_SHELL_LANGS = frozenset({"bash", "sh", "zsh", "ksh", "fish", "shell", "dockerfile", "makefile", "batch"})
_MD_KEY_STOP = frozenset({"note", "warning", "tip", "example", "important", "caution", "see", "e.g", "i.e", "http",
                          "https", "for example", "usage", "returns", "return", "args", "arguments", "raises",
                          "parameters", "params", "yields", "todo", "fixme", "q", "a"})


class _Facts:
    __slots__ = ("items", "seen")

    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []
        self.seen: set[str] = set()

    def add(self, key: str, value: str) -> bool:
        """Add one fact; False once the cap is reached."""
        if len(self.items) >= MAX_FACTS:
            return False
        key = _unquote(key.strip())
        cleaned = _clean_value(value)
        folded = key.casefold()
        if not key or cleaned is None or len(key) > MAX_KEY or folded in self.seen:
            return True
        self.seen.add(folded)
        self.items.append((key, cleaned))
        return True

    @property
    def full(self) -> bool:
        return len(self.items) >= MAX_FACTS


def _unquote(s: str) -> str:
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "\"'`":
        return s[1:-1]
    if len(s) >= 3 and s[0] in "rRbBuU" and s[1] == s[-1] and s[1] in "\"'":
        return s[2:-1]
    return s


def _clean_value(raw: str) -> str | None:
    v = raw.strip()
    if v.endswith((";", ",")):
        v = v[:-1].rstrip()
    v = _unquote(v)
    if not v.strip() or len(v) > MAX_VALUE or "\n" in v:
        return None
    return v


# --------------------------------------------------------------------------- #
# config
# --------------------------------------------------------------------------- #


def _strip_inline_comment(value: str) -> str:
    """Drop a ``# comment`` / ``; comment`` after a value (a quoted value ends at its quote)."""
    if not value:
        return value
    if value[0] in "\"'":
        end = value.find(value[0], 1)
        return value[: end + 1] if end > 0 else value
    for marker in (" #", "\t#", " ;", "\t;"):
        k = value.find(marker)
        if k >= 0:
            value = value[:k]
    return value.rstrip()


def _facts_ini(lines: list[str], out: _Facts, toml: bool) -> None:
    section = ""
    for line in lines:
        if out.full:
            return
        st = line.lstrip()
        if not st or st[0] in "#;":
            continue
        if st[0] == "[":
            m = _SECTION.match(line)
            if m:
                section = m.group(1).strip().strip("\"'")
                continue
        m = _INI_KV.match(line)
        if not m:
            continue
        key, value = m.group(1), m.group(2)
        if toml:
            vm = _TOML_VALUE.match(value)
            if not vm:
                continue  # multi-line strings/arrays, inline tables
            value = vm.group(0)
        else:
            value = _strip_inline_comment(value)
            if not value or value.endswith(("\\", "(", "[", "{")):
                continue
        key = _unquote(key)
        out.add(f"{section}.{key}" if section else key, value)


def _facts_yaml(lines: list[str], out: _Facts) -> None:
    stack: list[tuple[int, str]] = []  # (indent, key) of open mappings
    block_indent: int | None = None  # inside a `key: |` block scalar
    for line in lines:
        if out.full:
            return
        st = line.lstrip(" \t")
        if not st or st[0] == "#":
            continue
        indent = len(line) - len(st)
        if block_indent is not None:
            if indent > block_indent:
                continue
            block_indent = None
        if st.startswith(("---", "...")):
            stack.clear()
            continue
        m = _YAML_KV.match(line)
        if not m:
            continue
        key = _unquote(m.group(2))
        value = m.group(3) or ""
        if st.startswith("-"):
            indent += 2
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if not value or value.startswith("#"):
            stack.append((indent, key))
            continue
        if value[0] in "|>":
            block_indent = indent
            continue
        if value[0] in "[{&*!" and not value.startswith(("[", "{")):
            continue
        if value[0] in "[{" and not value.endswith(("]", "}")):
            continue
        value = _strip_inline_comment(value)
        path = ".".join([k for _, k in stack] + [key])
        out.add(path, value)


def _facts_dotenv(lines: list[str], out: _Facts) -> None:
    for line in lines:
        if out.full:
            return
        st = line.lstrip()
        if not st or st[0] == "#":
            continue
        m = _DOTENV.match(line)
        if m:
            value = m.group(2)
            if value[:1] in "\"'" and (len(value) < 2 or value[-1] != value[0]):
                continue  # multi-line quoted value
            out.add(m.group(1), _strip_inline_comment(value))


def _facts_dockerfile(lines: list[str], out: _Facts) -> None:
    for line in lines:
        m = _DOCKER.match(line)
        if not m:
            continue
        kw, rest = m.group(1).upper(), m.group(2)
        if kw == "EXPOSE":
            out.add("EXPOSE", rest.split()[0])
            continue
        if "=" in rest:
            for km in re.finditer(r"([A-Za-z_][\w.\-]*)=(\"[^\"]*\"|'[^']*'|\S+)", rest):
                out.add(km.group(1), km.group(2))
        elif kw == "ENV":
            parts = rest.split(None, 1)
            if len(parts) == 2:
                out.add(parts[0], parts[1])


def _facts_makefile(lines: list[str], out: _Facts) -> None:
    for line in lines:
        if not line or line[0] in " \t#":
            continue
        m = _MAKE_VAR.match(line)
        if m and "$(" not in m.group(2) and "$(shell" not in m.group(2):
            out.add(m.group(1), m.group(2))


def _facts_requirements(lines: list[str], out: _Facts) -> None:
    for line in lines:
        m = _REQ.match(line)
        if m:
            out.add(m.group(1), m.group(2))


def _facts_config(text: str, language: str, out: _Facts) -> None:
    lines = text.split("\n")
    if language in ("yaml", "yml"):
        _facts_yaml(lines, out)
    elif language == "dotenv":
        _facts_dotenv(lines, out)
    elif language == "dockerfile":
        _facts_dockerfile(lines, out)
    elif language == "makefile":
        _facts_makefile(lines, out)
    elif language == "requirements":
        _facts_requirements(lines, out)
    elif language in ("toml", "lock"):
        _facts_ini(lines, out, toml=True)
    elif language in ("ini", "properties", "gitconfig", ""):
        _facts_ini(lines, out, toml=False)
    else:
        return
    if language in ("dockerfile", "makefile"):
        _facts_flags(text, out)


# --------------------------------------------------------------------------- #
# code
# --------------------------------------------------------------------------- #


def _facts_python(text: str, out: _Facts) -> None:
    found = _PY_ASSIGN.finditer(text)
    first = next(found, None)
    if first is None:
        return
    mask = python_string_lines(text)
    lines = text.split("\n")
    line_starts: list[int] | None = None
    for m in chain((first,), found):
        if out.full:
            return
        if line_starts is None:
            line_starts = [0]
            pos = text.find("\n")
            while pos >= 0:
                line_starts.append(pos + 1)
                pos = text.find("\n", pos + 1)
        i = bisect_right(line_starts, m.start()) - 1
        if i < len(mask) and mask[i]:
            continue  # a line of a docstring / multi-line string
        indent = m.group(1)
        if indent and not _in_class_body(lines, mask, i, len(indent.expandtabs())):
            continue  # a function's local, or inside an if/try block
        key = m.group(2)
        if key.startswith("__") and key not in ("__version__", "__author__", "__license__", "__title__"):
            continue
        if key in ("_", "self", "cls"):
            continue
        out.add(key, m.group(3))


def _in_class_body(lines: list[str], mask: bytearray, i: int, indent: int) -> bool:
    """True when the nearest enclosing block of line i (within 400 lines) is a class."""
    for j in range(i - 1, max(-1, i - 400), -1):
        if j < len(mask) and mask[j]:
            continue
        ln = lines[j]
        st = ln.lstrip(" \t")
        if not st or st[0] == "#":
            continue
        ind = len(ln[: len(ln) - len(st)].expandtabs())
        if ind < indent:
            m = _PY_BLOCK.match(ln)
            return m is not None and m.group(1) == "class"
    return False


def _facts_go(text: str, out: _Facts) -> None:
    block = False  # inside `const (` / `var (`
    for line in text.split("\n"):
        if out.full:
            return
        if block:
            if line.startswith(")"):
                block = False
                continue
        elif line.startswith(("const (", "var (")):
            block = True
            continue
        elif not line.startswith(("const ", "var ")):
            continue
        m = _GO_CONST.match(line)
        if m:
            out.add(m.group(1), m.group(2))


def _facts_code(text: str, language: str, out: _Facts) -> None:
    if language == "python":
        _facts_python(text, out)
        return
    regexes: list[re.Pattern[str]]
    if language in ("javascript", "typescript", "tsx", "jsx", "vue", "svelte"):
        regexes = [_JS_CONST, _JS_STATIC, _UPPER_CONST]
    elif language == "go":
        _facts_go(text, out)
        return
    elif language == "rust":
        regexes = [_RUST_CONST, _UPPER_CONST]
    elif language in ("c", "cpp", "cuda", "objc", "hlsl", "glsl"):
        regexes = [_C_DEFINE, _TYPED_CONST, _UPPER_CONST]
    elif language in _SHELL_LANGS:
        regexes = [_SHELL_VAR]
    elif language == "powershell":
        regexes = [_PS_VAR]
    else:
        regexes = [_TYPED_CONST, _UPPER_CONST]
    for rx in regexes:
        for m in rx.finditer(text):
            if not out.add(m.group(1), m.group(2)):
                return
    if language in _SHELL_LANGS or language == "powershell":
        _facts_flags(text, out)


# --------------------------------------------------------------------------- #
# prose, logs, json
# --------------------------------------------------------------------------- #


def _facts_flags(text: str, out: _Facts) -> None:
    if "--" not in text:
        return
    for m in _FLAG.finditer(text):
        value = m.group(2) if m.group(2) is not None else m.group(3)
        if value is None:
            continue
        if not out.add(m.group(1), value):
            return


def _facts_markdown(text: str, out: _Facts) -> None:
    fence: str | None = None
    for line in text.split("\n"):
        if out.full:
            return
        fm = _FENCE.match(line)
        if fm:
            if fence is None:
                fence = fm.group(1)
            elif line.strip().startswith(fence):
                fence = None
            continue
        if fence is not None:
            m = _FENCED_ASSIGN.match(line)
            if m:
                out.add(m.group(1), _strip_inline_comment(m.group(2)))
            continue
        if ":" not in line:
            continue
        m = _MD_KV.match(line)
        if not m:
            continue
        key = m.group(1).strip()
        value = m.group(2).strip()
        if len(key.split()) > 4 or key.lower() in _MD_KEY_STOP or value.startswith("//"):
            continue
        if value.endswith(":") or value.count(" ") > 12:
            continue  # a lead-in to a list, or a sentence
        value = value.rstrip(".")
        out.add(key, value.strip("*_` "))
    _facts_flags(text, out)


def _facts_log(text: str, out: _Facts) -> None:
    if "=" in text:
        for m in _LOG_KV.finditer(text):
            if not out.add(m.group(1), m.group(2)):
                return
    _facts_flags(text, out)


def _facts_json(text: str, out: _Facts) -> None:
    for m in _JSON_KV.finditer(text):
        if not out.add(m.group(1), m.group(2)):
            return


def extract_facts(text: str, content_type: str, language: str | None) -> list[tuple[str, str]]:
    """key=value facts found in ``text`` (see the module docstring). Never raises."""
    if not text or not text.strip():
        return []
    out = _Facts()
    lang = (language or "").lower()
    try:
        if content_type == "config":
            _facts_config(text, lang, out)
        elif content_type == "code":
            _facts_code(text, lang, out)
        elif content_type in ("markdown", "text"):
            _facts_markdown(text, out)
        elif content_type == "log":
            _facts_log(text, out)
        elif content_type == "json":
            _facts_json(text, out)
    except Exception:  # a fact is a bonus; a pathological input must not fail the ingest
        pass
    return out.items
