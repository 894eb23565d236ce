"""`python -m trtpipe.cli`: the same as the `trtpipe` command."""

from trtpipe.cli import main

main()
