"""A stand-in torch 2.11.0 (no ProcessGroup hooks) for partrain's module tests."""
__version__ = "2.11.0"
from torch import _C  # noqa: E402,F401
from torch import distributed  # noqa: E402,F401
from torch import optim  # noqa: E402,F401
