"""helix.toml + HELIX_* environment: a typo or a wrong type stops start-up with the key and the file named."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

import pytest

from helix_context.config import _SECTIONS, load_config
from helix_context.errors import ConfigError

REPO = Path(__file__).resolve().parent.parent


def test_repo_helix_toml_lists_every_setting_with_its_default() -> None:
    text = (REPO / "helix.toml").read_text()
    raw = tomllib.loads(text)
    for name, cls in _SECTIONS.items():
        assert name in raw, f"[{name}] missing from helix.toml"
        defaults = cls()
        for f in dataclasses.fields(cls):
            if getattr(defaults, f.name) is None:  # TOML has no null: an unset setting is shown commented out
                assert f"\n# {f.name} = " in text, f"[{name}] {f.name} missing from helix.toml"
                assert f.name not in raw[name], f"[{name}] {f.name} is set in helix.toml, its default is unset"
                continue
            assert f.name in raw[name], f"[{name}] {f.name} missing from helix.toml"
            value = raw[name][f.name]
            expected = getattr(defaults, f.name)
            assert (tuple(value) if isinstance(value, list) else value) == expected, f"[{name}] {f.name}"


def test_unknown_key_names_key_and_file(tmp_path: Path) -> None:
    cfg = tmp_path / "helix.toml"
    cfg.write_text("[server]\nprot = 1\n")
    with pytest.raises(ConfigError) as err:
        load_config(cfg, env={})
    assert "prot" in str(err.value) and str(cfg) in str(err.value)


def test_a_retired_key_still_loads_and_says_to_delete_it(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """An old helix.toml with [embedding] model_dir (models used to be built into it) must not stop start-up."""
    cfg = tmp_path / "helix.toml"
    cfg.write_text('[embedding]\nmodel_dir = "/somewhere/models"\nbatch_size = 16\n')
    with caplog.at_level("WARNING"):
        settings = load_config(cfg)
    assert settings.embedding.batch_size == 16
    assert any("model_dir" in r.getMessage() and "delete the line" in r.getMessage() for r in caplog.records)


def test_wrong_type_names_key_and_file(tmp_path: Path) -> None:
    cfg = tmp_path / "helix.toml"
    cfg.write_text('[server]\nport = "eleven"\n')
    with pytest.raises(ConfigError) as err:
        load_config(cfg, env={})
    assert "[server] port" in str(err.value) and str(cfg) in str(err.value)


@pytest.mark.parametrize(("section", "key", "value", "says"), [
    ("ingest", "workers", -1, "must be at least 0"),
    ("embedding", "batch_size", 0, "must be at least 1"),
    ("embedding", "max_tokens", 1, "must be at least 2"),
    ("embedding", "code_max_tokens", 0, "must be at least 2"),
    # these loaded and broke answers without a word: every answer "nothing relevant found", every excerpt left out
    ("retrieval", "max_genes", -5, "must be at least 1"),
    ("ingest", "max_file_bytes", -1, "must be at least 1"),
    ("ingest", "max_chunk_chars", 0, "must be at least 200"),
    ("budget", "token_budget", -100, "must be at least 1"),
    ("retrieval", "weight_dense", -1.5, "must be at least 0"),
    ("retrieval", "score_floor", "nan", "must be a finite number"),
    ("retrieval", "weight_fts", "inf", "must be a finite number"),
    ("retrieval", "score_floor", 1.5, "must be at most 1"),
    ("ingest", "max_chunk_chars", 1_000_000, "must be at most 20000"),
    ("server", "port", 70_000, "must be at most 65535"),  # uvicorn bound 70000 mod 65536: a restart loop
    ("server", "port", 0, "must be at least 1"),
    ("watchers", "ollama_url", '"http://localhost:11434x"', "is not a valid URL"),  # a start-up traceback
    ("proxy", "upstream_url", '"http://[::1"', "is not a valid URL"),
    ("telemetry", "endpoint", '"localhost"', "must be a URL like"),
])
def test_numbers_out_of_range_name_key_file_and_bound(tmp_path: Path, section: str, key: str, value: object,
                                                      says: str) -> None:
    cfg = tmp_path / "helix.toml"
    cfg.write_text(f"[{section}]\n{key} = {value}\n")
    with pytest.raises(ConfigError, match=rf"\[{section}\] {key} in .*helix.toml {says}"):
        load_config(cfg, env={})


def test_unknown_section_and_bad_choice(tmp_path: Path) -> None:
    cfg = tmp_path / "helix.toml"
    cfg.write_text("[sever]\nport = 1\n")
    with pytest.raises(ConfigError, match="unknown section"):
        load_config(cfg, env={})
    cfg.write_text('[assembly]\ndecoder_mode = "verbose"\n')
    with pytest.raises(ConfigError, match="full, condensed, minimal, none"):
        load_config(cfg, env={})


def test_broken_toml_is_reported(tmp_path: Path) -> None:
    cfg = tmp_path / "helix.toml"
    cfg.write_text("[server\nport = 1\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(cfg, env={})


def test_environment_overrides(tmp_path: Path) -> None:
    s = load_config(REPO / "helix.toml", env={
        "HELIX_HOME": str(tmp_path), "HELIX_SERVER_PORT": "12000", "HELIX_BUDGET_ZONE": "1",
        "HELIX_DISABLE_HEADROOM": "1", "HELIX_OTEL_ENABLED": "true", "HELIX_ORG": "acme", "HELIX_API_KEY": "k"})
    assert s.server.port == 12000
    assert s.budget.zone_enabled is True
    assert s.assembly.headroom is False
    assert s.telemetry.enabled is True
    assert s.attribution.org == "acme"
    assert s.api_key == "k"
    assert s.genome_path == tmp_path / "genome.db"
    with pytest.raises(ConfigError, match="HELIX_SERVER_PORT"):
        load_config(REPO / "helix.toml", env={"HELIX_SERVER_PORT": "x"})


def test_helix_config_must_exist(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HELIX_CONFIG", str(tmp_path / "nope.toml"))
    with pytest.raises(ConfigError, match="HELIX_CONFIG"):
        load_config()


@pytest.mark.parametrize("url", ["postgresql://carol:pa#ss@127.0.0.1:5432/team", "postgresql://dave:pa?ss@127.0.0.1:x/t",
                                 "postgresql://alice:S3cr3t:w#rd@127.0.0.1:99999/team"])
def test_a_url_that_cannot_be_parsed_is_refused_without_its_password(tmp_path: Path, url: str) -> None:
    """The message quoted the raw value: a password holding an unencoded # ? / or @ was printed whole."""
    cfg = tmp_path / "helix.toml"
    cfg.write_text(f'[proxy]\nupstream_url = "{url}"\n')
    with pytest.raises(ConfigError) as info:
        load_config(cfg, env={})
    message = str(info.value)
    assert "upstream_url" in message and "***@" in message, message
    for secret in ("pa#ss", "pa?ss", "S3cr3t", "w#rd"):
        assert secret not in message, message

