"""Calls that define something: a test framework's blocks and a web framework's routes, named as readers name them.

Why: much of what a reader looks for in a web app or a test file is no declaration but a call
handed a function, and without a name it is a nameless stretch of its file:

- tests: `describe('Cart', () => { it('adds the tax', () => {...}) })` (Jest, Vitest, Mocha, Jasmine),
  RSpec's `describe Cart do ... it 'adds the tax' do ... end end`, Kotest's `describe("Cart") { it(...) {} }`
  and Go's subtests `t.Run("adds the tax", func(t *testing.T) {...})`. A group is a class, each test a method
  of it, named by its title: `Cart.adds the tax` (a Go subtest within its test: `TestCart.adds the tax`).
  "Which test checks the tax" then points at that test's lines.
- routes: `app.get('/users/:id', (req, res) => {...})` (Express, Koa, Fastify, Hono; also the chained
  `router.route('/books').get(...).post(...)`), Gin's, Echo's and chi's `r.GET("/users/:id", func(c) {...})`,
  net/http's `http.HandleFunc("/health", func(w, r) {...})`, Sinatra's `get '/users/:id' do ... end`, ASP.NET
  Core's `app.MapGet("/users/{id}", (int id) => ...)`, Laravel's `Route::get('/users/{id}', function ($id)
  {...})`, Slim's `$app->get(...)`, Spark's and Javalin's `get("/users/:id", (req, res) -> ...)` and Ktor's
  `get("/users/{id}") {...}`. A handler is a function named by its method and path, `GET /users/:id`, so
  "which handler serves GET /users/:id" or "where is the login endpoint" points at the handler.
- groups of routes: chi's `r.Route("/articles", func(r chi.Router) {...})`, Ktor's `route("/customer") {...}`,
  Sinatra's `namespace '/admin' do`, Laravel's `Route::prefix('admin')->group(function () {...})`. A group is
  a class named by its path, and its routes' paths are joined to it: Ktor's `get("{id?}")` inside
  `route("/customer")` is `GET /customer/{id?}`. So are the routes of a name bound to a group (Gin's and
  Echo's `v1 := r.Group("/v1")`, then `v1.GET("/users/:id", ...)`).

A route is named by its method and path wherever it is registered (inside `func setupRouter()` or a Sinatra
class too): that is how readers and logs name it. A title's or path's dots become spaces, as a dot joins a
qualified name (`Cart.add`). A route whose handler is a function defined elsewhere (`app.get('/x',
users.show)`) names nothing here: that function is a symbol of its own.

Contract: `call_definitions(node, src, route, groups)` takes one node of a parse tree, the path of the group
of routes it is in and the names bound to groups so far, and returns what it defines, each with the node whose
lines it spans and the node whose contents belong to it (so a `describe`'s tests are named within it, and a
handler's nested functions within the route), and, where it defines nothing, the functions and blocks its call
is handed, for the walk to read what they define; ([], []) for any other node, cheaply, as it is asked of
every statement.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from helix_context.ingest.treesitter import node_text, unparenthesized

__all__ = ["GROUP_BINDINGS", "JS_FUNCTIONS", "CallDefinition", "call_definitions", "call_statements",
           "group_binding"]

# the node types that may hold such a call: a statement, or a Ruby call (Ruby has no statement nodes)
_CALL_STATEMENTS = frozenset({"expression_statement", "call"})
# Kotlin has none either: a call is a statement, and a superclass call's lambda may hold a Kotest or Spek spec
# (`class CartSpec : DescribeSpec({...})`)
_KOTLIN_CALL_STATEMENTS = frozenset({"call_expression", "constructor_invocation"})
# a call's node type -> the fields of its callee's object and last name; None: both in its "function" field
_CALL_NODES: dict[str, tuple[str, str] | None] = {
    "call_expression": None,  # JS/TS, Go; Kotlin (no fields: the callee, then a call_suffix)
    "invocation_expression": None,  # C#
    "function_call_expression": None,  # PHP `get(...)`
    "method_invocation": ("object", "name"),  # Java
    "member_call_expression": ("object", "name"),  # PHP `$app->get(...)`
    "scoped_call_expression": ("scope", "name"),  # PHP `Route::get(...)`
    "call": ("receiver", "method"),  # Ruby
}
# a member access as a callee -> the fields of its object and name
_MEMBERS = {"member_expression": ("object", "property"), "selector_expression": ("operand", "field"),
            "member_access_expression": ("expression", "name")}
_NAMES = frozenset({"identifier", "name", "simple_identifier"})

# a test framework's blocks: a group is a class, a test a function
_TEST_BLOCKS = {"describe": "class", "context": "class", "suite": "class", "it": "function", "test": "function",
                "specify": "function", "example": "function"}
_TEST_MODIFIERS = frozenset({"only", "skip", "todo", "concurrent", "failing"})  # `it.only(...)`, `describe.skip`
_TEST_RECEIVERS = frozenset({"RSpec"})  # `RSpec.describe Cart do`
_TEST_RUN = "Run"  # Go's subtests: `t.Run("adds the tax", func(t *testing.T) {...})`, named within their test

# a group of routes handed a function: chi's `r.Route("/articles", func(r chi.Router) {...})`, Ktor's
# `route("/customer") {...}`, Sinatra's `namespace '/api' do`; its routes' paths are joined to its own
_ROUTE_GROUPS = frozenset({"route", "namespace"})
# Laravel's facade: its paths may omit the leading slash, and a group takes its prefix from a call or an array
_LARAVEL, _LARAVEL_GROUP, _LARAVEL_PREFIX = "Route", "group", "prefix"
# statements that may bind a name to a group of routes (Go: `v1 := r.Group("/v1")`; `group_binding`)
GROUP_BINDINGS = frozenset({"short_var_declaration"})
# HTTP clients called with a callback, which name a route they request, not one they serve: jQuery's
# `$.get('/api/users', function (data) {...})`, Node's `http.get('/health', (res) => ...)`, `request.post(...)`
_CLIENTS = frozenset({"$", "jquery", "axios", "http", "https", "request", "superagent", "client", "needle"})
# a route's method as its name says it; "" where the call names no HTTP method (net/http's `HandleFunc`)
_ROUTE_METHODS = {"get": "GET", "post": "POST", "put": "PUT", "patch": "PATCH", "delete": "DELETE",
                  "del": "DELETE", "head": "HEAD", "options": "OPTIONS", "all": "ALL", "any": "ANY", "use": "USE",
                  "handle": "", "handlefunc": "", "map": "",
                  # ASP.NET Core's minimal APIs: `app.MapGet("/users/{id}", (int id) => ...)`
                  "mapget": "GET", "mappost": "POST", "mapput": "PUT", "mappatch": "PATCH", "mapdelete": "DELETE"}

# a JS/TS function value (symbols_tree.py reads the same for a name bound to one)
JS_FUNCTIONS = frozenset({"arrow_function", "function_expression", "function", "generator_function",
                          "generator_function_expression"})
# function values handed to a call: JS/TS; Go's func literal; C#'s and Java's lambdas; PHP's closures
_FUNCTIONS = JS_FUNCTIONS | {"func_literal", "lambda_expression", "anonymous_function",
                             "anonymous_function_creation_expression", "lambda_literal"}
_RUBY_BLOCKS = frozenset({"do_block", "block"})
# string literals a title or a path is written as, and what one without substitutions holds
_STRINGS = frozenset({"string", "template_string", "interpreted_string_literal", "raw_string_literal",
                      "string_literal", "encapsed_string"})
_STRING_PARTS = frozenset({"string_content", "string_fragment", "interpreted_string_literal_content",
                           "string_literal_content", "escape_sequence"})
_RUBY_TITLES = frozenset({"constant", "scope_resolution"})  # RSpec's `describe Cart do`
_MAX_NAME = 100
# the last words of the callees that may define something, lower-cased (Go's `r.GET`, `t.Run`)
_CALLEES = frozenset({*_TEST_BLOCKS, *_TEST_MODIFIERS, _TEST_RUN.lower(), *_ROUTE_METHODS, *_ROUTE_GROUPS,
                      _LARAVEL_GROUP, _LARAVEL_PREFIX})


@dataclass(frozen=True)
class CallDefinition:
    kind: str  # "class" (a group of tests or routes) or "function" (a test, a route's handler)
    name: str
    span: Any  # the node whose lines the symbol spans
    body: Any  # the node whose contents belong to it
    nested: bool = True  # named within its enclosing symbol (a test in its group); a route is its path alone
    route: str | None = None  # a group of routes: the path its routes are joined to


@dataclass(frozen=True)
class _Call:
    node: Any
    words: list[str]  # the callee as written, split at dots: ["app", "get"], ["it", "only"], ["RSpec", "describe"]
    args: list[Any]
    function: Any | None  # the function or block handed to it, the last one where there are several
    receiver: Any | None  # a callee's object (the call before it in a chain); None for a plain name


def call_statements(language: str) -> frozenset[str]:
    """The node types of `language` that `call_definitions` reads (asked of every statement: kept few)."""
    return _KOTLIN_CALL_STATEMENTS if language == "kotlin" else _CALL_STATEMENTS


def call_definitions(node: Any, src: bytes, route: str = "",
                     groups: Mapping[str, str] | None = None) -> tuple[list[CallDefinition], list[Any]]:
    """(what the call in `node` defines, the functions and blocks it is handed where it defines nothing).

    Defined: a test group, a test, a route's handler or a group of routes. `route`: the path of the group of
    routes `node` is in ("" outside any); `groups`: names bound to a group of routes so far (`group_binding`),
    whose routes' paths are joined to the group's. Handed (`app.listen(port, () => {...})`, an IIFE's
    `(function () {...})()` and its other forms, Ruby's `included do ... end`, Ktor's `routing { ... }`): what those define is
    still the file's (a module wrapped in an IIFE, a concern's methods), for the walk to read.
    """
    inner = node if node.type == "constructor_invocation" else _the_call(node)
    if inner is None:
        return [], []
    call = _call(inner, src)
    if call is not None:
        test = _test_block(call, node, src)
        if test is not None:
            return [test], []
        if groups and call.words[0] in groups and len(call.words) == 2:
            route = groups[call.words[0]]  # Gin's `v1.GET(...)` after `v1 := r.Group("/v1")`
        defined = _routes(call, node, src, route)
        if defined:
            return defined, []
    return [], _handed(inner, src)


def group_binding(node: Any, src: bytes, groups: Mapping[str, str]) -> tuple[str, str] | None:
    """(name, path) where a Go statement binds a name to a group of routes: Gin's and Echo's `v1 :=
    r.Group("/v1")`, `admin := v1.Group("/admin", auth)` (joined: `/v1/admin`); None for anything else."""
    left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
    if left is None or right is None or left.named_child_count != 1 or right.named_child_count != 1:
        return None
    head = right.named_children[0].child_by_field_name("function")
    args = right.named_children[0].child_by_field_name("arguments")
    if head is None or args is None or head.type != "selector_expression" or not args.named_child_count:
        return None
    receiver, last = head.child_by_field_name("operand"), head.child_by_field_name("field")
    if last is None or node_text(last, src) != "Group":
        return None
    base = groups.get(node_text(receiver, src), "") if receiver is not None else ""
    path = _joined(base, _literal(args.named_children[0], src))
    return (node_text(left.named_children[0], src), path) if path is not None else None


def _handed(call: Any, src: bytes) -> list[Any]:
    head, holder, trailing = _parts(call)
    found = [a for a in (_unwrapped(a) for a in holder) if a.type in _FUNCTIONS]
    invoked = _invoked_function(head, src)
    if invoked is not None:
        found.append(invoked)
    if trailing is not None:
        found.append(trailing)
    return found


def _invoked_function(head: Any | None, src: bytes) -> Any | None:
    """The function an IIFE calls at once, as the callee `head` shows it: `(function () {...})()`,
    `(function () {...}())` (the callee is the function itself), `(function () {...}).call(this)`."""
    if head is None:
        return None
    head = unparenthesized(head)
    if head.type == "member_expression" and (target := head.child_by_field_name("object")) is not None \
            and (prop := head.child_by_field_name("property")) is not None \
            and node_text(prop, src) in ("call", "apply"):
        head = unparenthesized(target)
    return head if head.type in _FUNCTIONS else None


# what wraps an IIFE's call in a statement: `(function () {...}())`, `!function () {...}()`
_STATEMENT_WRAPPERS = frozenset({"parenthesized_expression", "unary_expression"})


def _the_call(node: Any) -> Any | None:
    if node.type == "call":  # Ruby
        return node
    if node.type == "expression_statement" and node.named_child_count == 1:
        inner = node.named_children[0]
        while inner.type in _STATEMENT_WRAPPERS and inner.named_child_count == 1:
            inner = inner.named_children[0]
        return inner if inner.type in _CALL_NODES else None
    if node.type == "call_expression" and node.child_by_field_name("function") is None:  # Kotlin
        return node
    return None


def _callee(node: Any) -> Any | None:
    """The node a call calls: its "function" field, or a Kotlin call's first child (Kotlin names no fields)."""
    head = node.child_by_field_name("function")
    if head is None and node.type == "call_expression" and node.named_child_count == 2:
        head = node.named_children[0]
    return head


def _parts(node: Any) -> tuple[Any | None, list[Any], Any | None]:
    """(the callee, the argument nodes, the function or block written after the arguments: Ruby's block,
    Kotlin's trailing lambda)."""
    head = _callee(node)
    holder = node.child_by_field_name("arguments")
    trailing = node.child_by_field_name("block")  # Ruby's `do ... end`
    if trailing is not None and trailing.type not in _RUBY_BLOCKS:
        trailing = None
    if node.type == "constructor_invocation":  # Kotlin: the type, then its arguments
        holder = next((c for c in node.named_children if c.type == "value_arguments"), None)
    elif holder is None and node.type == "call_expression" and node.named_child_count == 2:  # Kotlin: the suffix
        for part in node.named_children[1].named_children:
            if part.type == "value_arguments":
                holder = part
            elif part.type == "annotated_lambda" and part.named_child_count:
                trailing = part.named_children[-1]  # the lambda_literal: its statements are its body
    return head, holder.named_children if holder is not None else [], trailing


def _call(node: Any | None, src: bytes) -> _Call | None:
    """The call's parts, or None at once where its callee's last word is none a definition is called by (most
    calls: this is asked of every statement)."""
    if node is None or node.type not in _CALL_NODES:
        return None
    fields = _CALL_NODES[node.type]
    if fields is None:  # the callee is one node: a name, or a member of something
        head = _callee(node)
        receiver, last = _member(head) if head is not None else (None, None)
    else:
        receiver, last = node.child_by_field_name(fields[0]), node.child_by_field_name(fields[1])
    name = node_text(last, src) if last is not None else ""
    if name.lower() not in _CALLEES:
        return None
    if node.type == "call" and receiver is not None and receiver.type != "constant":
        return None  # Ruby: `expect(x).to ...`, `list.each do`
    _, holder, trailing = _parts(node)
    args = [_unwrapped(a) for a in holder]
    functions = [a for a in args if a.type in _FUNCTIONS]
    if trailing is not None:
        functions.append(trailing)
    words = [*_words(receiver, src), name] if receiver is not None else [name]
    return _Call(node, words, args, functions[-1] if functions else None, receiver)


def _member(head: Any) -> tuple[Any | None, Any | None]:
    """(object, name) of a callee: `app.get` → (app, get); a plain name → (None, name)."""
    fields = _MEMBERS.get(head.type)
    if fields is not None:
        return head.child_by_field_name(fields[0]), head.child_by_field_name(fields[1])
    if head.type == "navigation_expression" and head.named_child_count == 2:  # Kotlin: `call.respond`
        obj, suffix = head.named_children
        return obj, suffix.named_children[-1] if suffix.named_child_count else None
    return (None, head) if head.type in _NAMES else (None, None)


def _unwrapped(arg: Any) -> Any:
    """C#'s and PHP's arguments are wrapped (`argument`), as are Kotlin's (`value_argument`, its label first):
    the value inside."""
    if arg.type in ("argument", "value_argument") and arg.named_child_count:
        return arg.named_children[-1]
    return arg


def _words(node: Any, src: bytes) -> list[str]:
    """A callee's object as words: `app` → ["app"], `this.router` → ["this", "router"], a call → ["()"]."""
    if node.type in _CALL_NODES:
        return ["()"]
    return node_text(node, src, 200).split(".")


def _literal(node: Any, src: bytes) -> str | None:
    """A string literal's text without its quotes; None for anything else or one with substitutions."""
    if node.type not in _STRINGS or any(c.type not in _STRING_PARTS for c in node.named_children):
        return None
    return node_text(node, src, 400)[1:-1]


def _name(text: str) -> str:
    return " ".join(text.replace(".", " ").split())[:_MAX_NAME]


def _test_block(call: _Call, statement: Any, src: bytes) -> CallDefinition | None:
    """`describe('Cart', () => {...})`, `it.only('adds', ...)`, RSpec's `RSpec.describe Cart do`, `it 'adds' do`,
    Kotest's and Spek's `describe("Cart") { it("adds") {...} }`, Go's `t.Run("adds", func(t *testing.T) {...})`."""
    words = call.words
    if words[0] in _TEST_RECEIVERS and len(words) == 2:
        words = words[1:]
    if len(words) == 2 and words[1] == _TEST_RUN:
        kind: str | None = "function"
    elif len(words) > 2 or (len(words) == 2 and words[1] not in _TEST_MODIFIERS):
        return None
    else:
        kind = _TEST_BLOCKS.get(words[0])
    if kind is None:
        return None
    if not call.args:
        return None
    # JS and Go: the title, then the function (a later argument may be a timeout); Ruby and Kotlin: the title,
    # then a block or a trailing lambda
    if len(call.args) >= 2 and call.args[1].type in _FUNCTIONS:
        body = call.args[1]
    elif call.function is not None and call.function not in call.args:
        body = call.function
    else:
        return None
    first = call.args[0]
    title = _literal(first, src)
    if title is None and call.node.type == "call" and first.type in _RUBY_TITLES:
        title = node_text(first, src)
    name = _name(title or "")
    return CallDefinition(kind, name, statement, body) if name else None


def _joined(route: str, path: str | None) -> str | None:
    """A route's full path: its own where it is absolute or outside any group, else joined to its group's
    (Ktor's `get("{id}")` in `route("/customer")` is `/customer/{id}`; a `get { }` there is `/customer`)."""
    if not route:
        return path if path is not None and path[:1] in ("/", "*") else None
    if path is None or path in ("", "/"):
        return route
    return route.rstrip("/") + "/" + path.lstrip("/")


def _routes(call: _Call, statement: Any, src: bytes, route: str) -> list[CallDefinition]:
    """`app.get('/users/:id', auth, (req, res) => {...})`, `r.GET("/x", func(c *gin.Context) {...})`, Sinatra's
    `get '/x' do`, a group `r.Route("/articles", func(r chi.Router) {...})`, and each handler of a chain
    `router.route('/books').get(fn).post(fn)`."""
    verb = call.words[-1].lower()
    method = _ROUTE_METHODS.get(verb)
    if verb == _LARAVEL_GROUP:
        return _laravel_group(call, statement, src, route)
    if call.function is not None and call.words[0] != "()":  # (a call on a call's result is a chain's: below)
        written = _literal(call.args[0], src) if call.args else None
        if call.args and written is None:
            return []  # a path with a substitution, or no path at all
        if written is not None and call.words[-2:-1] == [_LARAVEL] and written[:1] != "/":
            written = "/" + written  # Laravel's `Route::get('users', ...)` serves /users
        path = _joined(route, written)
        client = bool(method) and len(call.words) >= 2 and call.words[-2].lower() in _CLIENTS  # not `HandleFunc`
        if path is not None and method is not None and not client:
            return [CallDefinition("function", _name(f"{method} {path}".strip()), statement, call.function,
                                   nested=False)]
        if path is not None and verb in _ROUTE_GROUPS and written is not None:
            return [CallDefinition("class", _name(path), statement, call.function, nested=False, route=path)]
    return _chained_routes(call, src, route)


def _laravel_group(call: _Call, statement: Any, src: bytes, route: str) -> list[CallDefinition]:
    """Laravel's `Route::prefix('admin')->group(function () {...})` and `Route::group(['prefix' => 'admin'],
    function () {...})`: a group of routes named by its prefix ([] without one: what its function defines is
    walked as any handed function's)."""
    if call.function is None:
        return []
    prefix = None
    if call.args and call.args[0].type == "array_creation_expression":
        for item in call.args[0].named_children:
            if item.named_child_count == 2 and _literal(item.named_children[0], src) == "prefix":
                prefix = _literal(item.named_children[1], src)
    if prefix is None:
        prefix = next((p for link in _chain(call, src)[1:] if link.words[-1] == _LARAVEL_PREFIX and link.args
                       and (p := _literal(link.args[0], src)) is not None), None)
    path = _joined(route, "/" + prefix.strip("/")) if prefix else None
    return [CallDefinition("class", _name(path), statement, call.function, nested=False, route=path)] if path else []


def _chain(call: _Call, src: bytes) -> list[_Call]:
    """The call, then each call whose result it is called on (`a.route('/x').get(f)`: get, route), 16 at most
    and only while each is one a definition may be called by."""
    links: list[_Call] = []
    link: _Call | None = call
    while link is not None and len(links) < 16:
        links.append(link)
        link = _call(link.receiver, src) if link.receiver is not None else None
    return links


def _chained_routes(call: _Call, src: bytes, route: str) -> list[CallDefinition]:
    """Express's `router.route('/books').get(...).post(...)`: each method's handler, named with the route's path."""
    links = _chain(call, src)
    root = links[-1]
    if len(links) < 2 or root.words[-1] != "route" or not root.args:
        return []
    path = _joined(route, _literal(root.args[0], src))
    if path is None:
        return []
    out = []
    for each in reversed(links[:-1]):
        method = _ROUTE_METHODS.get(each.words[-1].lower())
        if method and each.function is not None:
            out.append(CallDefinition("function", _name(f"{method} {path}"), each.function, each.function,
                                      nested=False))
    return out
