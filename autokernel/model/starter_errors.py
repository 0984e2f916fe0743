"""The one error of starter generation, shared by its two halves (starter, starter_host)."""


class StarterError(Exception):
    """Inductor's code for the region cannot be written as a kernel.py; the message says why."""
