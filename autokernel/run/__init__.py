"""A run and its records: the state file, results.tsv, the git branch, the lock, the scratch
folder (layout.py names every path), and the steps the loop takes on them (keep rule, briefing,
recovery, the starter and rebase experiments).

The night's policy (which target next, when to move on, when to go round again) lives in
orchestrate.py, which reads this package's state; nothing here imports it. The drivers that
apply the policy to a run, autokernel.loop, autokernel.parallel and autokernel.session, sit
above both. Import the modules themselves (`from autokernel.run.state import State`): this
file imports nothing, so that no module of the package drags in the others.
"""
