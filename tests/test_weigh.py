"""Trust verdicts over real files: what an agent asking /context/packet would see."""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from pathlib import Path

import pytest

from helix_context.config import WeighSettings
from helix_context.models import Gene, Provenance, QuerySignals, Retrieval, ScoredGene
from helix_context.weigh import (
    TASK_TYPES,
    SourceCache,
    authority,
    check_source,
    coordinate_confidence,
    freshness,
    refresh_targets,
    specificity,
    weigh_retrieval,
)

SETTINGS = WeighSettings()

CODE = '''def handle(request):
    """Serve one request."""
    return respond(request)
'''


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def ingest(
    path: Path,
    *,
    content: str | None = None,
    content_type: str = "code",
    symbol: str | None = "handle",
    volatility: str = "stable",
    authority_class: str = "primary",
    ingested_ago: float = 1.0,
    now: float | None = None,
    lines: tuple[int, int] = (1, 3),
) -> Gene:
    """A gene as ingest would record it from the file as it is right now."""
    now = time.time() if now is None else now
    data = path.read_bytes()
    text = content if content is not None else data.decode("utf-8")
    return Gene(
        gene_id=hashlib.sha256(f"{path}:{lines}:{text}".encode()).hexdigest()[:16],
        content=text,
        content_type=content_type,
        language="python" if content_type == "code" else None,
        source_path=str(path),
        project="demo",
        start_line=lines[0],
        end_line=lines[1],
        symbol=symbol,
        provenance=Provenance(
            source_kind="file",
            volatility_class=volatility,
            authority_class=authority_class,
            observed_at=now - ingested_ago,
            last_verified_at=now - ingested_ago,
            source_mtime=os.stat(path).st_mtime,
            source_hash=hashlib.sha256(data).hexdigest(),
        ),
    )


def retrieval(*genes: Gene, text: str = "how is a request handled", path_tokens: tuple[str, ...] = (), tier: str = "focused") -> Retrieval:
    items = tuple(ScoredGene(g, score=1.0 - 0.1 * i, signals={"fts": 0.5}) for i, g in enumerate(genes))
    return Retrieval(query=QuerySignals(text=text, path_tokens=path_tokens), items=items, tier=tier, candidates=len(items))


def only_item(packet):
    items = packet.verified + packet.stale_risk
    assert len(items) == 1
    return items[0]


# ---------------------------------------------------------------- the live source check


def test_freshly_ingested_file_is_verified_even_for_strict_tasks(tmp_path):
    gene = ingest(write(tmp_path / "server.py", CODE))
    for task in ("edit", "quote", "debug", "plan"):
        packet = weigh_retrieval(retrieval(gene), task, SETTINGS)
        item = only_item(packet)
        assert item.verdict == "verified", (task, item.reason)
        assert item.source_check == "unchanged"
        assert packet.verified == (item,)
        assert packet.refresh_targets == ()
        assert not packet.known_empty


def test_editing_the_file_right_after_ingest_needs_refresh(tmp_path):
    path = write(tmp_path / "server.py", CODE)
    gene = ingest(path, ingested_ago=1.0)
    write(path, CODE.replace("respond", "reject"))
    packet = weigh_retrieval(retrieval(gene), "plan", SETTINGS)
    item = only_item(packet)
    assert item.verdict == "needs_refresh"
    assert item.source_check == "changed"
    assert packet.verified == ()
    assert packet.stale_risk == (item,)  # listed with the stale items, flagged by its verdict
    assert [(t.target_kind, t.source_id, t.priority) for t in packet.refresh_targets] == [("file", str(path), 1)]


def test_edit_that_keeps_the_recorded_mtime_is_still_caught(tmp_path):
    # a coarse-mtime filesystem, or a tool that restores mtimes: the mtime says
    # "same" but the file was rewritten around ingest time
    path = write(tmp_path / "server.py", CODE)
    gene = ingest(path, ingested_ago=0.5)
    recorded = os.stat(path).st_mtime_ns
    write(path, CODE.replace("respond", "reject"))
    os.utime(path, ns=(recorded, recorded))
    assert os.stat(path).st_mtime == gene.provenance.source_mtime
    assert check_source(gene).status == "changed"
    assert only_item(weigh_retrieval(retrieval(gene), "edit", SETTINGS)).verdict == "needs_refresh"


def test_deleted_file_needs_refresh(tmp_path):
    path = write(tmp_path / "server.py", CODE)
    gene = ingest(path)
    path.unlink()
    packet = weigh_retrieval(retrieval(gene), "explain", SETTINGS)
    item = only_item(packet)
    assert item.verdict == "needs_refresh"
    assert item.source_check == "missing"
    assert packet.refresh_targets[0].target_kind == "file"
    assert packet.refresh_targets[0].priority == 1
    assert "gone" in packet.refresh_targets[0].reason


def test_vanished_directory_counts_as_missing(tmp_path):
    path = write(tmp_path / "pkg" / "server.py", CODE)
    gene = ingest(path)
    path.unlink()
    (tmp_path / "pkg").rmdir()
    write(tmp_path / "pkg", "now a file, not a folder")
    assert check_source(gene).status == "missing"


def test_touch_without_content_change_stays_verified(tmp_path):
    path = write(tmp_path / "server.py", CODE)
    gene = ingest(path)
    later = gene.provenance.source_mtime + 120
    os.utime(path, (later, later))
    check = check_source(gene)
    assert check.status == "unchanged"
    item = only_item(weigh_retrieval(retrieval(gene), "edit", SETTINGS))
    assert item.verdict == "verified"
    assert item.source_check == "unchanged"


def test_old_but_unchanged_code_is_reverified_by_the_live_check(tmp_path):
    path = write(tmp_path / "server.py", CODE)
    old = time.time() - 31 * 86_400
    os.utime(path, (old, old))
    gene = ingest(path, ingested_ago=30 * 86_400)  # indexed a month ago, untouched since
    assert freshness(gene, time.time(), SETTINGS) < 0.05  # by provenance alone it is ancient
    item = only_item(weigh_retrieval(retrieval(gene), "edit", SETTINGS))
    assert item.verdict == "verified", item.reason
    assert item.freshness == pytest.approx(1.0)
    # and the mtime alone settled it: no need to read the file, whichever way
    # ingest wrote the stamp down
    for recorded in (os.stat(path).st_mtime, os.stat(path).st_mtime_ns / 1e9):
        same = Gene(**{**gene.__dict__, "provenance": Provenance(**{**gene.provenance.__dict__, "source_mtime": recorded})})
        cache = SourceCache()
        assert check_source(same, cache).status == "unchanged"
        assert cache.hashes == 0


def test_mtime_moved_without_a_recorded_hash_is_not_trusted(tmp_path):
    path = write(tmp_path / "app.toml", "port = 1\n")
    gene = ingest(path, content_type="config", symbol=None)
    gene = Gene(**{**gene.__dict__, "provenance": Provenance(**{**gene.provenance.__dict__, "source_hash": None})})
    later = gene.provenance.source_mtime + 60
    os.utime(path, (later, later))
    assert check_source(gene).status == "changed"


def test_genes_sharing_a_file_stat_and_hash_it_once(tmp_path):
    path = write(tmp_path / "server.py", CODE * 50)
    genes = [ingest(path, lines=(i, i + 2)) for i in range(1, 40, 3)]
    later = genes[0].provenance.source_mtime + 60
    os.utime(path, (later, later))  # mtime moved: content must be hashed
    cache = SourceCache()
    statuses = {check_source(g, cache).status for g in genes}
    assert statuses == {"unchanged"}
    assert cache.stats == 1
    assert cache.hashes == 1


def test_two_genes_from_one_changed_file_give_one_refresh_target(tmp_path):
    path = write(tmp_path / "server.py", CODE * 2)
    a, b = ingest(path, lines=(1, 3)), ingest(path, lines=(4, 6))
    write(path, "gone\n")
    packet = weigh_retrieval(retrieval(a, b), "debug", SETTINGS)
    assert [i.verdict for i in packet.stale_risk] == ["needs_refresh", "needs_refresh"]
    assert len(packet.refresh_targets) == 1
    assert packet.refresh_targets[0].source_id == str(path)


def test_gene_without_a_file_source_is_unknown_and_not_verified_for_quote_or_edit(tmp_path):
    gene = Gene(
        gene_id="sess1",
        content="The deploy target is staging-2.",
        content_type="text",
        language=None,
        source_path=None,
        project=None,
        start_line=1,
        end_line=1,
        provenance=Provenance(source_kind="session", volatility_class="stable", observed_at=time.time() - 5),
    )
    assert check_source(gene).status == "unknown"
    for task in ("quote", "edit"):
        item = only_item(weigh_retrieval(retrieval(gene), task, SETTINGS))
        assert item.verdict == "stale_risk"
        assert item.source_check == "unknown"
    # explaining from it is fine: fresh, primary, plain prose
    assert only_item(weigh_retrieval(retrieval(gene), "explain", SETTINGS)).verdict == "verified"


# ---------------------------------------------------------------- freshness and task tolerance


def test_old_hot_log_is_stale_for_debug_and_plan_tolerates_a_medium_aged_one(tmp_path):
    log = write(tmp_path / "logs" / "app.log", "12:00:01 ERROR db timeout after 30s\n12:00:02 INFO retrying\n")
    kw = dict(content_type="log", symbol=None, volatility="hot", lines=(1, 2))
    old = ingest(log, ingested_ago=3 * 3600, **kw)
    medium = ingest(log, ingested_ago=5 * 60, **kw)
    just_now = ingest(log, ingested_ago=5, **kw)

    assert only_item(weigh_retrieval(retrieval(old), "debug", SETTINGS)).verdict == "stale_risk"
    assert only_item(weigh_retrieval(retrieval(old), "plan", SETTINGS)).verdict == "stale_risk"

    debug_item = only_item(weigh_retrieval(retrieval(medium), "debug", SETTINGS))
    assert debug_item.verdict == "stale_risk"
    assert debug_item.source_check == "unchanged"  # the file is fine; the information is old
    assert "hot" in debug_item.reason
    assert only_item(weigh_retrieval(retrieval(medium), "plan", SETTINGS)).verdict == "verified"

    assert only_item(weigh_retrieval(retrieval(just_now), "debug", SETTINGS)).verdict == "verified"

    # a stale item is something to refresh, below a changed file in urgency
    packet = weigh_retrieval(retrieval(old), "debug", SETTINGS)
    assert [(t.target_kind, t.priority) for t in packet.refresh_targets] == [("file", 2)]


def test_freshness_decays_by_volatility_class():
    now = 1_000_000.0

    def gene(volatility, age):
        return Gene("g", "x", "text", None, None, None, 1, 1,
                    provenance=Provenance(source_kind="api", volatility_class=volatility, observed_at=now - age))

    assert freshness(gene("stable", 0), now, SETTINGS) == 1.0
    assert freshness(gene("stable", SETTINGS.half_life_stable_s), now, SETTINGS) == pytest.approx(math.exp(-1))
    hour = 3600
    assert freshness(gene("hot", hour), now, SETTINGS) < freshness(gene("medium", hour), now, SETTINGS) < freshness(gene("stable", hour), now, SETTINGS)
    assert freshness(gene("stable", -60), now, SETTINGS) == 1.0  # clock skew is not "fresher than new"
    never = Gene("g", "x", "text", None, None, None, 1, 1, provenance=Provenance(source_kind="api"))
    assert freshness(never, now, SETTINGS) == 0.0


def test_authority_and_specificity_rank_evidence(tmp_path):
    path = write(tmp_path / "server.py", CODE)
    primary = ingest(path)
    inferred = ingest(path, authority_class="inferred")
    assert authority(primary) == 1.0 and authority(inferred) == 0.45
    assert authority(ingest(path, authority_class="derived")) == 0.75
    # an inferred summary is never enough to edit from, even when brand new
    assert only_item(weigh_retrieval(retrieval(inferred), "edit", SETTINGS)).verdict == "stale_risk"

    code = specificity(primary)
    config = specificity(ingest(write(tmp_path / "a.toml", "port = 1\n"), content_type="config", symbol=None))
    prose = specificity(ingest(write(tmp_path / "README.md", "# Intro\ntext\n"), content_type="markdown", symbol=None))
    log = specificity(ingest(write(tmp_path / "x.log", "ERROR\n"), content_type="log", symbol=None))
    assert code >= config > prose > log


def test_unknown_task_type_is_a_value_error_listing_the_valid_ones(tmp_path):
    gene = ingest(write(tmp_path / "server.py", CODE))
    with pytest.raises(ValueError) as err:
        weigh_retrieval(retrieval(gene), "refactor", SETTINGS)
    message = str(err.value)
    assert "refactor" in message
    for task in TASK_TYPES:
        assert task in message
    assert weigh_retrieval(retrieval(gene), " Edit ", SETTINGS).task_type == "edit"


# ---------------------------------------------------------------- coordinate confidence


def test_query_naming_server_py_answered_from_client_py_is_downgraded(tmp_path):
    client = ingest(write(tmp_path / "src" / "client.py", CODE))
    query_tokens = ("server.py", "server")  # as retrieve/query.py extracts them: name and stem
    packet = weigh_retrieval(
        retrieval(client, text="why does server.py drop requests", path_tokens=query_tokens), "explain", SETTINGS
    )
    assert packet.coordinate_confidence < SETTINGS.coordinate_floor
    item = only_item(packet)
    assert item.verdict == "stale_risk"
    assert item.source_check == "unchanged"  # nothing wrong with the file itself
    assert "server.py" in item.reason
    assert any("server.py" in note for note in packet.notes)
    query_targets = [t for t in packet.refresh_targets if t.target_kind == "query"]
    assert [(t.source_id, t.priority) for t in query_targets] == [("server.py", 3)]
    assert all(t.target_kind == "query" for t in packet.refresh_targets)  # re-ingesting client.py would not help
    # an extension token does not rescue it: client.py is also a .py file
    with_ext = QuerySignals(text="", path_tokens=("server.py", "server", ".py", "py"))
    assert coordinate_confidence(with_ext, [client.source_path]) < SETTINGS.coordinate_floor


def test_the_named_file_itself_keeps_its_verdict(tmp_path):
    server = ingest(write(tmp_path / "src" / "server.py", CODE))
    client = ingest(write(tmp_path / "src" / "client.py", CODE))
    query = QuerySignals(text="server.py", path_tokens=("server.py", "py"))
    assert coordinate_confidence(query, [ScoredGene(server, 1.0), ScoredGene(client, 0.5)]) == 1.0
    packet = weigh_retrieval(retrieval(server, client, text="server.py", path_tokens=("server.py", "py")), "edit", SETTINGS)
    assert len(packet.verified) == 2

    many = QuerySignals(text="", path_tokens=("server.py", "client.py", "db.py", "cache.py", "auth.py"))
    assert coordinate_confidence(many, [str(server.source_path)]) == pytest.approx(0.2)
    packet = weigh_retrieval(
        Retrieval(many, (ScoredGene(server, 1.0),), tier="focused"), "edit", SETTINGS
    )
    assert only_item(packet).verdict == "verified"  # it is exactly what was asked for
    assert {t.source_id for t in packet.refresh_targets} == {"client.py", "db.py", "cache.py", "auth.py"}


def test_items_in_a_named_directory_are_on_target(tmp_path):
    fusion = ingest(write(tmp_path / "retrieve" / "fusion.py", CODE))
    tokens = ("retrieve", "assemble", "weigh", "compress")
    packet = weigh_retrieval(retrieval(fusion, path_tokens=tokens), "edit", SETTINGS)
    assert packet.coordinate_confidence == pytest.approx(0.25)
    assert only_item(packet).verdict == "verified"
    assert {t.source_id for t in packet.refresh_targets} == {"assemble", "weigh", "compress"}


def test_coordinate_confidence_matches_dirs_paths_and_windows_separators(tmp_path):
    paths = [str(tmp_path / "helix_context" / "retrieve" / "fusion.py")]
    assert coordinate_confidence(QuerySignals(text="no paths here"), paths) == 1.0
    assert coordinate_confidence(QuerySignals(text="", path_tokens=("retrieve",)), paths) == 1.0
    assert coordinate_confidence(QuerySignals(text="", path_tokens=("retrieve/fusion.py",)), paths) == 1.0
    assert coordinate_confidence(QuerySignals(text="", path_tokens=("Retrieve\\Fusion.py",)), paths) == 1.0
    assert coordinate_confidence(QuerySignals(text="", path_tokens=("assemble/fusion.py",)), paths) == 0.0
    assert coordinate_confidence(QuerySignals(text="", path_tokens=(".rs",)), paths) == 0.0
    assert coordinate_confidence(QuerySignals(text="", path_tokens=("server.py",)), []) == 0.0


def test_a_path_written_in_full_counts_as_one_coordinate(tmp_path):
    # retrieve/query.py passes "helix_context/weigh.py" on as its segments; the
    # right directory with the wrong file must not pass for a match
    tokens = ("helix_context", "weigh.py", "weigh")
    query = QuerySignals(text="fix freshness in helix_context/weigh.py", path_tokens=tokens)
    client = str(tmp_path / "helix_context" / "client.py")
    weigh = str(tmp_path / "helix_context" / "weigh.py")
    assert coordinate_confidence(query, [client]) == 0.0
    assert coordinate_confidence(query, [weigh]) == 1.0
    # prose with a slash is not a path the answer has to cover
    prose = QuerySignals(text="see ./src/server.py and/or the docs", path_tokens=(".", "src", "server.py", "server", "and", "or"))
    assert coordinate_confidence(prose, [str(tmp_path / "src" / "server.py")]) == 1.0


# ---------------------------------------------------------------- known empty and the wire shape


def test_empty_retrieval_is_known_empty_with_a_note_and_a_query_target():
    packet = weigh_retrieval(
        Retrieval(QuerySignals(text="kubernetes ingress timeout"), (), tier="abstain"), "ops", SETTINGS
    )
    assert packet.known_empty is True
    assert packet.verified == () and packet.stale_risk == ()
    assert "nothing relevant is indexed" in packet.notes[0]
    assert "ingest" in packet.notes[0]
    assert [(t.target_kind, t.priority) for t in packet.refresh_targets] == [("query", 1)]
    assert packet.to_dict()["known_empty"] is True


def test_empty_retrieval_naming_a_file_suggests_ingesting_it():
    query = QuerySignals(text="what does deploy.sh do", path_tokens=("deploy.sh",))
    packet = weigh_retrieval(Retrieval(query, (), tier="tight"), "explain", SETTINGS)
    assert packet.known_empty
    assert packet.coordinate_confidence == 0.0
    assert [(t.target_kind, t.source_id) for t in packet.refresh_targets] == [("query", "deploy.sh")]


def test_abstaining_retrieval_never_verifies_what_it_carried(tmp_path):
    gene = ingest(write(tmp_path / "server.py", CODE))
    packet = weigh_retrieval(retrieval(gene, tier="abstain"), "plan", SETTINGS)
    assert packet.known_empty
    assert only_item(packet).verdict == "stale_risk"


def test_packet_to_dict_is_json_ready(tmp_path):
    fresh = ingest(write(tmp_path / "server.py", CODE))
    changed_path = write(tmp_path / "client.py", CODE)
    changed = ingest(changed_path, content="x" * 500, lines=(1, 40))
    write(changed_path, "rewritten\n")
    packet = weigh_retrieval(retrieval(fresh, changed), "review", SETTINGS)
    data = json.loads(json.dumps(packet.to_dict()))
    assert set(data) >= {
        "query", "task_type", "verified", "stale_risk", "refresh_targets", "notes",
        "coordinate_confidence", "known_empty", "tier",
    }
    assert [i["src"] for i in data["verified"]] == [f"{tmp_path / 'server.py'}:1-3"]
    stale = data["stale_risk"][0]
    assert stale["verdict"] == "needs_refresh"
    assert stale["source_check"] == "changed"
    assert len(stale["preview"]) <= 201
    assert data["refresh_targets"][0] == {
        "target_kind": "file", "source_id": str(changed_path), "reason": data["refresh_targets"][0]["reason"], "priority": 1,
    }
    assert refresh_targets(packet) == packet.refresh_targets
    assert refresh_targets(packet.stale_risk) == packet.refresh_targets
