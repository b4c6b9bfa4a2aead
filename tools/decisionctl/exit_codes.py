"""decisionctl's exit statuses beyond 0, written once for the commands and the jobs that return them."""

from __future__ import annotations

EXIT_FAILED = 1  # a check failed, or the input could not be read (argparse's own usage errors exit 2)
EXIT_INTERRUPTED = 130  # Ctrl-C: the same command resumes
