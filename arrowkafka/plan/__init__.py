"""Stage 3: message specs compiled to plans, the data the kernels interpret.

``model``: what a plan is (``Plan``, ``Node``); ``build``: how one is made from a spec and a
version (``compile_plan``, cached). The instruction set is ``arrowkafka.kernels.isa``.
"""

from arrowkafka.plan.build import compile_plan
from arrowkafka.plan.model import Node, Plan, with_indices

__all__ = ["Node", "Plan", "compile_plan", "with_indices"]
