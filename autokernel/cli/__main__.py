"""`python -m autokernel.cli`: the same command line as the `autokernel` script."""

from autokernel.cli import main

main()
