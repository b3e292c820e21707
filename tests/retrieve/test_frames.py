"""Traceback frames of the languages users run: each pins a common function name to the file that broke.

The end-to-end test builds a real tree in which `handle` is defined in fifteen files (too common to
locate by name), pastes the language's own traceback through the real ingest and ranking (no
embeddings, so the frame decides), and expects the frame's file first.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from helix_context import HelixContextManager
from helix_context.config import Settings
from helix_context.retrieve.frames import frames
from helix_context.retrieve.query import extract

PRINTED = {
    "cpython": ('Traceback (most recent call last):\n  File "/x/pkg/core/basic.py", line 12, in subs\n',
                [("basic.py", "subs")]),
    "pytest": ("pkg/core/expr.py:124: in __eq__\n    other = sympify(other)\n", [("expr.py", "__eq__")]),
    "ipython 7": ("~/venv/lib/python3.6/site-packages/pkg/point.py in vel(self, frame)\n", [("point.py", "vel")]),
    "ipython 8": ("File ~/pkg/core/expr.py:124, in Expr.__eq__(self, other)\n", [("expr.py", "__eq__")]),
    "node": ("TypeError: Cannot read properties of undefined (reading 'id')\n"
             "    at Router.handle [as handle_request] (/srv/app/node_modules/express/lib/router/layer.js:95:5)\n"
             "    at async loadUser (file:///C:/app/src/users.mjs:12:9)\n"
             "    at new Server (/srv/app/src/server.ts:40:11)\n"
             "    at Object.<anonymous> (/srv/app/index.js:3:1)\n"
             "    at /srv/app/index.js:4:1\n",
             [("layer.js", "handle"), ("users.mjs", "loadUser"), ("server.ts", "Server")]),
    "jvm": ('Exception in thread "main" java.lang.NullPointerException\n'
            "\tat com.acme.billing.InvoiceService.total(InvoiceService.java:42)\n"
            "\tat java.base/java.lang.Thread.run(Thread.java:829)\n"
            "\tat com.acme.App.<init>(App.kt:9)\n",
            [("InvoiceService.java", "total"), ("Thread.java", "run"), ("App.kt", "<init>")]),
    ".net": ("System.NullReferenceException: Object reference not set\n"
             "   at Acme.Billing.InvoiceService.Total(Invoice invoice) in C:\\src\\Billing\\InvoiceService.cs:line 42\n"
             "   at Acme.Program.Main[T](String[] args) in /src/Program.cs:line 7\n",
             [("InvoiceService.cs", "Total"), ("Program.cs", "Main")]),
    "go": ("panic: runtime error: invalid memory address\n\ngoroutine 1 [running]:\n"
           "github.com/acme/app/server.(*Server).handle(0xc000010000, {0x0, 0x0})\n"
           "\t/home/me/app/server/server.go:42 +0x1d\nmain.main()\n\t/home/me/app/main.go:9 +0x25\n",
           [("server.go", "handle"), ("main.go", "main")]),
    "rust": ("thread 'main' panicked at src/server.rs:42:5:\nstack backtrace:\n   0: rust_begin_unwind\n"
             "   3: acme::server::handle\n             at ./src/server.rs:42:5\n"
             "   4: acme::main::h1a2b3c4d5e6f7a8b\n             at ./src/main.rs:9:5\n",
             [("server.rs", "handle"), ("main.rs", "main")]),
    "ruby": ("/app/models/user.rb:42:in `save': undefined method `id' for nil (NoMethodError)\n"
             "\tfrom /app/models/user.rb:10:in 'User#create'\n"
             "\tfrom /app/lib/tasks/seed.rake:3:in `block (2 levels) in <top (required)>'\n",
             [("user.rb", "save"), ("user.rb", "create")]),
    "php": ("PHP Fatal error:  Uncaught Error\n#0 /var/www/src/Billing/Invoice.php(42): App\\Billing\\Invoice->total()\n"
            "#1 /var/www/index.php(7): App\\Kernel::handle(Object(Request))\n#2 {main}\n",
            [("Invoice.php", "total"), ("index.php", "handle")]),
    "gdb and sanitizers": (
        "#0  0x00007ffff7a42428 in __GI_raise (sig=6) at ../sysdeps/unix/sysv/linux/raise.c:54\n"
        "#1  0x000055555555513d in parse_header (buf=0x0) at src/http.c:42\n"
        "#2  0x0000555555555160 in acme::Server::stop (this=0x1) at src/server.cc:9\n"
        "    #0 0x4c5a1f in decode_chunk /src/lib/chunk.c:88:5\n",
        [("raise.c", "__GI_raise"), ("http.c", "parse_header"), ("server.cc", "stop"), ("chunk.c", "decode_chunk")]),
    "prose": ("The parser lives in util.py in our tree.\nsee util.py in detail\nutil.py: in parse the loop never ends\n"
              "at the moment (foo.js:1:2) it fails\n# a heading (x) at y.c:3\nwe call handle() at startup\n", []),
}


@pytest.mark.parametrize("printed_by", PRINTED)
def test_each_common_traceback_gives_its_files_and_functions(printed_by: str) -> None:
    text, expected = PRINTED[printed_by]
    assert frames(text) == expected


def test_frames_come_in_the_order_printed_and_a_query_keeps_each_once() -> None:
    text = PRINTED["go"][0] + "and then, in the worker:\n" + PRINTED["cpython"][0] + PRINTED["go"][0]
    assert extract(text).frames == (("server.go", "handle"), ("main.go", "main"), ("basic.py", "subs"))


def test_near_misses_are_no_frames() -> None:
    """Runs of path characters, `at ` and `#1` lines that never close: text, not tracebacks."""
    near_misses = ("x.rb:1:in `" + "a" * 300 + "\n") * 100 + ("  at a." * 60 + "\n") * 50 \
        + ("#1 0x1 in f (" + "a" * 300 + "\n") * 50 + ("b/" * 200 + "c.py:1: in \n") * 30
    assert frames(near_misses) == []


# a function named `handle` in each language, and the language's traceback through it
HANDLERS = {
    "javascript": ("router{}.js", "function handle(req) {{\n  return req.id + {};\n}}\nmodule.exports = {{ handle }};\n",
                   "    at handle (/srv/app/src/router.js:2:14)\n    at Layer.next (/srv/app/src/app.js:9:3)\n"),
    "typescript": ("router{}.ts", "export function handle(id: number): number {{\n  return id + {};\n}}\n",
                   "    at handle (/srv/app/src/router.ts:2:10)\n    at main (/srv/app/src/main.ts:4:1)\n"),
    "java": ("Router{}.java", "public class Router{0} {{\n  public int handle(int id) {{\n    return id + {0};\n  }}\n}}\n",
             "\tat com.acme.Router.handle(Router.java:3)\n\tat com.acme.App.main(App.java:7)\n"),
    "go": ("router{}.go", "package app\n\nfunc handle(id int) int {{\n\treturn id + {}\n}}\n",
           "goroutine 1 [running]:\napp.handle(0x1)\n\t/home/me/app/router.go:4 +0x1d\n"),
    "rust": ("router{}.rs", "pub fn handle(id: u32) -> u32 {{\n    id + {}\n}}\n",
             "   3: app::router::handle\n             at ./src/router.rs:2:5\n"),
    "ruby": ("router{}.rb", "class Router{0}\n  def handle(id)\n    id + {0}\n  end\nend\n",
             "/app/lib/router.rb:3:in 'Router#handle': undefined method (NoMethodError)\n"),
    "php": ("Router{}.php", "<?php\nclass Router{0} {{\n  public function handle($id) {{\n    return $id + {0};\n  }}\n}}\n",
            "#0 /var/www/src/Router.php(4): App\\Router->handle(1)\n#1 {{main}}\n"),
    "c#": ("Router{}.cs", "public class Router{0} {{\n  public int handle(int id) {{\n    return id + {0};\n  }}\n}}\n",
           "   at Acme.Router.handle(Int32 id) in C:\\src\\Router.cs:line 3\n"),
    "c": ("router{}.c", "int handle(int id) {{\n  return id + {};\n}}\n",
          "#1  0x000055555555513d in handle (id=1) at src/router.c:2\n#2  0x0000555555555160 in main () at src/main.c:9\n"),
}


@pytest.fixture
def lexical(settings: Settings) -> HelixContextManager:
    manager = HelixContextManager(settings.replace(embedding={"enabled": False}, ner={"enabled": False}))
    yield manager
    manager.close()


@pytest.mark.parametrize("language", HANDLERS)
def test_a_frame_pins_a_common_function_to_its_file_in_every_language(lexical: HelixContextManager, tmp_path: Path,
                                                                      language: str) -> None:
    name, code, trace = HANDLERS[language]
    for i in [*range(1, 15), ""]:
        (tmp_path / name.format(i)).write_text(code.format(i if i != "" else 0))
    lexical.ingest_path(tmp_path)
    issue = "Requests crash after the upgrade\n\n" + textwrap.dedent(trace.replace("{{", "{").replace("}}", "}"))
    top = lexical.fingerprint(issue, max_results=3)
    assert top[0]["source_id"].endswith(name.format("")), [r["source_id"] for r in top]
    assert top[0]["symbol"].rsplit(".", 1)[-1] == "handle" and top[0]["signals"].get("definition", 0) > 0


PLACES = {
    "tsc": ("src/components/Cart.tsx(42,17): error TS2345: Argument of type 'string'", [("Cart.tsx", 42)]),
    "tsc, pretty": ("src/components/Cart.tsx:42:17 - error TS2345", [("Cart.tsx", 42)]),
    "rustc": ("error[E0382]: borrow of moved value: `config`\n  --> src/server.rs:88:13\n", [("server.rs", 88)]),
    "go": ("./main.go:12:2: undefined: handleRequest", [("main.go", 12)]),
    "mypy": ("app/models/user.py:42: error: Incompatible return value type", [("user.py", 42)]),
    "msbuild": ("C:\\proj\\src\\Program.cs(12,5): error CS0103: The name 'x' does not exist", [("Program.cs", 12)]),
    "a link": ("see https://github.com/acme/app/blob/main/src/router.js#L42-L50", [("router.js", 42)]),
    "prose": ("at 12:30 we met; version 1.2.3; ratio 3:1; http://localhost:8080/, np.zeros(3,4) and item (3,4)", []),
}


@pytest.mark.parametrize("printed_by", PLACES)
def test_each_common_file_and_line_gives_its_place(printed_by: str) -> None:
    text, expected = PLACES[printed_by]
    assert extract(text).locations == tuple(expected)


CART = textwrap.dedent('''\
    export function parseQuantity(text: string): number {
      // a string from the form: the number typed, or a number type error
      const value = Number(text);
      if (Number.isNaN(value)) {
        throw new TypeError("not a number: " + text);
      }
      return value;
    }

    export function addItem(cart: Item[], sku: string, count: number): Item[] {
      const item = { sku, count };
      return [...cart, item];
    }

    export function total(cart: Item[]): number {
      return cart.reduce((sum, item) => sum + item.count, 0);
    }
    ''')


def test_a_compilers_file_and_line_points_at_the_function_holding_it(lexical: HelixContextManager,
                                                                     tmp_path: Path) -> None:
    """tsc names line 11, inside `addItem`; the error's words (string, number, type) are `parseQuantity`'s."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "cart.ts").write_text(CART)
    for i in range(6):  # other code, so that word rarity means something
        (tmp_path / "src" / f"util{i}.ts").write_text(f"export function convert{i}(value: string) {{\n  return {i};\n}}\n")
    lexical.ingest_path(tmp_path)
    error = ("src/cart.ts(11,29): error TS2345: Argument of type 'string' is not assignable to parameter of type "
             "'number'.")
    top = lexical.fingerprint(error, max_results=3)
    assert top[0]["source_id"].endswith("cart.ts") and top[0]["symbol"] == "addItem", [r["symbol"] for r in top]
    assert top[0]["signals"].get("definition", 0) > 0
    without_line = lexical.fingerprint(error.replace("(11,29)", ""), max_results=3)
    assert without_line[0]["symbol"] == "parseQuantity", "the words alone point elsewhere: the line decides"
