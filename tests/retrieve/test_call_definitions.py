"""Calls that define something: a test framework's tests named by their titles, a web framework's route handlers
by their method and path, groups of routes by their path (ingest/call_definitions.py); and what the functions
handed to other calls define. A question about one points at its lines, not at a stretch of the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from helix_context import HelixContextManager
from helix_context.ingest.symbols import find_symbols
from tests.retrieve.older_genome import older_genome, reingest_marked
from tests.retrieve.tree_symbols import symbols_of as _symbols

CART_TEST = """const { Cart } = require('../src/cart');

describe('Cart', () => {
  let cart;
  beforeEach(() => { cart = new Cart(); });

  it('adds an item and counts it', () => {
    cart.add({ sku: 'a', price: 5 });
    expect(cart.count()).toBe(1);
  });

  it('includes the sales tax in the total', () => {
    cart.add({ sku: 'a', price: 10 });
    expect(cart.total({ taxRate: 0.2 })).toBe(12);
  });

  describe.skip('discounts', () => {
    test('a coupon takes 10 percent off', async () => {
      expect(await cart.apply('TEN')).toBe(true);
    });
  });
});
"""

CART_SPEC = """require 'cart'

RSpec.describe Cart do
  let(:cart) { Cart.new }

  it 'adds an item and counts it' do
    cart.add(sku: 'a', price: 5)
    expect(cart.count).to eq(1)
  end

  context 'with a tax rate' do
    it 'includes the sales tax in the total' do
      cart.add(sku: 'a', price: 10)
      expect(cart.total(tax_rate: 0.2)).to eq(12)
    end
  end
end
"""

GO_SUBTESTS = """package cart

func TestCart(t *testing.T) {
	t.Run("adds the sales tax to the total", func(t *testing.T) {
		if got := Total([]Item{{Price: 10}}, 0.2); got != 12 {
			t.Fatalf("total = %v, want 12", got)
		}
	})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { check(t, tc) })
	}
}
"""

KOTEST = """class CartSpec : DescribeSpec({
    describe("Cart") {
        it("adds the sales tax to the total") {
            Cart(taxRate = 0.2).add(Item(price = 10)).total() shouldBe 12
        }
    }
})
"""

# small handlers, packed into one stored gene by the chunker: each route must still be a pointer of its own
EXPRESS = """const express = require('express');
const router = express.Router();

router.get('/users/:id', requireLogin, async (req, res) => {
  const account = await accounts.find(req.params.id);
  res.json(account);
});

router.delete('/users/:id', requireAdmin, async (req, res) => {
  await accounts.remove(req.params.id);
  res.status(204).end();
});

router.route('/sessions')
  .post((req, res) => {
    res.json(sessions.open(req.body));
  })
  .delete(function (req, res) {
    sessions.close(req.cookies.sid);
    res.end();
  });

router.post('/orders', placeOrder);
cache.get('users', (err, hit) => {});
$.get('/users/me', function (data) { render(data); });

module.exports = router;
"""

GIN = """package api

func Register(r *gin.Engine) {
	r.GET("/health", func(c *gin.Context) {
		c.String(200, "ok")
	})
	r.POST("/invoices", func(c *gin.Context) {
		c.JSON(201, billing.Issue(c))
	})
	http.HandleFunc("/metrics", func(w http.ResponseWriter, req *http.Request) {
		metrics.Write(w)
	})
	v1 := r.Group("/v1")
	v1.DELETE("/invoices/:id", func(c *gin.Context) {
		billing.Void(c.Param("id"))
	})
}
"""

SINATRA = """require 'sinatra'

class Shop < Sinatra::Base
  get '/products/:sku' do
    Product.find(params[:sku]).to_json
  end

  post '/checkout' do
    Checkout.new(params).run
  end

  namespace '/admin' do
    delete '/products/:sku' do
      Product.find(params[:sku]).destroy
    end
  end
end
"""

# groups of routes: their handlers' paths are joined to the group's, and a wrapper (`routing`, `authenticate`)
# is walked through
KTOR = """fun Application.configureRouting() {
    routing {
        route("/customer") {
            get {
                call.respond(customerStorage)
            }
            get("{id?}") {
                val id = call.parameters["id"] ?: return@get call.respond(HttpStatusCode.BadRequest)
                call.respond(customerStorage.find { it.id == id } ?: HttpStatusCode.NotFound)
            }
        }
        authenticate("auth-session") {
            post("/orders") {
                call.respond(orders.place(call.receive()))
            }
        }
    }
}
"""

CHI = """package api

func Routes(r chi.Router) {
	r.Route("/articles", func(r chi.Router) {
		r.Get("/", func(w http.ResponseWriter, req *http.Request) {
			render.JSON(w, req, articles.List())
		})
		r.Delete("/{articleID}", func(w http.ResponseWriter, req *http.Request) {
			articles.Remove(chi.URLParam(req, "articleID"))
		})
	})
}
"""

ASPNET = """var builder = WebApplication.CreateBuilder(args);
var app = builder.Build();

app.MapGet("/todos/{id}", async (int id, TodoDb db) =>
    await db.Todos.FindAsync(id) is Todo todo ? Results.Ok(todo) : Results.NotFound());

app.MapPost("/todos", async (Todo todo, TodoDb db) =>
{
    db.Todos.Add(todo);
    await db.SaveChangesAsync();
    return Results.Created($"/todos/{todo.Id}", todo);
});

app.MapGet($"/v{version}/status", () => "ok");
app.Run();
"""

LARAVEL = """<?php

use Illuminate\\Support\\Facades\\Route;

Route::get('/invoices/{id}', function (string $id) {
    return Invoice::findOrFail($id);
});

Route::post('/invoices/{id}/refund', function (string $id) {
    return Invoice::findOrFail($id)->refund();
});

Route::get('/dashboard', [DashboardController::class, 'show']);

Route::prefix('admin')->group(function () {
    Route::delete('invoices/{id}', function (string $id) {
        return Invoice::findOrFail($id)->delete();
    });
});
"""

SPARK = """public class Api {
    public static void main(String[] args) {
        get("/hello", (req, res) -> "Hello World");
        app.delete("/users/{id}", ctx -> users.remove(ctx.pathParam("id")));
    }
}
"""

# language, file, its source, the symbols it defines: name -> (kind, first line, last line)
DEFINED = {
    "javascript-tests": ("javascript", "test/cart.test.js", CART_TEST, {
        "Cart": ("class", 3, 22), "Cart.adds an item and counts it": ("method", 7, 10),
        "Cart.includes the sales tax in the total": ("method", 12, 15), "Cart.discounts": ("class", 17, 21),
        "Cart.discounts.a coupon takes 10 percent off": ("method", 18, 20)}),
    "rspec": ("ruby", "spec/cart_spec.rb", CART_SPEC, {
        "Cart": ("class", 3, 17), "Cart.adds an item and counts it": ("method", 6, 9),
        "Cart.with a tax rate": ("class", 11, 16),
        "Cart.with a tax rate.includes the sales tax in the total": ("method", 12, 15)}),
    "go-subtests": ("go", "cart_test.go", GO_SUBTESTS, {
        "TestCart": ("function", 3, 12), "TestCart.adds the sales tax to the total": ("function", 4, 8)}),
    "kotest": ("kotlin", "CartSpec.kt", KOTEST, {
        "CartSpec": ("class", 1, 7), "CartSpec.Cart": ("class", 2, 6),
        "CartSpec.Cart.adds the sales tax to the total": ("method", 3, 5)}),
    "express": ("javascript", "routes/users.js", EXPRESS, {
        "GET /users/:id": ("function", 4, 7), "DELETE /users/:id": ("function", 9, 12),
        "POST /sessions": ("function", 15, 17), "DELETE /sessions": ("function", 18, 21)}),
    "gin": ("go", "api/routes.go", GIN, {
        "Register": ("function", 3, 17), "GET /health": ("function", 4, 6), "POST /invoices": ("function", 7, 9),
        "/metrics": ("function", 10, 12), "DELETE /v1/invoices/:id": ("function", 14, 16)}),
    "aspnet": ("csharp", "Program.cs", ASPNET, {
        "GET /todos/{id}": ("function", 4, 5), "POST /todos": ("function", 7, 12)}),
    "laravel": ("php", "routes/web.php", LARAVEL, {
        "GET /invoices/{id}": ("function", 5, 7), "POST /invoices/{id}/refund": ("function", 9, 11),
        "/admin": ("class", 15, 19), "DELETE /admin/invoices/{id}": ("function", 16, 18)}),
    "spark": ("java", "Api.java", SPARK, {
        "Api": ("class", 1, 6), "Api.main": ("method", 2, 5), "GET /hello": ("function", 3, 3),
        "DELETE /users/{id}": ("function", 4, 4)}),
    "sinatra": ("ruby", "shop.rb", SINATRA, {
        "Shop": ("class", 3, 17), "GET /products/:sku": ("function", 4, 6), "POST /checkout": ("function", 8, 10),
        "/admin": ("class", 12, 16), "DELETE /admin/products/:sku": ("function", 13, 15)}),
    "ktor": ("kotlin", "Routing.kt", KTOR, {
        "configureRouting": ("function", 1, 18), "/customer": ("class", 3, 11), "GET /customer": ("function", 4, 6),
        "GET /customer/{id?}": ("function", 7, 10), "POST /orders": ("function", 13, 15)}),
    "chi": ("go", "api/routes.go", CHI, {
        "Routes": ("function", 3, 12), "/articles": ("class", 4, 11), "GET /articles": ("function", 5, 7),
        "DELETE /articles/{articleID}": ("function", 8, 10)}),
}


@pytest.mark.parametrize("case", sorted(DEFINED))
def test_tests_and_route_handlers_are_named_as_their_readers_name_them(case: str) -> None:
    """A test by its title inside its group (a Go subtest inside its test; a Go subtest titled by a variable is
    no symbol); a handler by its method and path, wherever the route is registered
    (inside `func Register`, a Sinatra class or Java's `main`). A handler defined elsewhere (`placeOrder`, a
    Laravel controller action), a call that merely takes a callback (`cache.get('users', cb)`) and an HTTP client
    asking for a route (jQuery's `$.get('/users/me', cb)`) define nothing here, nor does a path with a
    substitution (C#'s `$"/v{version}/status"`)."""
    language, _, source, want = DEFINED[case]
    assert _symbols(language, source) == want


# case, question, the pointer wanted: (symbol, first line, last line)
ASKED = [
    ("javascript-tests", "which test checks that tax is added to the cart total",
     ("Cart.includes the sales tax in the total", 12, 15)),
    ("rspec", "which spec checks that tax is added to the cart total",
     ("Cart.with a tax rate.includes the sales tax in the total", 12, 15)),
    ("go-subtests", "which test checks that tax is added to the cart total",
     ("TestCart.adds the sales tax to the total", 4, 8)),
    ("express", "which handler serves DELETE /users/:id", ("DELETE /users/:id", 9, 12)),
    ("express", "where is the endpoint that logs a user out by closing the session", ("DELETE /sessions", 18, 21)),
    ("gin", "where is an invoice created", ("POST /invoices", 7, 9)),
    ("gin", "which handler serves DELETE /v1/invoices/:id", ("DELETE /v1/invoices/:id", 14, 16)),
    ("sinatra", "which route serves a product by its sku", ("GET /products/:sku", 4, 6)),
    ("aspnet", "where are new todos created", ("POST /todos", 7, 12)),
    ("ktor", "which route returns one customer by its id", ("GET /customer/{id?}", 7, 10)),
    ("chi", "which handler deletes an article", ("DELETE /articles/{articleID}", 8, 10)),
    ("sinatra", "where can an admin delete a product", ("DELETE /admin/products/:sku", 13, 15)),
    ("laravel", "which route refunds an invoice", ("POST /invoices/{id}/refund", 9, 11)),
]


@pytest.mark.parametrize(("case", "question", "want"), ASKED, ids=[f"{c}: {q}" for c, q, _ in ASKED])
def test_a_question_about_a_test_or_a_route_points_at_its_lines(helix: HelixContextManager, tmp_path: Path,
                                                                 case: str, question: str,
                                                                 want: tuple[str, int, int]) -> None:
    """Before, these were calls: the question got the whole file (or the gene packing every handler)."""
    language, relpath, source, _ = DEFINED[case]
    _symbols(language, source)
    target = tmp_path / "app" / relpath
    target.parent.mkdir(parents=True)
    target.write_text(source)
    helix.ingest_path(tmp_path / "app")
    top = helix.fingerprint(question, max_results=3)[0]
    assert (top["symbol"], top["start_line"], top["end_line"]) == want


IIFE = """(function (root) {
  function parseQuery(text) {
    return Object.fromEntries(new URLSearchParams(text));
  }
  root.parseQuery = parseQuery;
})(window);

app.listen(3000, () => {
  function announce(port) {
    console.log(`listening on ${port}`);
  }
  announce(3000);
});
"""

CONCERN = """module Taggable
  extend ActiveSupport::Concern

  included do
    def tag_names
      tags.map(&:name)
    end
  end

  class_methods do
    def tagged_with(name)
      joins(:tags).where(tags: { name: name })
    end
  end
end
"""


@pytest.mark.parametrize(("language", "source", "want"), [
    ("javascript", IIFE, {"parseQuery": ("function", 2, 4), "announce": ("function", 9, 11)}),
    ("ruby", CONCERN, {"Taggable": ("class", 1, 15), "Taggable.tag_names": ("method", 5, 7),
                       "Taggable.tagged_with": ("method", 11, 13)}),
], ids=["javascript-iife", "rails-concern"])
def test_what_a_function_handed_to_a_call_defines_is_found(language: str, source: str,
                                                           want: dict[str, tuple[str, int, int]]) -> None:
    """A module wrapped in an IIFE, a callback's helpers, a Rails concern's `included do` / `class_methods do`
    methods: defined inside a function or block handed to a call, they were never walked, so none was a symbol."""
    assert _symbols(language, source) == want


def test_an_older_genome_names_its_routes_on_the_next_ingest(settings, tmp_path: Path) -> None:
    """Upgrading: a genome indexed before routes were named marks its JS/TS, Go and Ruby files (only those) for
    one re-parse; the next ingest names the handlers without new genes."""
    from helix_context.genome.schema import V10_CALL_DEFINITIONS

    _symbols("javascript", EXPRESS)
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "users.js").write_text(EXPRESS)
    (tmp_path / "app" / "README.md").write_text("# Accounts\n\nThe users API.\n")
    # as an older Helix left it: no route handlers among the symbols
    helix = older_genome(settings, tmp_path / "app", V10_CALL_DEFINITIONS, "DELETE FROM symbols WHERE name LIKE '% /%'")
    try:
        reingest_marked(helix, tmp_path / "app", {"users.js"})
        top = helix.fingerprint("which handler serves DELETE /users/:id", max_results=3)[0]
        assert (top["symbol"], top["start_line"], top["end_line"]) == ("DELETE /users/:id", 9, 12)
    finally:
        helix.close()


def test_hostile_calls_give_bounded_symbols() -> None:
    """A generated file of thousands of routes, a path of 200 KB, a chain of 3,000 calls and describes nested 300
    deep: symbols stay within the per-file cap, names within 100 characters, nesting within the walk's depth."""
    from helix_context.ingest.symbols_tree import MAX_SYMBOLS

    _symbols("javascript", EXPRESS)
    many = "".join(f"app.get('/r{i}', (req, res) => res.end());\n" for i in range(MAX_SYMBOLS + 1000))
    assert len(find_symbols(many, "code", "javascript")) == MAX_SYMBOLS
    # (each among enough lines not to read as minified: a minified file defines nothing, test_wrapped_modules.py)
    huge = find_symbols("app.get('/" + "a" * 200_000 + "', (req, res) => 1);\n" + "// routes\n" * 600, "code",
                        "javascript")
    assert [len(s.name) for s in huge] == [100] and huge[0].name.startswith("GET /aaa")
    chain = "router.route('/x')" + "\n  .get((q, s) => 1)" * 3000 + ";\n"
    assert len(find_symbols(chain, "code", "javascript")) <= 16  # a chain is read 16 calls deep at most
    deep = "describe('a', () => {\n" * 300 + "it('x', () => {});\n" + "});\n" * 300
    nested = find_symbols(deep, "code", "javascript")
    assert 0 < len(nested) <= 41 and all(s.name.count(".") <= 41 for s in nested)
