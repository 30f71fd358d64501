"""The first module the workers' server imports (workstart.py), for its side effect: the server
is killed when the command that started it ends, however that ends (SIGKILL included), and so
are its workers, which ask for SIGKILL at their parent's death. (The server's own way out, EOF
on its "alive" pipe, waits for every worker too: each holds a copy.) Before this runs no
worker exists, and a command gone by then leaves the server that EOF."""
import ctypes
import signal

PR_SET_PDEATHSIG = 1

ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
