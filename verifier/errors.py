"""Errors raised for bad input to the verifier: the CLI prints them as one line, exit code 2."""


class CertgateInputError(ValueError):
    """Input that certgate cannot work with: the message names what is wrong and where."""


def first_line(error: BaseException) -> str:
    """The first line of ``error``'s message (its type name when the message is empty), for
    one-line reports of errors raised by third-party readers."""
    return (str(error).strip().splitlines() or [type(error).__name__])[0]
