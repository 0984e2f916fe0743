"""autokernel: profile a PyTorch model, optimize its kernels overnight, verify the result."""

__version__ = "0.1.0"
DISTRIBUTION = "torch-autokernel"  # the name to pip install; the import name is autokernel
