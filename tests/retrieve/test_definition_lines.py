"""A definition's lines include what its grammar parses beside it: the doc comment right above it (JSDoc, Javadoc,
Go's and Rust's comments), TypeScript's decorators and Rust's attributes (the route a controller's method serves),
Dart's annotations, and a Dart function's body, which the grammar gives as the sibling after its signature.
Before, a pointer at a NestJS handler left out its route, one at any Dart function showed its first line alone,
and a question in words was matched against a function's code without the words written about it
(ingest/symbols_tree.py: _definition_symbol; chunks attach the same lines, chunk_code.py: _ts_anchors)."""

from __future__ import annotations

from pathlib import Path

import pytest

from helix_context import HelixContextManager
from tests.retrieve.older_genome import older_genome, reingest_marked
from tests.retrieve.tree_symbols import symbols_of as _symbols

NEST = """import { Controller, Get, Delete, Param } from '@nestjs/common';

@Controller('carts')
export class CartsController {
  constructor(private readonly carts: CartsService) {}

  @Get(':id')
  findOne(@Param('id') id: string) {
    return this.carts.find(id);
  }

  @Delete(':id')
  @HttpCode(204)
  purge(@Param('id') id: string) {
    return this.carts.remove(id);
  }
}
"""

ACTIX = """use actix_web::{delete, get, web, HttpResponse};

#[get("/users/{id}")]
async fn show(id: web::Path<u32>) -> HttpResponse {
    HttpResponse::Ok().json(accounts::find(*id))
}

/// Deletes the account and everything it owns.
#[delete("/users/{id}")]
async fn erase(id: web::Path<u32>) -> HttpResponse {
    accounts::remove(*id);
    HttpResponse::NoContent().finish()
}

#[derive(Debug, Clone)]
struct Account {
    id: u32,
}
"""

DART = """double taxed(double amount, double rate) {
  return amount * (1 + rate);
}

class Cart extends ChangeNotifier {
  final List<Item> items = [];

  Cart(this.owner);

  @override
  double total() {
    var sum = 0.0;
    for (final item in items) {
      sum += item.price;
    }
    return sum;
  }

  int get count => items.length;

  static Cart empty() {
    return Cart(null);
  }
}
"""

GO = """package cart

// Total returns the sum of the item prices,
// with the sales tax added.
func Total(items []Item, rate float64) float64 {
	return 0
}

var count = 1 // how many carts are open
func Open() {}

// Limits.

const (
	MaxItems = 100
)

// Server serves carts over HTTP.
type Server struct{}
"""

# Express's own layout: a JSDoc block, a blank line, then the method
RESPONSE = """var res = Object.create(http.ServerResponse.prototype);

/**
 * Send a response to the client telling it to go to another location,
 * with 302 Found unless a status is given.
 *
 * @param {String} url
 * @public
 */

res.redirect = function redirect(url) {
  this.location(url);
  this.statusCode = 302;
  this.end();
};

/**
 * Expire the named cookie at once, so that the browser drops it.
 * @public
 */
res.clearCookie = function clearCookie(name, options) {
  return this.cookie(name, '', { expires: new Date(1), path: '/' });
};

// Headers whose values are joined, never replaced.
/* Kept in one place. */
res.vary = function (field) {
  vary(this, field);
  return this;
};

/**
 * Set header `field` to `val`; aliased as `res.header()`.
 */

res.set = res.header = function header(field, val) {
  this.setHeader(field, val);
  return this;
};
"""

JAVA = """package shop;

/**
 * A shopping cart.
 */
public class Cart {
    /** Adds the item, once. */
    @Override
    public void add(Item item) {
        items.add(item);
    }
}
"""

C = """/* Adds two numbers
   without overflow checks. */
int add(int a, int b) {
  return a + b;
}

/* ---- helpers ---- */

static int twice(int a) { return 2 * a; }
"""

# language, source, every symbol as (kind, first line, last line)
DEFINED = {
    "typescript": (NEST, {"CartsController": ("class", 3, 17), "CartsController.constructor": ("method", 5, 5),
                          "CartsController.findOne": ("method", 7, 10), "CartsController.purge": ("method", 12, 16)}),
    "rust": (ACTIX, {"show": ("function", 3, 6), "erase": ("function", 8, 13), "Account": ("class", 15, 18)}),
    "go": (GO, {"Total": ("function", 3, 7), "Open": ("function", 10, 10),
                "MaxItems": ("constant", 15, 15), "Server": ("class", 18, 19)}),
    "javascript": (RESPONSE, {"res.redirect": ("method", 3, 15),
                              "res.clearCookie": ("method", 17, 23), "res.vary": ("method", 25, 30),
                              "res.set": ("method", 32, 39)}),
    "java": (JAVA, {"Cart": ("class", 3, 12), "Cart.add": ("method", 7, 11)}),
    "c": (C, {"add": ("function", 1, 5), "twice": ("function", 9, 9)}),
    "dart": (DART, {"taxed": ("function", 1, 3), "Cart": ("class", 5, 24), "Cart.Cart": ("method", 8, 8),
                    "Cart.total": ("method", 10, 17), "Cart.count": ("method", 19, 19),
                    "Cart.empty": ("method", 21, 23)}),
}


@pytest.mark.parametrize("language", sorted(DEFINED))
def test_a_definition_spans_its_doc_comment_decorators_and_body(language: str) -> None:
    """The doc comment, decorators and attributes right above a definition are its lines (a `/**` block across one
    blank line, as Express writes them); a comment ending a line of code, one a blank line away and a group's
    header (`const (`) are not; a Dart function ends where its body does. Express's `res.set = res.header =
    function header(...)` is `res.set` (a chain of assignments was no symbol at all)."""
    source, want = DEFINED[language]
    assert _symbols(language, source) == want


ASKED = [
    ("response.js", RESPONSE, "send the client to another location", ("res.redirect", 3, 15)),
    ("response.js", RESPONSE, "make the browser drop a cookie", ("res.clearCookie", 17, 23)),
    ("carts.controller.ts", NEST, "which handler serves DELETE /carts/:id", ("CartsController.purge", 12, 16)),
    ("users.rs", ACTIX, "which handler serves DELETE /users/{id}", ("erase", 8, 13)),
    ("cart.dart", DART, "sum the prices of the items in the cart", ("Cart.total", 10, 17)),
]


@pytest.mark.parametrize(("relpath", "source", "question", "want"), ASKED, ids=[f"{a[0]}: {a[2]}" for a in ASKED])
def test_a_question_points_at_the_route_and_the_body_with_the_definition(helix: HelixContextManager, tmp_path: Path,
                                                                         relpath: str, source: str, question: str,
                                                                         want: tuple[str, int, int]) -> None:
    _symbols({"ts": "typescript", "rs": "rust", "dart": "dart", "js": "javascript"}[relpath.rsplit(".", 1)[1]], source)
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / relpath).write_text(source)
    helix.ingest_path(tmp_path / "app")
    top = helix.fingerprint(question, max_results=3)[0]
    assert (top["symbol"], top["start_line"], top["end_line"]) == want


def test_an_older_genome_gets_whole_dart_functions_on_the_next_ingest(settings, tmp_path: Path) -> None:
    """Upgrading: a genome indexed before marks its files with symbols for one re-parse (its Python files too, but
    for V13's comment lines: their symbols are V11's as they were); the next ingest gives the Dart method its body's
    lines without new genes."""
    from helix_context.genome.schema import V11_DEFINITION_LINES

    _symbols("dart", DART)
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "cart.dart").write_text(DART)
    (tmp_path / "app" / "users.rs").write_text(ACTIX)
    (tmp_path / "app" / "retry.py").write_text("def fetch(get, url):\n    return get(url)\n")
    # as an older Helix left it: each Dart function spanning its signature's line alone
    helix = older_genome(settings, tmp_path / "app", V11_DEFINITION_LINES,
                         "UPDATE symbols SET end_line = start_line WHERE path LIKE '%.dart'")
    try:
        reingest_marked(helix, tmp_path / "app", {"cart.dart", "users.rs", "retry.py"})
        top = helix.fingerprint("sum the prices of the items in the cart", max_results=3)[0]
        assert (top["symbol"], top["start_line"], top["end_line"]) == ("Cart.total", 10, 17)
    finally:
        helix.close()


def test_a_doc_comment_is_stored_with_the_code_it_documents(helix: HelixContextManager, tmp_path: Path) -> None:
    """A file cut into many chunks: each method's JSDoc (a blank line away, as Express writes it) is cut with the
    method, so the chunk that holds a symbol's first line holds its code too, and a pointer at it is whole."""
    _symbols("javascript", RESPONSE)
    methods = "".join(f"/**\n * Step {i}: counts the {i}th thing of the order.\n * @public\n */\n\n"
                      f"res.step{i} = function step{i}(order) {{\n" + "".join(
                          f"  order.total += order.items[{j}].price * {i};\n" for j in range(12))
                      + "  return order;\n};\n\n" for i in range(40))
    source = "var res = module.exports = {};\n\n" + methods
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "steps.js").write_text(source)
    helix.ingest_path(tmp_path / "app")
    lines = source.split("\n")
    defined = {f"res.step{i}": lines.index(f"res.step{i} = function step{i}(order) {{") + 1 for i in range(40)}
    rows = helix.genome.conn.execute(
        "SELECT s.name, s.start_line, s.end_line, g.start_line, g.end_line FROM symbols s JOIN genes g ON g.id = s.gene"
    ).fetchall()
    assert len(rows) == 40 and len({r[3] for r in rows}) > 5  # many chunks
    for name, first, _, gene_first, gene_last in rows:
        assert first == defined[name] - 5, name  # from its `/**` line
        assert gene_first <= first and defined[name] <= gene_last, name  # the doc and the definition: one chunk


def test_a_big_file_of_documented_functions_gets_every_doc_comment() -> None:
    """A generated file past the size parsed in one go (it is read through a callback): every function's doc
    comment is found from the parsed bytes (reading it from the tree's nodes crashed the process here)."""
    source = "".join(f"/** Adds {i}. */\nfunction add{i}(a) {{ return a + {i}; }}\n" for i in range(5000))
    got = _symbols("javascript", source)
    assert len(got) == 5000 and got["add4999"] == ("function", 9999, 10000)
