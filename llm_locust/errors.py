"""The user-facing exception tree; each message is one line that names the problem.

    LLMLocustError
    └── ConfigError      an option or file given by the user is invalid (exit code 2)

Transport and protocol failures of individual requests are not exceptions: they are data,
`record.ErrorKind` on the request's record, counted by kind.
"""


class LLMLocustError(Exception):
    """Base of every error llm-locust reports to the user."""


class ConfigError(LLMLocustError):
    """An invalid option value or input file; the message names the option and the fix."""
