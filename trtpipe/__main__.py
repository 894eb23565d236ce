"""`python -m trtpipe`: the same as the `trtpipe` command (and `python -m trtpipe.cli`)."""

from trtpipe.cli import main

main()
