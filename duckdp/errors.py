"""Errors raised by duckdp. Every user-facing failure is a DuckDPError subclass."""


class DuckDPError(Exception):
    """Base class of every error duckdp raises on purpose."""


class InvalidParameter(DuckDPError, ValueError):
    """A privacy or mechanism parameter is missing, out of range or inconsistent."""


class SchemaError(DuckDPError, LookupError):
    """The input table, view, relation or one of its columns is unusable."""


class DataError(DuckDPError, ValueError):
    """The input data violates a precondition (e.g. NULL user ids or items)."""


class BudgetExceeded(DuckDPError):
    """A release would spend more privacy budget than remains."""


class LedgerError(DataError):
    """A persisted ledger is inconsistent, tampered with, or belongs to a different budget."""


class UnsupportedEventError(InvalidParameter):
    """An accountant cannot account this privacy event (e.g. an (ε, δ)-DP release against a zCDP budget)."""


class InternalError(DuckDPError, RuntimeError):
    """An internal invariant of duckdp failed: a bug, never the caller's input."""
