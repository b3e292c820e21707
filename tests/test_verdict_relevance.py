"""Verdicts carry relevance: fresh but off-topic items are never "verified", and a query with nothing
relevant indexed is "known empty" — first with hand-built retrievals, then over HTTP on a real tree."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest

from helix_context.config import WeighSettings
from helix_context.models import Gene, Provenance, QuerySignals, Retrieval, ScoredGene
from helix_context.weigh import relevance_threshold, weigh_retrieval
from helix_context.weigh.relevance import ABSENT_WORD_FACTOR, gene_words, idf_weights, query_words, relevance

SETTINGS = WeighSettings()

FLASK_LIKE = '''def register_blueprint(app, blueprint, url_prefix=None):
    """Register a blueprint on the application under a URL prefix."""
    app.blueprints[blueprint.name] = blueprint
    for rule in blueprint.deferred:
        rule(app, url_prefix)
'''


def _gene(path: Path, text: str) -> Gene:
    path.write_text(text, encoding="utf-8")
    now = time.time()
    return Gene(gene_id=hashlib.sha256(text.encode()).hexdigest()[:16], content=text, content_type="code",
                language="python", source_path=str(path), project="demo", start_line=1,
                end_line=text.count("\n"), symbol="register_blueprint",
                provenance=Provenance(observed_at=now - 60, last_verified_at=now - 60,
                                      source_mtime=os.stat(path).st_mtime,
                                      source_hash=hashlib.sha256(path.read_bytes()).hexdigest()))


def _retrieval(gene: Gene, text: str) -> Retrieval:
    words = tuple(w for w in text.lower().split() if len(w) > 2)
    return Retrieval(QuerySignals(text=text, terms=words), (ScoredGene(gene, 1.0, {"fts": 1.0}),), "focused", 1)


def test_fresh_but_off_topic_item_is_not_verified_and_the_answer_is_known_empty(tmp_path):
    gene = _gene(tmp_path / "blueprints.py", FLASK_LIKE)
    query = "kubernetes schedule pods onto nodes"
    weights = idf_weights(query_words(_retrieval(gene, query).query), {"schedul": 3}, 1000)
    packet = weigh_retrieval(_retrieval(gene, query), "plan", SETTINGS, term_weights=weights)
    assert packet.known_empty
    assert packet.verified == ()
    assert packet.coordinate_confidence < 0.25
    assert packet.items[0].relevance < SETTINGS.relevance_floor
    assert any("known empty" in note and "kubernet" in note for note in packet.notes)
    assert [(t.target_kind, t.priority) for t in packet.refresh_targets] == [("query", 1)]


def test_fresh_and_relevant_item_is_verified_with_high_coordinate_confidence(tmp_path):
    gene = _gene(tmp_path / "blueprints.py", FLASK_LIKE)
    query = "register a blueprint under a url prefix"
    retrieval = _retrieval(gene, query)
    words = query_words(retrieval.query)
    weights = idf_weights(words, {w: 5 for w in words}, 1000)
    for task in ("plan", "review", "edit"):
        packet = weigh_retrieval(retrieval, task, SETTINGS, term_weights=weights)
        assert not packet.known_empty
        assert [i.verdict for i in packet.items] == ["verified"], packet.items[0].reason
        assert packet.coordinate_confidence > 0.9


def test_partly_relevant_item_is_a_lead_not_a_verified_fact(tmp_path):
    gene = _gene(tmp_path / "blueprints.py", FLASK_LIKE)
    query = "register blueprint with oauth scopes tokens refresh"
    retrieval = _retrieval(gene, query)
    words = query_words(retrieval.query)
    weights = idf_weights(words, {w: 5 for w in words}, 1000)  # every word indexed somewhere, equally rare
    item = weigh_retrieval(retrieval, "edit", SETTINGS, term_weights=weights).items[0]
    assert SETTINGS.relevance_floor <= item.relevance < relevance_threshold("edit", SETTINGS)
    assert item.verdict == "stale_risk" and item.reason.startswith("relevance")


def test_a_word_missing_from_the_genome_weighs_more_than_any_indexed_word():
    weights = idf_weights(["kubernet", "pod", "schedul"], {"schedul": 1}, 500)
    assert weights["kubernet"] == pytest.approx(weights["pod"])
    assert weights["kubernet"] > ABSENT_WORD_FACTOR * 0.99 * weights["schedul"]


def test_relevance_matches_stems_identifier_parts_and_the_path(tmp_path):
    gene = _gene(tmp_path / "blueprints.py", FLASK_LIKE)
    words = gene_words(gene)
    assert {"regist", "blueprint", "prefix", "url"} <= words  # "registering" / "prefixes" would stem the same
    assert relevance({"blueprint": 1.0, "kubernet": 1.0}, words) == pytest.approx(0.5)
    assert relevance({}, words) == 1.0


def test_task_strictness_moves_the_relevance_bar():
    assert relevance_threshold("plan", SETTINGS) < relevance_threshold("review", SETTINGS) \
        < relevance_threshold("edit", SETTINGS) <= 1.0


# ── over HTTP, on a real tree ──


@pytest.fixture
def server(settings, server_factory, tmp_path: Path):
    root = tmp_path / "web"
    root.mkdir()
    (root / "blueprints.py").write_text(FLASK_LIKE, encoding="utf-8")
    (root / "sessions.py").write_text('''def open_session(app, request):
    """Load the signed session cookie of a request."""
    cookie = request.cookies.get(app.session_cookie_name)
    return app.session_interface.load(cookie)
''', encoding="utf-8")
    (root / "README.md").write_text("# web\n\nA small web framework: blueprints, sessions, url routing.\n",
                                    encoding="utf-8")
    srv = server_factory(settings.replace(embedding={"enabled": False}, ner={"enabled": False}))
    srv.app.state.helix.ingest_path(root, embed=False)
    return srv


def _packet(server, query: str, task: str = "edit") -> dict:
    with server.client() as client:
        response = client.post("/context/packet", json={"query": query, "task_type": task})
    assert response.status_code == 200, response.text
    return response.json()


def test_http_packet_for_an_absent_tool_is_known_empty_and_verifies_nothing(server):
    for task in ("plan", "edit"):
        data = _packet(server, "kubernetes schedule pods onto nodes", task)
        assert data["known_empty"] is True
        assert data["verified"] == []
        assert data["coordinate_confidence"] < 0.3
        assert data["refresh_targets"] and data["refresh_targets"][0]["target_kind"] == "query"


def test_http_packet_for_an_indexed_function_verifies_it(server):
    data = _packet(server, "how does open_session load the signed session cookie")
    assert data["known_empty"] is False
    assert data["verified"] and data["verified"][0]["source_id"].endswith("sessions.py")
    assert data["verified"][0]["relevance"] >= relevance_threshold("edit", SETTINGS)
    assert data["coordinate_confidence"] >= relevance_threshold("edit", SETTINGS)
