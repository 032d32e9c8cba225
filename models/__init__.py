"""What codesearch ships besides its code: models and static tiers trained here, read by
:func:`codesearch.embedding.catalogue.static_folder` (the repository's ``models/`` folder installs as this package).

- ``minilm-code-static/``: the static tier of all-MiniLM-L6-v2 fitted on code (``MODEL_CARD.md`` says on what, how,
  and how it measured); the catalogue's ``minilm`` answers its first searches from it.
"""
