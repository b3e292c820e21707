"""Symbols of the languages tree-sitter parses: every function, method, class and constant, named as the
language's readers name it.

Why apart from symbols.py: Python is scanned as text for speed; these languages are read from their parse
tree, one walk for all of them, with what each grammar names differently kept here.

- What a node defines is read from the whole words of its type (`_node_kind`), and names follow each
  language: a Go method is its receiver's (`Server.Start`), a Rust impl's methods its type's (`Cart.add`).
- Constants are `const` and `static` declarations and capitalised top-level `const`s (`_bound`).
- A JS/TS function bound to a name (`const fetchUser = async (id) => ...`, `format: (x) => ...` in an object)
  is a function, as is one a module assigns to a property (`exports.handler = ...`, `Cart.prototype.add =
  ...`; `_assigned`); a class or object a module exports that way has its methods found.
- Calls that define something (call_definitions.py): tests named by their titles (`it('adds the tax', ...)`,
  RSpec's `it 'adds the tax' do`), web routes' handlers by their method and path (`GET /users/:id`) and groups
  of routes by their path. The functions and blocks handed to other calls are walked too (an IIFE, a Rails
  concern's `included do`, Ktor's `routing { }`).
- Vue, Svelte and HTML files are read for their <script> blocks (`embedded_scripts`).
- C reads the declarations of its parse tree (functions, prototypes, function-like macros, structs, unions,
  enums, typedefs of them) and never walks a function's body: four nodes in five of a C file are inside
  bodies, where C defines nothing worth pointing at.

Other languages walk the whole tree. Unknown languages yield nothing.
"""

from __future__ import annotations

import re
from typing import Any

from helix_context.ingest.call_definitions import (
    GROUP_BINDINGS,
    JS_FUNCTIONS,
    call_definitions,
    call_statements,
    group_binding,
)
from helix_context.ingest.treesitter import (BESIDE_BEFORE, MAX_BYTES, doc_gap, minified, node_name, node_text,
                                            parse_within_budget, parser_for, unparenthesized)
from helix_context.models import Symbol

__all__ = ["MAX_SYMBOLS", "SCRIPT_HOSTS", "UPPER", "embedded_scripts", "treesitter_symbols"]

MAX_SYMBOLS = 5000  # per file: generated code can define tens of thousands of tiny functions
UPPER = re.compile(r"_*[A-Z][A-Z0-9_]*")  # a constant's name: capitals, digits and underscores

_SKIP = re.compile(r"lambda|arrow|closure|call|expression|argument|comment|string|parameter|type_")
# what a tree-sitter node defines, read from the words of its type: a definition's type ends in one of
# _DEFINES (`class_declaration`, `function_item`, `method_signature`, Go's `method_elem`) or is the word itself
# (Ruby's `class` and `method`); its other words say class or function. Whole words, not substrings: `simple_
# identifier` is no `impl`, `constructor` no `struct`, `enum_constant` and `function_body` no definitions
_CLASS_WORDS = frozenset({"class", "struct", "interface", "trait", "impl", "enum", "module", "namespace", "object",
                          "protocol", "record", "union", "mod", "contract"})
_FUNCTION_WORDS = frozenset({"function", "method", "constructor", "destructor", "operator", "getter", "setter",
                             "init", "deinit", "subroutine"})
_DEFINES = frozenset({"declaration", "definition", "item", "signature", "specifier", "elem", "implementation"})
_STATEMENTS_DEFINING = frozenset({"subroutine_declaration_statement"})  # Perl's `sub add {...}`
_NODE_KINDS: dict[str, str | None] = {}


def _node_kind(node_type: str) -> str | None:
    """"class", "function" or None for a node type (remembered: a grammar has a few hundred)."""
    kind = _NODE_KINDS.get(node_type, "?")
    if kind == "?":
        words = node_type.split("_")
        kind = None
        if (words[-1] in _DEFINES or words[-1] in _CLASS_WORDS or words[-1] in _FUNCTION_WORDS
                or node_type in _STATEMENTS_DEFINING):
            if any(w in _FUNCTION_WORDS for w in words):
                kind = "function"
            elif any(w in _CLASS_WORDS for w in words):
                kind = "class"
        _NODE_KINDS[node_type] = kind
    return kind


def _defined_name(node: Any, src: bytes) -> str | None:
    """The name a definition node gives: its `name` (or declarator's), else its first identifier (Kotlin's
    declarations name no field); a Rust `impl` block the type it implements, so its methods are `Cart.add`."""
    if node.type == "impl_item":
        target = node.child_by_field_name("type")
        return (node_text(target, src).split("<", 1)[0].strip() or None) if target is not None else None
    name = node_name(node, src)
    if name is None and node.child_by_field_name("name") is None:
        name = next((node_text(c, src) for c in node.named_children if c.type in _NAME_CHILDREN), None)
        head = node.named_children[0] if name is None and node.named_child_count else None
        if head is not None and head.type in ("signature", "type_head"):
            for _ in range(3):  # Julia: `function add(x)` names it in its signature's call, `struct Cart` in its head
                if head is None or head.type in _NAME_CHILDREN:
                    break
                head = head.named_children[0] if head.named_child_count else None
            if head is not None and head.type in _NAME_CHILDREN:
                name = node_text(head, src)
    if name is None and node.child_count and not node.children[0].is_named \
            and node.type.startswith(node.children[0].type + "_"):
        name = node.children[0].type  # named by its keyword alone: Swift's `deinit { ... }`
    return None if name == "function" else name  # R's `function(x) ...` names its keyword


_NAME_CHILDREN = frozenset({"identifier", "simple_identifier", "type_identifier", "constant"})
# containers whose functions are functions, not methods (Rust's `mod`, C++'s and C#'s namespaces, TS's)
_NAMESPACES = frozenset({"mod_item", "namespace_definition", "namespace_declaration",
                         "file_scoped_namespace_declaration", "internal_module", "module_definition"})


def _receiver(node: Any, src: bytes) -> str | None:
    """A Go method's receiver type: `func (s *Stack[T]) Push()` → `Stack`."""
    receiver = node.child_by_field_name("receiver")
    if receiver is None:
        return None
    last = node_text(receiver, src).strip("() \t").split()[-1:] or [""]
    return last[0].lstrip("*").split("[", 1)[0] or None


# declarations that bind a constant whatever its name's case
_CONSTANT_ITEMS = frozenset({"const_spec", "const_item", "static_item"})  # Go; Rust
_DECLARATION_STATEMENTS = frozenset({"lexical_declaration", "variable_declaration", "field_declaration"})
_TOP = frozenset({"program", "source_file", "module", "export_statement", "class_body", "body_statement",
                  "declaration_list"})


def _at_top(statement: Any) -> bool:
    """Whether a statement is one of a module's or a class's own (not inside a function's body)."""
    parent = statement.parent
    if parent is None or parent.type not in _TOP:
        return False
    if parent.type in ("body_statement", "declaration_list"):  # Ruby's and Rust's bodies: a class's or a module's
        return parent.parent is not None and parent.parent.type in ("class", "module", "impl_item", "trait_item",
                                                                    "mod_item")
    return True


_BINDINGS = _CONSTANT_ITEMS | {"assignment", "variable_declarator", "public_field_definition", "field_definition",
                                "pair"}


def _binding_name(node: Any) -> Any | None:
    """The identifier a declarator, field or object key binds (`format: function (x) {...}`), else None."""
    name = node.child_by_field_name("name") or node.child_by_field_name("property") or node.child_by_field_name("key")
    return name if name is not None and name.type in ("identifier", "property_identifier") else None


def _bound(node: Any, kind: str, src: bytes, in_class: bool) -> tuple[str, str, Any] | None:
    """(kind, name, the node whose lines are its span) for a name a declaration binds to a function or a
    constant; None for anything else. Constants: Go's `const`, Rust's `const`/`static`, and, at the top of a
    module or class, a capitalised `const` (JS/TS), `static final` field (Java), `static` field (JS/TS) or
    constant assignment (Ruby). `kind`: the node's type, one of _BINDINGS."""
    if kind in _CONSTANT_ITEMS:  # a Go spec's statement is its `const (...)` block; a function's own are left out
        name = node.child_by_field_name("name")
        statement = node.parent if kind == "const_spec" else node
        if name is not None and statement is not None and _at_top(statement):
            return "constant", node_text(name, src), node
        return None
    if kind == "assignment":  # Ruby: `LIMIT = 3` in a module or class body
        left = node.child_by_field_name("left")
        if left is not None and left.type == "constant" and _at_top(node):
            return "constant", node_text(left, src), node
        return None
    name = _binding_name(node)
    if name is None:
        return None
    text = node_text(name, src)
    statement = node.parent if node.parent is not None and node.parent.type in _DECLARATION_STATEMENTS else node
    if statement.parent is not None and statement.parent.type == "export_statement":
        statement = statement.parent
    if _bound_function(node, src) is not None:
        return ("method" if in_class else "function"), text, statement
    words = node_text(statement, src)[:120].split("=", 1)[0].split()  # `export const`, `public static final int`
    fixed = "const" in words or ("static" in words and (statement.type != "field_declaration" or "final" in words))
    if fixed and UPPER.fullmatch(text) and _at_top(statement):
        return "constant", text, statement
    return None


def _bound_function(node: Any, src: bytes) -> Any | None:
    """The function literal a binding holds (`var runInContext = (function runInContext(context) {...})`), or the
    one a call it holds wraps (`const getUser = asyncHandler(async (req, res) => {...})`); None for anything else."""
    value = node.child_by_field_name("value")
    if value is None:
        return None
    value = unparenthesized(value)
    return value if value.type in JS_FUNCTIONS else _wrapped_function(value, src)


# the language's own calls that take a function and return something else: a value (`Array.from(list, fn)`) or a handle
_JS_BUILTINS = frozenset({"Array", "Object", "Promise", "Reflect", "JSON", "Math", "Number", "String", "Map", "Set"})
_JS_TIMERS = frozenset({"setTimeout", "setInterval", "setImmediate", "requestAnimationFrame", "requestIdleCallback",
                        "queueMicrotask"})


def _wrapped_function(value: Any, src: bytes, depth: int = 0) -> Any | None:
    """The function literal a call wraps where the call's result is that function, wrapped: `asyncHandler(async (req,
    res) => {...})`, `React.forwardRef((props, ref) => ...)`, `memo(forwardRef(...))`, lodash's `createAggregator(
    function (result, value, key) {...})`; None for anything else.

    Told from a value computed with a callback (`items.reduce((a, b) => a + b, 0)`, `list.map(...)`) by the callee:
    a plain name, or a member of a capitalised name (`React.memo`), never a method called on a value, nor the
    language's own (`Array.from(list, fn)`, `setTimeout(fn, 100)`, whose results are a value and a handle).
    """
    if value.type != "call_expression" or depth > 2:
        return None
    callee, args = value.child_by_field_name("function"), value.child_by_field_name("arguments")
    if callee is None or args is None or args.type != "arguments":
        return None
    if callee.type == "member_expression":
        owner = callee.child_by_field_name("object")
        if owner is None or owner.type != "identifier" or not node_text(owner, src)[:1].isupper() \
                or node_text(owner, src) in _JS_BUILTINS:
            return None
    elif callee.type != "identifier" or node_text(callee, src) in _JS_TIMERS:
        return None
    for arg in args.named_children:
        arg = unparenthesized(arg)
        if arg.type in JS_FUNCTIONS:
            return arg
        inner = _wrapped_function(arg, src, depth + 1)
        if inner is not None:
            return inner
    return None


_JS_FAMILY = frozenset({"javascript", "typescript", "tsx"})
_MEMBER_CHAIN = re.compile(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+")
_EXPORTS = ("module", "exports")


def _assigned(statement: Any, src: bytes) -> tuple[str, str, Any] | None:
    """(kind, name, value) for a module's top-level `a.b = <function, class or object>` (JS/TS); None otherwise.

    `exports.handler = ...` and `module.exports.parse = ...` define `handler` and `parse`;
    `Cart.prototype.add = ...` is the method `Cart.add`, and `Cart.create = ...` the method `Cart.create`;
    `module.exports = function parse() {}` (or `class Cart ...`) defines it by its own name. A class's
    methods, and an exported object's (`module.exports = { parse(text) {...} }`), are the caller's to
    visit: name "" is no symbol of its own (an anonymous value, an object). Only names written out
    (`a[key] = ...` and `this.x = ...` name nothing that a reader could ask for). A chain of assignments
    (`res.set = res.header = function header() {}`) is named by its first target, the one documented first."""
    if statement.parent is None or statement.parent.type != "program" or statement.named_child_count != 1:
        return None
    assignment = statement.named_children[0]
    if assignment.type != "assignment_expression":
        return None
    left, value = assignment.child_by_field_name("left"), assignment.child_by_field_name("right")
    for _ in range(8):  # `res.set = res.header = function header(...)`: named by the first, valued by the last
        if value is None or value.type != "assignment_expression":
            break
        value = value.child_by_field_name("right")
    if left is None or value is None or left.type != "member_expression":
        return None
    kind = "function" if value.type in JS_FUNCTIONS else value.type
    if kind not in ("function", "class", "object"):
        return None
    chain = node_text(left, src)
    if not _MEMBER_CHAIN.fullmatch(chain):
        return None
    parts = chain.split(".")
    while parts and parts[0] in _EXPORTS:
        parts.pop(0)
    if parts and parts[0] == "this":
        return None
    if kind == "object":
        return (kind, "", value) if not parts else None  # an exported object: its methods; any other, data
    if not parts:  # `module.exports = function parse() {}`
        own = value.child_by_field_name("name")
        return kind, (node_text(own, src) if own is not None else ""), value
    if kind == "function" and len(parts) > 1:
        kind = "method"
    return kind, ".".join(p for p in parts if p != "prototype"), value


def _held_object(node: Any, src: bytes) -> tuple[str, Any] | None:
    """(name, object) where a declarator, field or key binds a name to an object literal (JS/TS): its methods
    and the functions its keys hold are that name's (`const api = { get() {...} }` defines `api.get`)."""
    value = node.child_by_field_name("value")
    name = _binding_name(node) if value is not None and value.type == "object" else None
    if name is None:
        return None
    text = node_text(name, src)
    return (text, value) if len(text) <= 120 else None


# languages whose code is in <script> blocks: a Vue or Svelte component, an HTML page
SCRIPT_HOSTS = frozenset({"vue", "svelte", "html"})
_SCRIPT = re.compile(r"(<script\b[^>]*>)(.*?)</script\s*>", re.I | re.S)
_TS_SCRIPT = re.compile(r"""\blang\s*=\s*["']?(?:ts|typescript|tsx)\b""", re.I)
_NOT_NEWLINE = re.compile(r"[^\n]")


def embedded_scripts(text: str) -> tuple[str, str]:
    """(the text with everything outside its <script> blocks blanked, the blocks' language).

    Why blanked and not cut out: every line keeps its number, so the symbols of `<script setup lang="ts">`
    in a Vue component point at their lines in the .vue file. TypeScript where any block says so."""
    out = []
    language = "javascript"
    last = 0
    for m in _SCRIPT.finditer(text):
        out.append(_NOT_NEWLINE.sub(" ", text[last:m.start(2)]))
        out.append(m.group(2))
        last = m.end(2)
        if _TS_SCRIPT.search(m.group(1)):
            language = "typescript"
    if not out:
        return "", language
    out.append(_NOT_NEWLINE.sub(" ", text[last:]))
    return "".join(out), language


def _definition_symbol(name: str, kind: str, node: Any, src: bytes) -> Symbol:
    """A symbol spanning a definition's lines, with what the grammar parses beside it rather than in it.

    TypeScript parses a member's decorators (`@Delete(':id')`) as siblings before it in the class body and a class's
    as children of its `export` statement, Rust its attributes (`#[get("/users/{id}")]`) and Dart its annotations
    likewise; Dart gives a function's body as the sibling after its signature. A doc comment right above (JSDoc,
    Javadoc, `///`, Go's `// Total returns ...`) is a sibling in every grammar: it is the definition's words, as a
    Python docstring is, and what a question in words matches (the span's own text is what a pointer is scored by).
    The node alone would leave out the route a reader looks for, the words about it, or every line of a Dart
    function but its first."""
    while node.type.endswith("_signature") and node.parent is not None and node.parent.type.endswith("_signature"):
        node = node.parent  # Dart's method_signature around the function_signature that names the method
    last = node
    if node.type.endswith("_signature") and (after := node.next_named_sibling) is not None \
            and after.type == "function_body":
        last = after
    return Symbol(name, kind, _first_row(node, src) + 1, _end_row(last) + 1)


def _first_row(node: Any, src: bytes) -> int:
    """The first line of a definition with the decorators and the doc comment right above it: no blank line
    between (one for a `/**` block), not a comment ending a line of code, at most MAX_DOC_LINES of them."""
    first = node
    start = node.start_point[0]
    while True:
        before = first.prev_named_sibling
        if before is None:
            parent = first.parent
            if parent is None or parent.type not in _WRAPPERS or parent.named_children[0] != first \
                    or parent.start_point[0] != first.start_point[0]:  # Go's `const (` holds several
                return first.start_point[0]
            first = parent  # `export function f`, `const f = ...`: the comment is the statement's sibling
        elif before.type in BESIDE_BEFORE:
            first = before
        elif ("comment" in before.type
              and _end_row(before) >= first.start_point[0] - 1 - (0 if "comment" in first.type else doc_gap(before, src))
              and start - before.start_point[0] <= MAX_DOC_LINES and not _ends_code(before)):
            first = before
        else:
            return first.start_point[0]


def _ends_code(comment: Any) -> bool:
    """Whether `comment` stands after code on its first line (`x = 1; // note`): it is about that line."""
    before = comment.prev_sibling
    return before is not None and "comment" not in before.type and _end_row(before) == comment.start_point[0]


MAX_DOC_LINES = 60  # a definition's own comment block; a longer one above it is a file's header, not its doc
# statements whose first part is the definition: a comment above them is the definition's
_WRAPPERS = frozenset({"export_statement", "lexical_declaration", "variable_declaration", "variable_declarator",
                       "expression_statement", "assignment_expression", "ambient_declaration", "type_declaration",
                       "const_declaration", "var_declaration"})


def treesitter_symbols(text: str, language: str) -> list[Symbol]:
    parser = parser_for(language)
    if parser is None:
        return []
    src = text.encode("utf-8", "surrogatepass")
    if len(src) > MAX_BYTES or minified(src, text.count("\n") + 1):
        return []
    tree = parse_within_budget(parser, src)
    if tree is None:
        return []
    if language == "c":
        return c_symbols(tree.root_node, src)
    out: list[Symbol] = []
    js = language in _JS_FAMILY
    routes = [""]  # the paths of the groups of routes the walk is in (call_definitions.py)
    groups: dict[str, str] = {}  # names bound to a group of routes, and its path
    calls = call_statements(language)

    def visit(node: Any, prefix: str, in_class: bool, depth: int) -> None:
        for child in node.named_children:
            if len(out) >= MAX_SYMBOLS or depth > 40:
                return
            kind_name = child.type
            bound = _bound(child, kind_name, src, in_class) if kind_name in _BINDINGS else None
            held = (_held_object(child, src) if js and kind_name in _BINDINGS
                    and (bound is None or bound[0] == "constant") else None)
            if bound is not None:
                bound_kind, bound_name, span = bound
                if bound_name and len(bound_name) <= 120:
                    out.append(_definition_symbol(prefix + bound_name, bound_kind, span, src))
                if bound_kind == "constant":  # an object literal's methods are still symbols of their own
                    if held is not None:
                        visit(held[1], f"{prefix}{held[0]}.", True, depth + 1)
                    else:
                        visit(child, prefix, in_class, depth + 1)
                elif bound_name and (function := _bound_function(child, src)) is not None \
                        and (body := function.child_by_field_name("body")) is not None:  # what it defines inside,
                    visit(body, f"{prefix}{bound_name}.", False, depth + 1)  # as a declared function's (lodash's 300)
                continue
            if held is not None:  # `const api = { get() {...} }`: the methods `api.get`
                visit(held[1], f"{prefix}{held[0]}.", True, depth + 1)
                continue
            if kind_name in GROUP_BINDINGS and (bound_group := group_binding(child, src, groups)) is not None:
                groups[bound_group[0]] = bound_group[1]  # Gin's `v1 := r.Group("/v1")`: v1's routes are under /v1
            if kind_name in calls:
                defined, handed = call_definitions(child, src, routes[-1], groups)
                for each in defined:  # a test or a group of tests, a route's handler, a group of routes
                    qual = prefix + each.name if each.nested else each.name
                    method = each.kind == "function" and in_class and each.nested
                    out.append(_definition_symbol(qual, "method" if method else each.kind, each.span, src))
                    routes.append(each.route if each.route is not None else routes[-1])
                    visit(each.body, qual + ".", each.kind == "class" and each.route is None, depth + 1)
                    routes.pop()
                for body in handed:  # `app.listen(port, () => {...})`, an IIFE: what their bodies define
                    visit(body, prefix, in_class, depth + 1)
                if defined or handed:
                    continue
            if js and kind_name == "expression_statement":
                assigned = _assigned(child, src)
                if assigned is not None:
                    assigned_kind, assigned_name, value = assigned
                    if assigned_name and len(assigned_name) <= 120:
                        out.append(_definition_symbol(assigned_name, assigned_kind, child, src))
                    if assigned_kind not in ("function", "method"):  # a class's or object's methods
                        visit(value, assigned_name + "." if assigned_name else "", assigned_kind == "class", depth + 1)
                    continue
                if child.named_child_count == 1 and child.named_children[0].type == "internal_module":
                    visit(child, prefix, in_class, depth + 1)  # TS: `namespace NS {...}` parses so
                    continue
            if kind_name == "binary_operator" and child.named_child_count == 2 \
                    and child.named_children[0].type == "identifier" \
                    and child.named_children[1].type == "function_definition":  # R: `add <- function(x) ...`
                target = node_text(child.named_children[0], src)
                out.append(_definition_symbol(prefix + target, "method" if in_class else "function", child, src))
                visit(child.named_children[1], f"{prefix}{target}.", False, depth + 1)
                continue
            if kind_name == "type_spec":  # Go: `type Server struct {...}`, `type Shape interface {...}`
                shape = child.child_by_field_name("type")
                kind = "class" if shape is not None and shape.type in ("struct_type", "interface_type") else None
            elif _SKIP.search(kind_name) and not kind_name.endswith(("_definition", "_declaration", "_item")):
                continue
            else:
                kind = _node_kind(kind_name)
                if kind == "class" and ((js and kind_name == "object")  # a JS object literal is no class
                                        or (kind_name.endswith(("specifier", "mod_item"))
                                            and child.child_by_field_name("body") is None)):
                    kind = None  # nor C++'s `struct point p;` nor Rust's `mod util;` (uses of what is defined elsewhere)
                elif kind == "function":
                    kind = "method" if in_class else "function"
            name = _defined_name(child, src) if kind else None
            if kind and name and kind_name == "method_declaration" and (owner := _receiver(child, src)):
                name, kind = f"{owner}.{name}", "method"  # Go: `func (s *Server) Start()` is `Server.Start`
            if kind and name and len(name) <= 120:
                qual = prefix + name.strip().strip("\"'`")  # TS: `declare module "x"`
                out.append(_definition_symbol(qual, kind, child, src))
                visit(child, qual + ".", kind == "class" and kind_name not in _NAMESPACES, depth + 1)
            else:
                visit(child, prefix, in_class, depth + 1)

    visit(tree.root_node, "", False, 0)
    return out


# nodes whose children are top-level declarations still (conditional compilation, extern "C", error recovery)
_C_SCOPES = frozenset({"preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif", "preproc_elifdef",
                       "linkage_specification", "declaration_list", "ERROR"})
_C_RECORDS = frozenset({"struct_specifier", "union_specifier", "enum_specifier"})
_C_WRAPPERS = frozenset({"pointer_declarator", "array_declarator", "attributed_declarator", "init_declarator",
                         "parenthesized_declarator"})


def _c_declared_name(node: Any | None, src: bytes) -> str | None:
    """The identifier a declarator declares: `*foo(int)`, `foo[4]`, `(foo)` → foo."""
    for _ in range(8):
        if node is None:
            return None
        if node.type in ("identifier", "field_identifier", "type_identifier"):
            return node_text(node, src)
        if node.type == "function_declarator" or node.type in _C_WRAPPERS:
            inner = node.child_by_field_name("declarator")
            node = inner if inner is not None else next(iter(node.named_children), None)
        else:
            return None
    return None


def _c_prototype(node: Any) -> Any | None:
    """The function declarator of a prototype (`int *f(void)`), not of a function pointer (`int (*f)(void)`)."""
    while node is not None and node.type == "pointer_declarator":
        node = node.child_by_field_name("declarator")
    if node is None or node.type != "function_declarator":
        return None
    inner = node.child_by_field_name("declarator")
    return node if inner is not None and inner.type == "identifier" else None


def c_symbols(root: Any, src: bytes) -> list[Symbol]:
    """Functions (definitions, prototypes, function-like macros) and records (struct, union, enum) of C."""
    out: list[Symbol] = []

    def add(name: str | None, kind: str, node: Any) -> None:
        if name and len(name) <= 120 and len(out) < MAX_SYMBOLS:
            out.append(_definition_symbol(name, kind, node, src))

    def record(spec: Any, prefix: str, alias: str | None, span: Any) -> None:
        body = spec.child_by_field_name("body")
        if body is None:  # `struct foo *p`: a use, not a definition
            return
        name_node = spec.child_by_field_name("name")
        name = node_text(name_node, src) if name_node is not None else alias
        if name:
            add(prefix + name, "class", span)
            prefix = prefix + name + "."
        if spec.type != "enum_specifier":
            members(body, prefix, 0)

    def members(body: Any, prefix: str, depth: int) -> None:
        for field in body.named_children:
            if field.type == "field_declaration":
                spec = field.child_by_field_name("type")
                if spec is not None and spec.type in _C_RECORDS and depth < 20:
                    record(spec, prefix, None, spec)
            elif field.type in _C_SCOPES and depth < 20:
                members(field, prefix, depth + 1)

    def scope(node: Any, depth: int) -> None:
        for child in node.named_children:
            kind = child.type
            if kind == "function_definition":
                add(_c_declared_name(child.child_by_field_name("declarator"), src), "function", child)
            elif kind in _C_SCOPES:
                if depth < 40:
                    scope(child, depth + 1)
            elif kind == "preproc_function_def":
                name_node = child.child_by_field_name("name")
                add(node_text(name_node, src) if name_node is not None else None, "function", child)
            elif kind in _C_RECORDS:
                record(child, "", None, child)
            elif kind in ("type_definition", "declaration"):
                spec = child.child_by_field_name("type")
                if spec is not None and spec.type in _C_RECORDS:
                    alias = None
                    if kind == "type_definition":
                        alias = _c_declared_name(child.child_by_field_name("declarator"), src)
                    record(spec, "", alias, child)
                if kind == "declaration":
                    for decl in child.children_by_field_name("declarator"):
                        proto = _c_prototype(decl)
                        if proto is not None:
                            add(_c_declared_name(proto, src), "function", child)

    scope(root, 0)
    return out


def _end_row(node: Any) -> int:
    row, col = node.end_point
    return row if col > 0 or row == node.start_point[0] else row - 1
