"""Where a model's time goes: the profiled forwards (profiler.py), each microsecond attributed
to one kernel target (attribution.py) with the module that called it (module_calls.py), the
generic regions traced for the any-op path (regions.py), what torch.compile makes of the model
(compiled.py); the Profile itself is profile.py."""
