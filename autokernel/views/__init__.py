"""Everything the commands draw: the live run view and run.log (live.py), `status` (status.py),
the report, its Markdown and plot (report.py, plot.py), the profile table (profile.py), a bench
verdict (verdict.py), the GPU table (gpu.py), verify's result (verify.py), and the consoles and
error line they share (console.py). Library code returns data; these draw it.
"""
