"""The benchmark scripts: each prints tables and writes JSON, over one small harness (``_harness.py``).

A package, so that the scripts import each other (``benchmarks.peer_data``)
without touching ``sys.path``: run one from the repository's root as a module,
``python -m benchmarks.peer_benchmark --help`` (the commands in
``benchmarks/README.md``). ``semble_runner.py`` alone runs by its path, in
semble's own environment.
"""
