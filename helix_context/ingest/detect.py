"""Content-type and language detection, and a cheap binary check.

`detect_type` decides from the file name first (extension, well-known names such
as ``Dockerfile`` or ``Makefile``) and falls back to sniffing the first few KB of
the text (shebang, diff headers, JSON, log timestamps, markdown, config, code).
The returned content type is one of ``helix_context.models.CONTENT_TYPES``; the
language names of code match tree-sitter-language-pack's names where one exists,
so the chunker can hand them straight to a parser.
"""

from __future__ import annotations

import codecs
import re

__all__ = ["detect_type", "is_binary", "decode_text"]

# extension (lower case, without the dot) -> (content_type, language)
_EXT: dict[str, tuple[str, str | None]] = {}


def _reg(content_type: str, language: str | None, *exts: str) -> None:
    for ext in exts:
        _EXT[ext] = (content_type, language)


_reg("code", "python", "py", "pyw", "pyi", "pyx")
_reg("code", "javascript", "js", "mjs", "cjs", "jsx")
_reg("code", "typescript", "ts", "mts", "cts")
_reg("code", "tsx", "tsx")
_reg("code", "go", "go")
_reg("code", "rust", "rs")
_reg("code", "java", "java")
_reg("code", "c", "c", "h")
_reg("code", "cpp", "cpp", "cc", "cxx", "c++", "hpp", "hh", "hxx", "h++", "ipp", "inl")
_reg("code", "cuda", "cu", "cuh")
_reg("code", "objc", "m", "mm")
_reg("code", "csharp", "cs", "csx")
_reg("code", "ruby", "rb", "rake", "gemspec")
_reg("code", "php", "php", "phtml")
_reg("code", "bash", "sh", "bash", "zsh", "ksh")
_reg("code", "fish", "fish")
_reg("code", "powershell", "ps1", "psm1", "psd1")
_reg("code", "kotlin", "kt", "kts")
_reg("code", "swift", "swift")
_reg("code", "scala", "scala", "sc")
_reg("code", "groovy", "groovy", "gradle")
_reg("code", "lua", "lua")
_reg("code", "perl", "pl", "pm")
_reg("code", "r", "r")
_reg("code", "julia", "jl")
_reg("code", "dart", "dart")
_reg("code", "elixir", "ex", "exs")
_reg("code", "erlang", "erl", "hrl")
_reg("code", "haskell", "hs")
_reg("code", "ocaml", "ml", "mli")
_reg("code", "fsharp", "fs", "fsx", "fsi")
_reg("code", "clojure", "clj", "cljs", "cljc", "edn")
_reg("code", "elisp", "el")
_reg("code", "zig", "zig")
_reg("code", "nim", "nim")
_reg("code", "v", "v")
_reg("code", "sql", "sql")
_reg("code", "html", "html", "htm", "xhtml")
_reg("code", "css", "css")
_reg("code", "scss", "scss", "sass", "less")
_reg("code", "vue", "vue")
_reg("code", "svelte", "svelte")
_reg("code", "proto", "proto")
_reg("code", "graphql", "graphql", "gql")
_reg("code", "solidity", "sol")
_reg("code", "verilog", "sv", "svh", "vh")
_reg("code", "vhdl", "vhd", "vhdl")
_reg("code", "glsl", "glsl", "vert", "frag")
_reg("code", "hlsl", "hlsl")
_reg("code", "wgsl", "wgsl")
_reg("code", "cmake", "cmake")
_reg("code", "terraform", "tf", "tfvars")
_reg("code", "hcl", "hcl")
_reg("code", "nix", "nix")
_reg("code", "latex", "tex", "sty", "cls")
_reg("code", "vim", "vim")
_reg("code", "fortran", "f90", "f95", "f03", "f08")
_reg("code", "pascal", "pas")
_reg("code", "matlab", "matlab")
_reg("code", "batch", "bat", "cmd")
_reg("markdown", "markdown", "md", "markdown", "mdown", "mkd", "mdx")
_reg("markdown", "rst", "rst")
_reg("markdown", "org", "org")
_reg("markdown", "asciidoc", "adoc", "asciidoc")
_reg("text", None, "txt", "text")
_reg("log", None, "log", "out", "err")
_reg("config", "toml", "toml")
_reg("config", "ini", "ini", "cfg", "conf", "cnf", "editorconfig", "desktop", "service")
_reg("config", "yaml", "yaml", "yml")
_reg("config", "dotenv", "env")
_reg("config", "properties", "properties")
_reg("config", "xml", "xml", "xsd", "xsl", "plist", "csproj", "props", "targets", "svg")
_reg("config", "requirements", "in")
_reg("config", "gitignore", "gitignore", "dockerignore", "npmignore")
_reg("config", "dockerfile", "dockerfile", "containerfile")
_reg("config", "makefile", "mk", "mak")
_reg("config", "lock", "lock")
_reg("json", "json", "json", "json5", "jsonc", "geojson", "ipynb", "webmanifest", "har")
_reg("json", "jsonl", "jsonl", "ndjson")
_reg("diff", "diff", "diff", "patch")

# whole file names (lower case) that decide alone
_NAMES: dict[str, tuple[str, str | None]] = {
    "dockerfile": ("config", "dockerfile"),
    "containerfile": ("config", "dockerfile"),
    "makefile": ("config", "makefile"),
    "gnumakefile": ("config", "makefile"),
    "justfile": ("config", "makefile"),
    ".env": ("config", "dotenv"),
    ".gitignore": ("config", "gitignore"),
    ".dockerignore": ("config", "gitignore"),
    ".gitattributes": ("config", "gitattributes"),
    ".editorconfig": ("config", "ini"),
    ".gitconfig": ("config", "ini"),
    ".npmrc": ("config", "ini"),
    ".pypirc": ("config", "ini"),
    "requirements.txt": ("config", "requirements"),
    "cargo.lock": ("config", "toml"),
    "poetry.lock": ("config", "toml"),
    "uv.lock": ("config", "toml"),
    "pipfile": ("config", "toml"),
    "gemfile": ("code", "ruby"),
    "rakefile": ("code", "ruby"),
    "vagrantfile": ("code", "ruby"),
    "cmakelists.txt": ("code", "cmake"),
    "build": ("code", "starlark"),
    "build.bazel": ("code", "starlark"),
    "workspace": ("code", "starlark"),
    "go.mod": ("config", "gomod"),
    "go.sum": ("config", "gosum"),
    ".bashrc": ("code", "bash"),
    ".zshrc": ("code", "bash"),
    ".profile": ("code", "bash"),
    ".bash_profile": ("code", "bash"),
}

# prose files that usually come without an extension
_TEXT_NAMES = frozenset({"readme", "license", "licence", "copying", "authors", "contributors",
                         "notice", "changelog", "changes", "news", "todo", "history", "install"})

_SHEBANG = re.compile(r"#!\s*(?:/usr)?(?:/local)?/bin/(?:env\s+(?:-\S+\s+)*)?([A-Za-z0-9_.+-]+)")
_SHEBANG_LANG = (
    ("python", "python"), ("node", "javascript"), ("deno", "typescript"), ("bun", "javascript"),
    ("bash", "bash"), ("sh", "bash"), ("zsh", "bash"), ("ksh", "bash"), ("dash", "bash"),
    ("ruby", "ruby"), ("perl", "perl"), ("php", "php"), ("lua", "lua"), ("fish", "fish"),
    ("pwsh", "powershell"), ("rscript", "r"), ("julia", "julia"), ("tclsh", "tcl"),
)

_TS = (
    r"(?:\d{4}[-/.]\d{2}[-/.]\d{2}[T _]\d{1,2}:\d{2}"  # 2024-01-02 12:34 / 2024-01-02T12:34
    r"|\d{2}:\d{2}:\d{2}"  # 12:34:56
    r"|(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)\s+\d{1,2}\s+\d{2}:\d{2}"  # syslog
    r"|\d{1,2}/(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)/\d{4}:\d{2}:\d{2}"  # apache
    r"|\d{10}(?:\.\d+)?\s)"  # unix seconds
)
# a log record start: optional bracket/prefix, a timestamp, or a level word
LOG_LINE_RE = re.compile(
    r"\s{0,2}[\[(<]?(?:" + _TS + r"|(?:TRACE|DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|ERR|CRITICAL|FATAL|SEVERE)\b[\]:)>]?\s)"
)
_DIFF_RE = re.compile(r"^(?:diff --git |diff -\S|Index: \S|--- \S.*\n\+\+\+ \S|@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@)",
                      re.M)
_MD_RE = re.compile(r"^(?:#{1,6} \S|```|~~~|\s*[-*] \[[ xX]\] |[^\n]{0,300}?\]\([^)\s]{1,300}\))", re.M)
_INI_SECTION_RE = re.compile(r"^\[[^\]\n]+\]\s*$", re.M)
_KV_RE = re.compile(r"^[A-Za-z_][\w.-]*\s*=\s*\S", re.M)
_YAML_KV_RE = re.compile(r"^[A-Za-z_][\w.-]*:(?:\s|$)", re.M)
_PY_RE = re.compile(r"^(?:(?:async\s+)?def \w+\(|class \w+[(:]|import \w|from [\w.]+ import )", re.M)
_C_LIKE_RE = re.compile(
    r"^\s*(?:#include\s*[<\"]|(?:export\s+)?(?:async\s+)?function\s+\w+\s*\(|(?:const|let|var)\s+\w+\s*=|"
    r"(?:public|private|protected)\s+(?:static\s+)?[\w<>\[\]]+\s+\w+\s*\(|package\s+[\w.]+;?\s*$|"
    r"func\s+\w+\(|fn\s+\w+|use\s+[\w:]+;|namespace\s+\w)",
    re.M,
)


def _split_name(path: str) -> str:
    """The last component of a POSIX or Windows path."""
    name = path.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    return name


def _by_name(path: str) -> tuple[str, str | None] | None:
    name = _split_name(path)
    lower = name.lower()
    if not lower:
        return None
    hit = _NAMES.get(lower)
    if hit:
        return hit
    if lower.startswith(".env.") or lower.endswith(".env"):  # .env.local, prod.env
        return ("config", "dotenv")
    if lower.startswith(("dockerfile.", "containerfile.")) or lower.endswith(".dockerfile"):
        return ("config", "dockerfile")
    if lower.startswith("requirements") and lower.endswith((".txt", ".in")):
        return ("config", "requirements")
    if lower.endswith(".d.ts"):
        return ("code", "typescript")
    parts = lower.split(".")
    if len(parts) > 1:
        # rotated logs: app.log.1, app.log.2024-01-02, app.log.gz (binary check is elsewhere)
        if "log" in parts[1:]:
            return ("log", None)
        ext = parts[-1]
        hit = _EXT.get(ext)
        if hit:
            return hit
        if ext in ("bak", "orig", "old", "tmp", "swp", "in", "example", "sample", "dist", "template", "tpl"):
            if len(parts) > 2:  # settings.toml.example, config.yaml.dist
                hit = _EXT.get(parts[-2])
                if hit:
                    return hit
    stem = parts[0] if parts[0] else lower
    if stem in _TEXT_NAMES:
        return ("text", None) if len(parts) == 1 or parts[-1] in ("txt", "text") else None
    return None


def _sniff(text: str) -> tuple[str, str | None]:
    head = text[:8192]
    stripped = head.lstrip("\ufeff \t\r\n")
    if not stripped:
        return ("text", None)
    m = _SHEBANG.match(stripped)
    if m:
        prog = m.group(1).lower()
        for prefix, lang in _SHEBANG_LANG:
            if prog.startswith(prefix):
                return ("code", lang)
        return ("code", "bash")
    if _DIFF_RE.search(head):
        # a diff must start with its header (or commit message lines before it, as in `git format-patch`)
        first = _DIFF_RE.search(head)
        assert first is not None
        if first.start() < 2048 or head.startswith("From "):
            return ("diff", "diff")
    first_char = stripped[0]
    if first_char in "{[":
        lines = [ln for ln in stripped.splitlines()[:20] if ln.strip()]
        if len(lines) > 1 and all(ln.lstrip().startswith("{") and ln.rstrip().endswith("}") for ln in lines[:-1]):
            return ("json", "jsonl")
        tail = text.rstrip()[-1:]
        if (first_char == "{" and tail == "}") or (first_char == "[" and tail == "]"):
            if first_char == "{" or re.match(r"\[\s*[\[{\"\d\-tfn\]]", stripped):
                return ("json", "json")
    lines = [ln for ln in head.splitlines()[:40] if ln.strip()]
    if lines:
        n_log = sum(1 for ln in lines if LOG_LINE_RE.match(ln))
        if n_log >= max(2, (len(lines) * 2) // 5):
            return ("log", None)
    if _PY_RE.search(head) and not _C_LIKE_RE.search(head):
        return ("code", "python")
    if len(_C_LIKE_RE.findall(head)) >= 2:
        if "#include" in head:
            return ("code", "cpp" if re.search(r"\b(?:class|namespace|template|std::)\b", head) else "c")
        if re.search(r"^\s*func\s+\w+\(|^package\s+\w+\s*$", head, re.M):
            return ("code", "go")
        if re.search(r"^\s*(?:pub\s+)?fn\s+\w+|^use\s+[\w:]+;", head, re.M):
            return ("code", "rust")
        if re.search(r"^\s*(?:public|private|protected)\s", head, re.M):
            return ("code", "java")
        return ("code", "javascript")
    if len(_MD_RE.findall(head)) >= 2 or re.match(r"#{1,6} \S", stripped):
        return ("markdown", "markdown")
    n_sections = len(_INI_SECTION_RE.findall(head))
    n_kv = len(_KV_RE.findall(head))
    if lines and (n_sections >= 1 and n_kv >= 1 or n_kv >= max(2, len(lines) * 3 // 5)):
        return ("config", "toml" if re.search(r"=\s*[\"\[{]|=\s*(?:true|false)\s*$", head, re.M) else "ini")
    if lines and len(_YAML_KV_RE.findall(head)) >= max(2, len(lines) // 3) and "  " in head:
        return ("config", "yaml")
    if stripped.startswith("<?xml"):
        return ("config", "xml")
    return ("text", None)


def detect_type(path: str | None, text: str) -> tuple[str, str | None]:
    """(content_type, language) of a file, from its name first and its text second.

    ``path`` may be None (text from the API); then only the text decides.
    Never raises.
    """
    try:
        if path:
            hit = _by_name(path)
            if hit is not None:
                return hit
        return _sniff(text or "")
    except Exception:  # detection must never break an ingest
        return ("text", None)


_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
_CONTROL = bytes(b for b in range(32) if b not in (9, 10, 12, 13, 27, 8, 11))
_CONTROL_TABLE = bytes.maketrans(b"", b"")


def _bom_encoding(data: bytes) -> str | None:
    for bom, enc in _BOMS:
        if data.startswith(bom):
            return enc
    return None


def is_binary(data: bytes) -> bool:
    """True when the first 8 KB look like binary data rather than text.

    Binary: a NUL byte (unless the data starts with a UTF-16/32 byte-order mark),
    more than 10 % control characters, or more than 30 % of the sample not
    decodable as UTF-8.
    """
    sample = bytes(data[:8192])
    if not sample:
        return False
    enc = _bom_encoding(sample)
    if enc is not None and enc != "utf-8-sig":
        return False  # UTF-16/32 text: NUL bytes are expected
    if b"\x00" in sample:
        return True
    n = len(sample)
    controls = n - len(sample.translate(_CONTROL_TABLE, _CONTROL))
    if controls * 10 > n:
        return True
    try:
        sample.decode("utf-8")
        return False
    except UnicodeDecodeError as exc:
        if exc.start >= n - 3 and exc.reason == "unexpected end of data":
            return False  # a multi-byte character cut by the 8 KB window
    decoded = sample.decode("utf-8", errors="replace")
    bad = decoded.count("\ufffd")
    return bad * 10 > n * 3


def decode_text(data: bytes) -> str:
    """Bytes → str: honour a BOM (UTF-8/16/32), else UTF-8 with replacement.

    Never raises; undecodable bytes become U+FFFD.
    """
    enc = _bom_encoding(data)
    if enc is not None:
        return data.decode(enc, errors="replace")
    return data.decode("utf-8", errors="replace")
