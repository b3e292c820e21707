"""[sources] in helix.toml and the environment: polling is a setting, bad values stop start-up with the key named."""

from __future__ import annotations

from pathlib import Path

import pytest

from helix_context.config import load_config
from helix_context.errors import ConfigError


def test_polling_is_configured_and_bad_values_are_refused(tmp_path: Path) -> None:
    assert load_config(env={"HELIX_SOURCES_FORCE_POLLING": "1"}).sources.force_polling is True
    assert load_config(env={}).sources.force_polling is False
    bad = tmp_path / "helix.toml"
    bad.write_text("[sources]\ndebounce_ms = 0\n")
    with pytest.raises(ConfigError, match=r"\[sources\] debounce_ms"):
        load_config(bad, env={})
    bad.write_text("[sources]\nforce_poling = true\n")
    with pytest.raises(ConfigError, match="force_polling"):
        load_config(bad, env={})
