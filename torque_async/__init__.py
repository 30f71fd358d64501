"""torque-async: a system exerciser that starts bandwidth-hungry tests together and reports
what each achieved while all ran (cli.py is the command; README.md the map)."""
import os

__version__ = "0.1.0"
BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
# One BLAS thread a process: otherwise OpenBLAS starts a helper thread per CPU, which spins
# after numpy loads and after any call over floats, taking CPU from the tests. Set before numpy
# loads, so it holds in the command and in every process it starts.
os.environ.update(dict.fromkeys(BLAS_THREADS, "1"))
