"""What wrapped JavaScript defines: the IIFE forms besides `(function () {...})()` (`(function () {...}())`,
`!function () {...}()`, `(function () {...}).call(this)`), the functions defined inside a function bound to a name
(`var runInContext = (function runInContext(context) {...})`), and a name bound to a function a call wraps
(`const getUser = asyncHandler(async (req, res) => {...})`, `React.forwardRef(...)`, lodash's `var groupBy =
createAggregator(function ...)`). Libraries written before ES modules (lodash, underscore, UMD bundles) wrap their
whole API so: lodash.js's 540 KB held no symbol at all, so every question about it was answered with a nameless
stretch of the file; React components and Express handlers wrapped in a call were no symbols either."""

from __future__ import annotations

from pathlib import Path

import pytest

from helix_context import HelixContextManager
from helix_context.ingest.symbols import find_symbols

from .older_genome import older_genome, reingest_marked

# a small library wrapped as lodash wraps its own: an IIFE called with `.call(this)` around a bound function
# expression that defines the API and returns it
HEAD = """;(function() {
  var VERSION = '1.0.0';

  var runInContext = (function runInContext(context) {
"""
SETTINGS = ("colour", "margin", "padding", "border", "font", "locale", "timezone", "currency", "precision", "encoding",
            "timeout", "retries", "delimiter", "quote", "escape", "indent")
# the rest of the API, as long as lodash's is: the wrapper spans many chunks, as lodash's 15,000 lines do
HELPERS = "".join(f"""
    /**
     * Reads the {word} setting of `options`, or its default.
     *
     * @param {{Object}} options The options given.
     * @returns {{*}} Returns the {word} setting.
     */
    function {word}Setting(options) {{
      if (options == null || options.{word} === undefined) {{
        return DEFAULTS.{word};
      }}
      return options.{word};
    }}
""" for word in SETTINGS)
LIBRARY = HEAD + HELPERS + """
    /**
     * Creates an array of elements split into groups the length of `size`.
     * If `array` can't be split evenly, the final chunk will be the remaining elements.
     *
     * @param {Array} array The array to process.
     * @param {number} [size=1] The length of each chunk
     * @returns {Array} Returns the new array of chunks.
     */
    function chunk(array, size) {
      var result = [];
      for (var index = 0; index < array.length; index += size) {
        result.push(array.slice(index, index + size));
      }
      return result;
    }

    /**
     * Creates a function that delays invoking `func` until after `wait` milliseconds have elapsed since
     * the last time the debounced function was invoked.
     *
     * @param {Function} func The function to debounce.
     * @param {number} wait The number of milliseconds to delay.
     * @returns {Function} Returns the new debounced function.
     */
    function debounce(func, wait) {
      var timerId;
      return function debounced() {
        var args = arguments;
        clearTimeout(timerId);
        timerId = setTimeout(function() { func.apply(undefined, args); }, wait);
      };
    }

    /**
     * Converts the first character of `string` to upper case and the remaining to lower case.
     *
     * @param {string} string The string to capitalize.
     * @returns {string} Returns the capitalized string.
     */
    function capitalize(string) {
      return string.charAt(0).toUpperCase() + string.slice(1).toLowerCase();
    }

    /**
     * Clamps `number` within the inclusive `lower` and `upper` bounds.
     *
     * @param {number} number The number to clamp.
     * @param {number} lower The lower bound.
     * @param {number} upper The upper bound.
     * @returns {number} Returns the clamped number.
     */
    function clamp(number, lower, upper) {
      return Math.min(Math.max(number, lower), upper);
    }

    var api = {};
""" + "".join(f"    api.{word}Setting = {word}Setting;\n    api.{word} = {word}Setting;\n" for word in SETTINGS) + """
    api.chunk = chunk;
    api.debounce = debounce;
    api.capitalize = capitalize;
    api.clamp = clamp;
    api.VERSION = VERSION;
    return api;
  });

  var _ = runInContext();
  this._ = _;
}.call(this));
"""


def _symbols(source: str) -> dict[str, tuple[int, int]]:
    return {s.name: (s.start_line, s.end_line) for s in find_symbols(source, "code", "javascript")}


@pytest.mark.parametrize("source", [
    "(function () {\n  function parse(text) {\n    return text;\n  }\n}());\n",
    "!function () {\n  function parse(text) {\n    return text;\n  }\n}();\n",
    "(function () {\n  function parse(text) {\n    return text;\n  }\n}).call(this);\n",
    "(function () {\n  function parse(text) {\n    return text;\n  }\n}.call(this));\n",
    "void function () {\n  function parse(text) {\n    return text;\n  }\n}();\n",
    "(() => {\n  function parse(text) {\n    return text;\n  }\n}).apply(this, []);\n",
], ids=["inner-call", "bang", "call", "call-inside", "void", "arrow-apply"])
def test_what_each_form_of_iife_defines_is_found(source: str) -> None:
    """Each way of calling a function at once that bundles use: what it defines is a symbol, where it was none."""
    assert _symbols(source) == {"parse": (2, 4)}


def test_what_a_function_bound_to_a_name_defines_is_found() -> None:
    """lodash's shape: the API is defined inside `var runInContext = (function runInContext(context) {...})`, itself
    inside an IIFE. Each function is a symbol from its doc comment to its end, named under the function holding it;
    the functions a bound arrow function defines are found the same way."""
    found = _symbols(LIBRARY)
    lines = LIBRARY.split("\n")
    assert found["runInContext"] == (4, lines.index("  });") + 1)
    for name in ("chunk", "debounce", "capitalize", "clamp"):
        first, last = found[f"runInContext.{name}"]
        assert lines[first - 1].strip() == "/**", name
        assert lines[first - 1 :last][-1].strip() == "}", name
        assert any(f"function {name}(" in line for line in lines[first - 1 : last]), name
    arrow = "const App = () => {\n  const onSave = (form) => {\n    return form;\n  };\n  return onSave;\n};\n"
    assert _symbols(arrow) == {"App": (1, 6), "App.onSave": (2, 4)}


WRAPPED_CALLS = """export const Button = React.forwardRef((props, ref) => {
  return <button ref={ref} {...props} />;
});

const Card = memo(forwardRef(function Card(props, ref) {
  return <div ref={ref}>{props.children}</div>;
}));

var groupBy = createAggregator(function(result, value, key) {
  (result[key] || (result[key] = [])).push(value);
});

function Form() {
  const onSave = useCallback(() => {
    save();
  }, []);
  const timer = setTimeout(() => save(), 100);
  const squares = Array.from(list, (x) => x * x);
  const total = items.reduce((a, b) => a + b, 0);
  return onSave;
}
"""


def test_a_name_bound_to_a_function_a_call_wraps_is_a_function() -> None:
    """`const X = wrap(function or arrow)`: the name is the function's, with its lines; a value computed with a
    callback (a method called on a value, the language's own `Array.from`) and a timer's handle are not functions."""
    found = {s.name: (s.kind, s.start_line, s.end_line) for s in find_symbols(WRAPPED_CALLS, "code", "tsx")}
    assert found == {"Button": ("function", 1, 3), "Card": ("function", 5, 7), "groupBy": ("function", 9, 11),
                     "Form": ("function", 13, 21), "Form.onSave": ("function", 14, 16)}


HANDLERS = """const asyncHandler = require('express-async-handler');

/**
 * Looks up one account by its id and answers with it as JSON, or 404 when there is none.
 */
const getAccount = asyncHandler(async (req, res) => {
  const account = await Account.findById(req.params.id);
  if (!account) {
    res.status(404);
    throw new Error('not found');
  }
  res.json(account);
});

/**
 * Deletes the account and everything it owns.
 */
const deleteAccount = asyncHandler(async (req, res) => {
  await Account.deleteOne({ _id: req.params.id });
  res.status(204).end();
});

module.exports = { getAccount, deleteAccount };
"""


def test_a_question_about_a_wrapped_handler_points_at_it(helix: HelixContextManager, tmp_path: Path) -> None:
    """An Express controller whose handlers are wrapped in `asyncHandler`: a question points at the handler's lines,
    doc comment and code, where before the file had no symbol and the answer was a stretch of it."""
    (tmp_path / "api").mkdir()
    (tmp_path / "api" / "accounts.js").write_text(HANDLERS)
    helix.ingest_path(tmp_path / "api")
    assert _pointer(helix, "remove an account") == ("deleteAccount", 15, 21)
    assert _pointer(helix, "find an account by id and return it as json") == ("getAccount", 3, 13)


def wrapped_symbol(name: str) -> tuple[int, int]:
    """The first and last line of one of LIBRARY's functions."""
    return _symbols(LIBRARY)[f"runInContext.{name}"]


def _pointer(helix: HelixContextManager, question: str) -> tuple[str, int, int]:
    top = helix.fingerprint(question, max_results=3)[0]
    return top["symbol"], top["start_line"], top["end_line"]


QUESTIONS = [("split an array into groups of a given size", "chunk"),
             ("make the first letter of a word upper case", "capitalize"),
             ("keep a number between a lower and an upper limit", "clamp")]


def test_a_question_about_a_wrapped_library_points_at_the_function(helix: HelixContextManager, tmp_path: Path) -> None:
    """Asked in words, each question is answered with its function's lines (doc comment and code), not with a
    stretch of the wrapper that happens to hold it."""
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "tinydash.js").write_text(LIBRARY)
    helix.ingest_path(tmp_path / "lib")
    for question, name in QUESTIONS:
        assert _pointer(helix, question) == (f"runInContext.{name}", *wrapped_symbol(name)), question


def test_an_older_genome_finds_a_wrapped_librarys_functions_on_the_next_ingest(settings, tmp_path: Path) -> None:
    """Upgrading: a genome indexed before marks its JavaScript files, with symbols or without (a wrapped library had
    none), for one re-parse, and not its Rust files (its Python files are, for V13's comment lines); the next ingest
    finds the functions without new genes."""
    from helix_context.genome.schema import V12_WRAPPED_FUNCTIONS

    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "tinydash.js").write_text(LIBRARY)
    (tmp_path / "app" / "retry.py").write_text("def fetch(get, url):\n    return get(url)\n")
    (tmp_path / "app" / "main.rs").write_text("fn main() {\n    println!(\"hi\");\n}\n")
    # as an older Helix left it: nothing found inside the wrapper
    helix = older_genome(settings, tmp_path / "app", V12_WRAPPED_FUNCTIONS,
                         "DELETE FROM symbols WHERE path LIKE '%.js'")
    try:
        reingest_marked(helix, tmp_path / "app", {"tinydash.js", "retry.py"})
        assert _pointer(helix, "split an array into groups of a given size") == (
            "runInContext.chunk", *wrapped_symbol("chunk"))
    finally:
        helix.close()


def test_the_lines_between_a_module_functions_functions_are_their_own_pointer(helix: HelixContextManager,
                                                                              tmp_path: Path) -> None:
    """`runInContext` holds a module, as a class holds its methods: the lines between its functions (here the object
    it fills and returns) are a pointer of their own, not the whole 300-line function, and the function's own text is
    its lines before the first function it defines, so it no longer answers for all of them."""
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "tinydash.js").write_text(LIBRARY)
    helix.ingest_path(tmp_path / "lib")
    filled = LIBRARY.split("\n").index("    var api = {};") + 1
    _, first, last = _pointer(helix, "where is the api object filled with the library's functions")
    assert first <= filled <= last and last - first < 60
    assert all(p["symbol"] != "runInContext"
               for p in helix.fingerprint("api colour margin padding border", max_results=5))


def test_a_minified_build_defines_nothing_and_questions_point_at_its_source(helix: HelixContextManager,
                                                                          tmp_path: Path) -> None:
    """A bundle's minified build beside its source (`tinydash.min.js`, one long line): its functions are no
    symbols, since a pointer at a column of a 100 KB line takes a reader nowhere, so questions point at the source."""
    build = " ".join(line.strip() for line in LIBRARY.split("\n") if line.strip() and not line.strip().startswith("*")
                     and not line.strip().startswith("/**"))
    assert find_symbols(build, "code", "javascript") == []
    assert _symbols(LIBRARY)  # the source's are found
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "tinydash.js").write_text(LIBRARY)
    (tmp_path / "lib" / "tinydash.min.js").write_text(build)
    helix.ingest_path(tmp_path / "lib")
    top = helix.fingerprint("split an array into groups of a given size", max_results=3)[0]
    assert top["source_id"].endswith("/tinydash.js") and top["symbol"] == "runInContext.chunk"
