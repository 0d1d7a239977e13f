"""Stage 4b: kernels generated per plan, beside the interpreters of ``arrowkafka.kernels``.

``decode`` and ``encode`` write the source of a Numba kernel specialised to one plan (every
operand a literal); ``modules`` writes generated modules to a cache folder and imports them;
``promote`` decides when a plan moves from the interpreter to its generated kernel.
"""
