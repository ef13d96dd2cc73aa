"""DP mechanisms, one module each, all registered in :data:`REGISTRY` by name.

The contract a mechanism keeps is described in :mod:`dpsql.mechanisms.base`; the registry is
the only list of mechanism names.
"""

from dpsql.mechanisms import (
    additive,  # noqa: F401  (registers laplace, gaussian)
    exponential,  # noqa: F401  (registers exponential)
    ptr,  # noqa: F401  (registers ptr)
    saa,  # noqa: F401  (registers saa)
    smooth,  # noqa: F401  (registers smooth)
)
from dpsql.mechanisms.base import (
    AUTO,
    COMMON_OPTIONS,
    REGISTRY,
    Context,
    Mechanism,
    NoisyPart,
    Prepared,
    ReportEntry,
    choices,
    register,
    unregister,
)

__all__ = [
    "AUTO", "COMMON_OPTIONS", "REGISTRY", "Context", "Mechanism", "NoisyPart", "Prepared", "ReportEntry",
    "choices", "register", "unregister",
]
