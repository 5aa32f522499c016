"""User-facing errors: one line, naming the file and field at fault."""


class SpecproofError(Exception):
    """An error the CLI prints as a single line (no traceback) and exits non-zero."""


class ModelFileError(SpecproofError):
    """A model path that is missing, not a model, or not local."""


class ConfigError(SpecproofError):
    """A configuration value that is out of range or inconsistent."""
