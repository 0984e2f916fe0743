"""The model side: what a model's calls are, which of them are kernel targets, and how a
target's kernel is put back into the model. Generic targets (any op or fused region outside the
nine types) are traced here (capture), get their starter from Inductor (inductor_code, starter)
and are plugged in by the same matcher that found them (matcher, calls, generic_patch)."""
