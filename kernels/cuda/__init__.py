"""CUDA C++ starters (BACKEND = "cuda"): one per kernel type, the same kernel_fn contract."""
