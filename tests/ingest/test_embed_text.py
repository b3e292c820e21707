"""What the embedding model reads for a gene: a digest for code, the text itself for prose."""

from __future__ import annotations

from helix_context.config import load_config
from helix_context.ingest.embed_text import embedding_text, embedding_tokens
from helix_context.models import Gene

PY = '''def add_attachment(self, data, maintype="application"):
    """Attach a file to this message as a new MIME part."""
    # inline parts stay in the body
    return self._add_multipart("mixed", data, maintype=maintype)
'''

JS = '''/**
 * Retry a request with exponential backoff.
 */
export async function fetchWithRetry(url, attempts) {
  // give up after the last attempt
  return doFetch(url);
}
'''


def _gene(content: str, content_type: str, language: str | None, path: str, symbol: str | None) -> Gene:
    return Gene(gene_id="x", content=content, content_type=content_type, language=language, source_path=path,
                project=None, start_line=1, end_line=content.count("\n") + 1, symbol=symbol)


def test_python_code_is_read_as_names_in_words_then_docstrings_and_comments_then_code() -> None:
    text = embedding_text(_gene(PY, "code", "python", "/usr/lib/python3/email/message.py",
                                "MIMEPart.add_attachment"))
    head, comments, code = text.split("\n", 2)
    assert head == "email message | mime part, add attachment"
    assert comments == "Attach a file to this message as a new MIME part. inline parts stay in the body"
    assert code == PY  # the code itself follows, for code with few names and no comments


def test_other_languages_use_their_own_comment_syntax() -> None:
    text = embedding_text(_gene(JS, "code", "javascript", "C:\\src\\net\\fetchRetry.js", "fetchWithRetry"))
    head, comments, _ = text.split("\n", 2)
    assert head == "net fetch retry | fetch with retry"
    assert comments == "Retry a request with exponential backoff. give up after the last attempt"


def test_code_without_a_known_comment_syntax_still_gets_names_and_code() -> None:
    text = embedding_text(_gene("fn parse_header() {}\n", "code", None, "lib/parse_header.xyz", None))
    assert text.startswith("lib parse header | parse header\n\n")


def test_prose_is_read_from_its_own_text_under_its_path_and_heading() -> None:
    gene = _gene("Run `helix serve` on port 11437.\n", "markdown", None, "/repo/docs/running.md", "Running")
    assert embedding_text(gene) == "docs/running.md | Running\nRun `helix serve` on port 11437.\n"
    assert embedding_text(_gene("plain words", "text", None, "", None)) == "plain words"


def test_code_and_prose_have_their_own_word_piece_caps() -> None:
    cfg = load_config().replace(embedding={"max_tokens": 100, "code_max_tokens": 20}).embedding
    assert embedding_tokens(_gene(PY, "code", "python", "a.py", None), cfg) == 20
    assert embedding_tokens(_gene("words", "markdown", None, "a.md", None), cfg) == 100


def test_docstring_words_after_a_keyword_are_not_defined_names() -> None:
    """`basicConfig`'s docstring has a line starting "type of": "of" is no name the gene defines."""
    code = ('def basic_config(**kwargs):\n    """Set up the root logger.\n\n    filemode  The\n'
            '              type of file to open.\n    class of the handler to make\n    """\n'
            'class Loader(Base):\n    pass\n')
    head = embedding_text(_gene(code, "code", "python", "/src/log/setup.py", None)).split("\n", 1)[0]
    assert head == "log setup | basic config, loader"
