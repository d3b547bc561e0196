"""Errors users can act on: every message names the file/field/object and the fix."""


class VnetbenchError(Exception):
    """A problem the user can fix; the CLI prints it on one line and exits 2."""

    exit_code = 2


class TestbedFileError(VnetbenchError):
    """The testbed YAML is malformed, violates the schema or is inconsistent."""

    def __init__(self, path, where, problem, fix=""):
        self.path, self.where, self.problem, self.fix = str(path), where, problem, fix
        text = f"{self.path}: {where}: {problem}" if where else f"{self.path}: {problem}"
        super().__init__(f"{text}; {fix}" if fix else text)


class UnsupportedError(VnetbenchError):
    """This machine lacks a kernel feature or package a combination needs."""


class PrerequisiteError(VnetbenchError):
    """A binary or privilege is missing."""


class BuildError(VnetbenchError):
    """Realising the testbed failed; what was built has been unwound."""


class Interrupted(VnetbenchError):
    """SIGINT/SIGTERM stopped an operation; the message says what is left and how to remove it."""

    exit_code = 130


class RunNotFoundError(VnetbenchError):
    """No state is recorded for the named run."""
