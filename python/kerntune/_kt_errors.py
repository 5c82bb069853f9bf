"""The exceptions of ``kerntune.tune_kernel``: kerntune's own classes, which are also the
built-in exceptions a Kernel Tuner user would catch (a bad argument is a ``ValueError``
or a ``TypeError``)."""

from kerntune._kerntune import SpecError


class ArgumentError(SpecError, ValueError):
    """An argument of ``tune_kernel`` with a value kerntune cannot use; the message names
    the argument and what it accepts."""


class ArgumentTypeError(SpecError, TypeError):
    """An argument of ``tune_kernel`` of a type kerntune cannot use."""
