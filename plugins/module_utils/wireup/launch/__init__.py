"""The jobs machinery under torchrun_launch: job layout, Slurm, the wait, the watchdog."""
