"""Tags: identifiers, paths, versions, URLs and named entities per chunk."""

from __future__ import annotations

import sys
import textwrap

import pytest

from helix_context.ingest.chunk import chunk_text
from helix_context.ingest.tag import Tagger
from helix_context.models import Chunk


def chunk(content: str, content_type: str = "code", language: str | None = "python",
          symbol: str | None = None) -> Chunk:
    return Chunk(content, content_type, language, 1, content.count("\n") + 1, symbol)


@pytest.fixture(scope="module")
def plain() -> Tagger:
    return Tagger(ner_enabled=False)


@pytest.fixture(scope="module")
def model_tagger() -> Tagger:
    t = Tagger()
    if t.status in ("off", "rules"):
        pytest.skip("no spaCy English model installed")
    return t


CODE = textwrap.dedent('''\
    import os.path

    class ChunkStore(BaseStore):
        """Keeps chunks; see https://example.com/docs/store.html and helix_context/genome/store.py."""

        def add_many(self, chunks):
            total_count = 0
            for c in chunks:
                self.db.execute_many(c)
                total_count += 1
            maxRetries = os.path.join("a", "b")
            return HTTPServer(total_count, maxRetries)  # requires spacy>=3.7 and v2 API, release 1.2.3
    ''')


def test_code_tags(plain: Tagger) -> None:
    [tags] = plain.tag_many([chunk(CODE, symbol="ChunkStore")], "/home/me/proj/helix_context/genome/store.py")
    low = [t.casefold() for t in tags]
    assert tags[0] == "ChunkStore", "the symbol comes first"
    for expected in ("add_many", "store.py", "https://example.com/docs/store.html",
                     "helix_context/genome/store.py", "os.path.join", "db.execute_many", "total_count",
                     "maxRetries", "HTTPServer", "3.7", "v2", "1.2.3", "genome", "helix_context", "BaseStore"):
        assert expected.casefold() in low, expected
    # `self.` is not part of a tag; a path's directories come from the source path too
    assert not any(t.startswith("self.") for t in tags)
    assert len(low) == len(set(low)), "deduplicated case-insensitively"


def test_order_is_stable_and_most_specific_first(plain: Tagger) -> None:
    c = chunk(CODE, symbol="ChunkStore.add_many")
    a = plain.tag_many([c], "src/app/store.py")
    b = plain.tag_many([c], "src/app/store.py")
    assert a == b
    tags = a[0]
    assert tags[:2] == ("ChunkStore.add_many", "add_many")
    assert tags.index("store.py") < tags.index("total_count")
    assert tags.index("total_count") < tags.index("1.2.3")
    assert tags[-1] == "app", "the source path's directories come last"


def test_frequent_identifiers_before_rare_ones(plain: Tagger) -> None:
    text = "rare_name = 1\n" + "common_name += 1\n" * 5
    [tags] = plain.tag_many([chunk(text)], None)
    assert tags.index("common_name") < tags.index("rare_name")


def test_tags_are_capped(plain: Tagger) -> None:
    text = "\n".join(f"value_{i} = other_{i}" for i in range(200))
    [tags] = plain.tag_many([chunk(text)], "a/b/c.py")
    assert len(tags) == 48
    small = Tagger(ner_enabled=False, max_tags=5)
    assert len(small.tag_many([chunk(text)], None)[0]) == 5


def test_case_insensitive_dedup(plain: Tagger) -> None:
    [tags] = plain.tag_many([chunk("MAX_SIZE = 1\nmax_size = 2\nMax_Size = 3\n")], None)
    assert [t for t in tags if t.casefold() == "max_size"] == ["MAX_SIZE"]


def test_windows_path_and_paths_in_prose(plain: Tagger) -> None:
    text = "Edit ~/.helix/helix.toml or C:\\Users\\me\\helix.toml, then run ./scripts/start.sh and/or restart."
    [tags] = plain.tag_many([chunk(text, "text", None)], "C:\\Users\\me\\proj\\notes\\todo.txt")
    for expected in ("todo.txt", "~/.helix/helix.toml", "C:\\Users\\me\\helix.toml", "./scripts/start.sh", "notes"):
        assert expected in tags, expected
    assert "and/or" not in tags


def test_every_chunk_gets_a_tuple_in_order(plain: Tagger) -> None:
    chunks = [chunk("alpha_one = 1"), chunk("beta_two = 2"), chunk("", "text", None)]
    out = plain.tag_many(chunks, None)
    assert len(out) == 3 and all(isinstance(t, tuple) for t in out)
    assert "alpha_one" in out[0] and "beta_two" in out[1]
    assert plain.tag_many([], None) == []


def test_ner_finds_people_and_organisations(model_tagger: Tagger) -> None:
    prose = ("Satya Nadella announced on Tuesday that Microsoft will open a new research lab in Berlin. "
             "The project is led by Angela Merkel's former adviser and funded by the European Union.")
    [tags] = model_tagger.tag_many([chunk(prose, "text", None)], None)
    assert "Microsoft" in tags or "Satya Nadella" in tags
    assert model_tagger.status.startswith("en_core_web_sm")


def test_ner_runs_on_prose_only_and_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Code chunks do not go to the model; prose goes in one batch, each text cut to ner_chars."""
    seen: list[list[str]] = []

    class FakeDoc:
        def __init__(self, text: str) -> None:
            self.ents = [type("Ent", (), {"text": "Acme Corp", "label_": "ORG"})()] if "Acme" in text else []

    class FakeNlp:
        def pipe(self, texts, batch_size=64):
            texts = list(texts)
            seen.append(texts)
            return [FakeDoc(t) for t in texts]

    t = Tagger(ner_chars=200)
    t._nlp, t._status = FakeNlp(), "fake"
    chunks = [chunk("class Acme:\n    pass\n"),
              chunk("Acme makes widgets. " * 40, "text", None),
              chunk("# Title\n\nAcme is here.\n\n```\nAcme in code\n```\n", "markdown", "markdown"),
              chunk("2024-01-01 12:00:00 ERROR Acme failed", "log", None)]
    out = t.tag_many(chunks, None)
    assert len(seen) == 1 and len(seen[0]) == 3, "one batch, prose chunks only"
    assert all(len(x) <= 200 for x in seen[0])
    assert "Acme in code" not in seen[0][1], "fenced code is not sent to NER"
    assert "Acme Corp" not in out[0] and "Acme Corp" in out[1]


def test_rules_fallback_when_the_model_is_missing() -> None:
    t = Tagger(model="no_such_model_xyz")
    assert t.status == "rules"
    prose = "Contact Jane Doe at jane.doe@example.com or write to Acme Widgets Inc about the New York office."
    [tags] = t.tag_many([chunk(prose, "text", None)], None)
    assert "jane.doe@example.com" in tags
    assert "Jane Doe" in tags
    assert any("Acme Widgets" in x for x in tags)
    forced = Tagger(model="rules")
    assert forced.status == "rules"


def test_spacy_missing_means_off_and_regex_tags_still_work(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "spacy", None)  # `import spacy` raises ImportError
    t = Tagger()
    assert t.status == "off"
    [tags] = t.tag_many([chunk("Jane Doe wrote total_count in helix_context/config.py", "text", None)], None)
    assert "total_count" in tags and "helix_context/config.py" in tags


def test_disabled_ner_is_off(plain: Tagger) -> None:
    assert plain.status == "off"


def test_markdown_chunks_from_the_chunker(plain: Tagger) -> None:
    md = "# Install Guide\n\nRun `pip install helix-context==0.1.0` then open http://127.0.0.1:11437/dashboard.\n"
    chunks = chunk_text(md, "markdown", "markdown")
    [tags] = plain.tag_many(chunks, "docs/install.md")
    assert tags[0] == "Install Guide"
    assert "install.md" in tags and "http://127.0.0.1:11437/dashboard" in tags and "0.1.0" in tags


def test_the_model_reads_at_most_ner_file_chars_of_a_file_and_later_prose_gets_regex_names(
        model_tagger: Tagger, monkeypatch: pytest.MonkeyPatch) -> None:
    """A big document costs the model a fixed share (its opening); names further down still become tags."""
    sections = [f"# Part {i}\n\nThe driver was written by Jay Vosburgh and Mitch Williams for Intel Corporation "
                f"in release {i}. It bonds Ethernet links.\n" for i in range(30)]
    chunks = chunk_text("\n".join(sections), "markdown", "rst", max_chars=200)
    assert len(chunks) >= 20
    tagger = Tagger(model=model_tagger.status, ner_file_chars=250)
    assert tagger.status == model_tagger.status
    fed: list[str] = []
    real_pipe = tagger._nlp.pipe

    def spy(texts, **kw):  # records what reaches the real model
        texts = list(texts)
        fed.extend(texts)
        return real_pipe(texts, **kw)

    monkeypatch.setattr(tagger._nlp, "pipe", spy)
    tags = tagger.tag_many(chunks, "Documentation/networking/bonding.rst")
    assert 0 < sum(map(len, fed)) <= 250, "the model saw the file's opening only"
    assert "Jay Vosburgh" in tags[-1] and "Intel Corporation" in tags[-1], "the last section still names them"
    unbounded = Tagger(model=model_tagger.status, ner_file_chars=10**9).tag_many(chunks, None)
    assert "Jay Vosburgh" in unbounded[-1]


def test_ner_keeps_the_vocabulary_bounded(model_tagger: Tagger) -> None:
    """spaCy remembers every new word it tokenises; a big tree of prose must not grow the process with it."""
    nlp = model_tagger._nlp
    if not hasattr(nlp, "memory_zone"):
        pytest.skip("spaCy without memory zones (< 3.8)")
    model_tagger.tag_many([chunk("Zyxqa Vortlemann met Qwexor Industries in Plimbury.", "text", None)], None)
    before = len(nlp.vocab.strings)
    for i in range(50):
        prose = f"Blorvik{i} Quendalor{i} founded Strunmax{i} Holdings with Yarvel{i} Tesk in Dorvanth{i}."
        model_tagger.tag_many([chunk(prose, "text", None)], None)
    assert len(nlp.vocab.strings) - before < 25, "250 new words were tokenised; the vocabulary kept them all"
