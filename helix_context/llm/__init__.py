"""The LLM wing: everything that talks to a model server (Ollama or any OpenAI-compatible one).

- ``wire``       OpenAI request/response models and the OpenAI ⇄ Ollama translation
- ``upstream``   the upstream client (kind detection, errors with advice) and the proxy's failures
- ``lean_http``  a keep-alive HTTP/1.1 client for ``http://`` upstreams (the hot path)
- ``streaming``  the SSE / NDJSON stream relay
- ``chat``       the chat proxy: query from the last user message, inject context, forward, record
- ``sessions``   the session recorder (exchanges into the genome's session buffer)
- ``profiles``   what a model name implies (size, no-think, context window) and ``num_ctx_for``
- ``ribosome``   the optional small-LLM helper and session consolidation

Nothing outside this package makes network calls to model servers (the supervisor's Ollama
``/api/ps`` watcher aside). Import the module you need; this file re-exports nothing, so that
importing one part does not load the others.
"""
