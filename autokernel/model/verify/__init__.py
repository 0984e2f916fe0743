"""`autokernel verify`: the optimized kernels put into the whole model (verifier.py), outputs
against eager and, in half precision, against the model's float32 forward (outputs.py,
upcast.py), every mode timed side by side (modes.py, timing.py, cuda_graphs.py),
which kernels stay (ablation.py), what was expected (prediction.py) and the record of which
helped in which mode (mode_record.py)."""
