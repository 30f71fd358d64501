"""torque-async: a system exerciser that starts bandwidth-hungry tests together and reports
what each achieved while all ran (cli.py is the command; README.md the map)."""
import os

__version__ = "0.1.0"
BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
# One thread a process: numpy's OpenBLAS made a helper thread a CPU, which spun 33 ms after
# numpy loaded (the command's start-up, beside its workers') and 0.1 s after any call over
# floats, which it ran on every CPU. Set before numpy loads, in the command's process and so in
# every process it starts.
os.environ.update(dict.fromkeys(BLAS_THREADS, "1"))
