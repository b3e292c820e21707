"""Traceback frames in a pasted text: (file name, function) for each, in the order printed.

Why: a frame names the file a function lives in, the strongest pointer a pasted issue holds. A
name such as `handle` or `__init__` is defined in hundreds of places, and its frame's file picks
the one that broke. Users paste the traceback of whatever they run, so each common way of
printing one is read: CPython, pytest and IPython; V8 (Node, Deno, Chrome), the JVM
(Java, Kotlin, Scala), .NET, Go panics, Rust backtraces, Ruby, PHP, and gdb or the sanitizers
(C, C++).

Compilers, linters and links name a place without a function: `src/app.ts(42,5)`, `main.go:42:5`,
`--> src/lib.rs:42:5`, `x.py:42: error`, `…/blob/main/x.py#L42`. `locations` reads those as
(file name, line), so the symbol holding that line can be pointed at.

Each form is a pattern with a literal marker that any text holding it must contain, so a text
without that marker never runs the pattern (most questions hold no traceback at all). A path
is a run without spaces, as tools print them (a Windows drive letter allowed); a method's
class, namespace or package is dropped and its own name kept, because names are looked up by
their last part.
"""

from __future__ import annotations

import re

__all__ = ["frames", "locations"]

_PATH = r"(?:/?[A-Za-z]:)?[^\s:\"'`<>,()]{1,400}"

# (a marker every match contains, the pattern with groups `file` and `func`)
_FORMS: tuple[tuple[str, re.Pattern[str]], ...] = tuple((marker, re.compile(pattern, re.M)) for marker, pattern in (
    # CPython: File "/x/y.py", line 3, in func
    ('File "', r'File "(?P<file>[^"\n]{1,400})", line \d+, in (?P<func>[A-Za-z_<][\w<>]*)'),
    # pytest: x/y.py:3: in func
    (": in ", r"^[ \t]*(?P<file>" + _PATH + r"\.py):\d+: in (?P<func>[A-Za-z_<][\w<>]*)"),
    # IPython before 8: ~/x/y.py in func(a, b); IPython 8: File ~/x/y.py:3, in Cls.func(a, b)
    (".py", r"^[ \t]*(?:File )?(?P<file>" + _PATH + r"\.py)(?::\d+,)? in (?:[A-Za-z_]\w*\.)*"
            r"(?P<func>[A-Za-z_<][\w<>]*)(?=\(|[ \t]*$)"),
    # V8: at Cls.func [as alias] (/x/y.js:3:7), at async func (file:///x/y.mjs:3:7)
    ("at ", r"^[ \t]*at (?:async )?(?:new )?(?:[\w$.<>]*\.)?(?P<func>[\w$]+)(?: \[as [\w$]+\])? \((?:file://)?"
            r"(?P<file>" + _PATH + r"\.(?:[cm]?[jt]sx?|vue|svelte)):\d+:\d+\)"),
    # the JVM: at com.acme.Cls.func(Cls.java:3), at java.base/java.lang.Thread.run(Thread.java:829)
    ("at ", r"^[ \t]*at (?:[\w$/.]+\.)?(?P<func>[\w$<>]+)\((?P<file>[\w$-]+\.(?:java|kt|kts|scala|groovy)):\d+\)"),
    # .NET: at Acme.Cls.Func(String s) in C:\x\Cls.cs:line 3
    (":line ", r"^[ \t]*at (?:[\w.`<>\[\],+]+\.)?(?P<func>\w+)(?:\[[^\]\n]*\])?\([^)\n]*\) in "
               r"(?P<file>[^\n]{1,400}?\.cs):line \d+"),
    # Go: github.com/acme/pkg.(*Server).Handle(0xc0000, ...)  then, indented, /x/server.go:42 +0x1d
    (".go:", r"^(?:[\w./-]+\.)?(?:\(\*?\w+(?:\[[^\]\n]*\])?\)\.)?(?P<func>\w+)(?:\.func\d+(?:\.\d+)*)?\([^\n]*\)[ \t]*\n"
             r"[ \t]+(?P<file>" + _PATH + r"\.go):\d+"),
    # Rust: 3: acme::server::handle  then  at ./src/server.rs:42:5
    (".rs:", r"^[ \t]*\d+: (?:\S*::)?(?!h[0-9a-f]{16}\b)(?P<func>\w+)(?:::h[0-9a-f]{16})?[ \t]*\n"
             r"[ \t]+at (?P<file>" + _PATH + r"\.rs):\d+"),
    # Ruby: /x/user.rb:3:in `save', :in 'User#save', :in `block (2 levels) in save'
    (":in ", r"(?<!\S)(?P<file>" + _PATH + r"\.(?:rb|rake)):\d+:in [`'](?:block (?:\(\d+ levels\) )?in )?(?:[\w:]+[#.])?"
             r"(?P<func>[\w?!=]+)'"),
    # PHP: #0 /x/src/Cls.php(3): App\Cls->func()
    (".php(", r"^[ \t]*#\d+ (?P<file>" + _PATH + r"\.php)\(\d+\): (?:[\w\\]+(?:->|::))?(?P<func>\w+)\("),
    # gdb: #1  0x4005 in ns::Cls::func (a=1) at src/x.cc:3; sanitizers: #0 0x4c in func /x/y.c:3:5
    ("#", r"^[ \t]*#\d+ +(?:0x[0-9a-fA-F]+ in )?(?:[\w~]+::)*(?P<func>~?\w+) ?\([^\n]*\) at "
          r"(?P<file>" + _PATH + r"\.\w{1,5}):\d+"),
    ("#", r"^[ \t]*#\d+ +0x[0-9a-fA-F]+ in (?:[\w~]+::)*(?P<func>~?\w+) (?P<file>" + _PATH + r"\.\w{1,5}):\d+"),
))


def frames(text: str) -> list[tuple[str, str]]:
    """(file name without its folders, function) for each frame of each traceback in `text`, in text order."""
    found: list[tuple[int, str, str]] = []
    for marker, pattern in _FORMS:
        if marker in text:
            found.extend((m.start(), m["file"], m["func"]) for m in pattern.finditer(text))
    found.sort()
    return [(path.replace("\\", "/").rsplit("/", 1)[-1], func) for _, path, func in found]


# a file name with an extension, then :line[:column], (line,column): as tsc and MSBuild print it (a call such as
# `np.zeros(3,4)` has no colon after it), or #Lline; not inside a longer word
_LOCATION = re.compile(r"(?<![\w/.\\-])(?P<file>" + _PATH + r"\.[A-Za-z][A-Za-z0-9]{0,5})"
                       r"(?::(?P<a>\d{1,7})(?![\d.])|\((?P<b>\d{1,7}),\d{1,7}\):|#L(?P<c>\d{1,7})\b)")


def locations(text: str) -> list[tuple[str, int]]:
    """(file name without its folders, line) for each place `text` names as file and line, in text order."""
    return [(m["file"].replace("\\", "/").rsplit("/", 1)[-1], int(m["a"] or m["b"] or m["c"]))
            for m in _LOCATION.finditer(text)]
