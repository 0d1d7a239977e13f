"""arrowkafka's asv benchmarks (numba-benchmark style: one file per topic, setup warms the JIT
and checks results against the oracle before timing, seeded data).

Compare two branches:  cd bench && asv continuous main HEAD
Side-by-side with peers in one process:  python bench/compare.py
"""
