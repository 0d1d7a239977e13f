"""Stage 5: buffers for the kernels and Arrow arrays over them.

``assemble`` allocates each output buffer once from pass 1's counts and builds the record
batch with ``pa.Array.from_buffers`` (zero-copy); ``blocks`` keeps large buffers for reuse;
``arrays`` builds small arrays from Python values without pyarrow's slow path.
"""
