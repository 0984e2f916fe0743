"""autokernel's starter kernels, one file per kernel type (imported as autokernel.kernels).

AUTOKERNEL_STARTERS marks this folder as ours: run from the repository's root, it sits on
sys.path under the top-level name `kernels`, which Hugging Face's `kernels` distribution also
uses; autokernel.model.name_shield looks for the mark to keep the two apart.
"""

AUTOKERNEL_STARTERS = True
