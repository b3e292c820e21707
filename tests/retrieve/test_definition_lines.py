"""A definition's lines include what its grammar parses beside it: TypeScript's decorators and Rust's attributes
above it (the route a controller's method serves), Dart's annotations, and a Dart function's body, which the
grammar gives as the sibling after its signature. Before, a pointer at a NestJS handler left out its route, and
one at any Dart function showed its first line alone (ingest/symbols_tree.py: _definition_symbol)."""

from __future__ import annotations

from pathlib import Path

import pytest

from helix_context import HelixContextManager
from helix_context.ingest.symbols import find_symbols
from tests.retrieve.older_genome import older_genome, reingest_marked

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

# language, source, every symbol as (kind, first line, last line)
DEFINED = {
    "typescript": (NEST, {"CartsController": ("class", 3, 17), "CartsController.constructor": ("method", 5, 5),
                          "CartsController.findOne": ("method", 7, 10), "CartsController.purge": ("method", 12, 16)}),
    "rust": (ACTIX, {"show": ("function", 3, 6), "erase": ("function", 9, 13), "Account": ("class", 15, 18)}),
    "dart": (DART, {"taxed": ("function", 1, 3), "Cart": ("class", 5, 24), "Cart.Cart": ("method", 8, 8),
                    "Cart.total": ("method", 10, 17), "Cart.count": ("method", 19, 19),
                    "Cart.empty": ("method", 21, 23)}),
}


def _symbols(language: str, source: str) -> dict[str, tuple[str, int, int]]:
    from helix_context.ingest.treesitter import parser_for

    if parser_for(language) is None:
        pytest.skip(f"no tree-sitter grammar for {language} in this install")
    return {s.name: (s.kind, s.start_line, s.end_line) for s in find_symbols(source, "code", language)}


@pytest.mark.parametrize("language", sorted(DEFINED))
def test_a_definition_spans_its_decorators_and_its_body(language: str) -> None:
    """The decorators and attributes right above a definition are its lines (a doc comment is not: it is text
    about the definition, found by its gene), and a Dart function ends where its body does."""
    source, want = DEFINED[language]
    assert _symbols(language, source) == want


ASKED = [
    ("carts.controller.ts", NEST, "which handler serves DELETE /carts/:id", ("CartsController.purge", 12, 16)),
    ("users.rs", ACTIX, "which handler serves DELETE /users/{id}", ("erase", 9, 13)),
    ("cart.dart", DART, "sum the prices of the items in the cart", ("Cart.total", 10, 17)),
]


@pytest.mark.parametrize(("relpath", "source", "question", "want"), ASKED, ids=[a[0] for a in ASKED])
def test_a_question_points_at_the_route_and_the_body_with_the_definition(helix: HelixContextManager, tmp_path: Path,
                                                                         relpath: str, source: str, question: str,
                                                                         want: tuple[str, int, int]) -> None:
    _symbols({"ts": "typescript", "rs": "rust", "dart": "dart"}[relpath.rsplit(".", 1)[1]], source)
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / relpath).write_text(source)
    helix.ingest_path(tmp_path / "app")
    top = helix.fingerprint(question, max_results=3)[0]
    assert (top["symbol"], top["start_line"], top["end_line"]) == want


def test_an_older_genome_gets_whole_dart_functions_on_the_next_ingest(settings, tmp_path: Path) -> None:
    """Upgrading: a genome indexed before marks its TypeScript, Rust and Dart files (only those) for one re-parse;
    the next ingest gives the Dart method its body's lines without new genes."""
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
        reingest_marked(helix, tmp_path / "app", {"cart.dart", "users.rs"})
        top = helix.fingerprint("sum the prices of the items in the cart", max_results=3)[0]
        assert (top["symbol"], top["start_line"], top["end_line"]) == ("Cart.total", 10, 17)
    finally:
        helix.close()
