"""The faces: the ways people and agents reach the library, each thin over the public API.

- :mod:`~codesearch.faces.cli`: the ``codesearch`` command (its shared options in :mod:`~codesearch.faces.options`);
- :mod:`~codesearch.faces.mcp_server`: the MCP server over stdio (``codesearch mcp``), and over a corpus
  (:mod:`~codesearch.faces.mcp_corpus`);
- :mod:`~codesearch.faces.answers`: hits as JSON, the compact form, and the token budget every face keeps;
- :mod:`~codesearch.faces.locations`: ``path:line`` locations as editors write them;
- :mod:`~codesearch.faces.agents`, :mod:`~codesearch.faces.install`, :mod:`~codesearch.faces.jsonc`: how the MCP
  server is registered with agents, printed or written into their own configuration files.

The HTTP server (:mod:`codesearch.server`) and the framework retrievers
(:mod:`codesearch.integrations`) are faces too, kept at the import paths their
users write.
"""
