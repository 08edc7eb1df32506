"""Errors raised for bad input to the verifier: the CLI prints them as one line, exit code 2."""


class CertgateInputError(ValueError):
    """Input that certgate cannot work with: the message names what is wrong and where."""
