"""Tools for protocol authors: is a spec change compatible (``compat``), and what does it do
to real traffic (``what-if``)."""
