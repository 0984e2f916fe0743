"""`python -m autokernel`: the same command line as the `autokernel` script."""

from autokernel.entry import main

main()
