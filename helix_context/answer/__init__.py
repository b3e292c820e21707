"""The answer stage: what a query gets back once retrieval has ranked the genes.

- ``assemble``  the expressed context for ``/context`` (budget, layout per model size, compression)
- ``packet``    the agent-facing ``/context/packet`` (pointers, trust verdicts, refresh plan)
- ``compress``  one gene's text compressed for its content type, keeping every critical token;
  its parts: ``compress_critical`` (which tokens must survive), ``compress_restore`` (putting
  back the lines that held them), ``compress_python`` (keeping Python parseable) and
  ``compress_fit`` (cutting to a token budget)
"""
