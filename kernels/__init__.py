"""Stage 4: Numba kernels (installed as ``arrowkafka.kernels``); numpy and numba only."""
