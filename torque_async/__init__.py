"""torque-async: a system exerciser that starts bandwidth-hungry tests together and reports
what each achieved while all ran (cli.py is the command; README.md the map)."""
import os

__version__ = "0.1.0"
BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
# One thread a test: numpy's BLAS would run np.dot (a load kernel) on every CPU, and keep a
# thread spinning after each call, beside the other tests. Set before numpy loads, in the
# command's process and so in every process it starts.
os.environ.update(dict.fromkeys(BLAS_THREADS, "1"))
