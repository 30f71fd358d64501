import signal

# First thing: the stop signals wait until the command has its handlers (launch.main), so one
# that comes while the modules load ends the command as any stop does, not by the signal or a
# traceback. (launch.STOPS: this line runs before any other module of the package.)
_held = signal.pthread_sigmask(signal.SIG_BLOCK, (signal.SIGINT, signal.SIGTERM, signal.SIGHUP,
                                                  signal.SIGQUIT))

from .launch import main  # noqa: E402 - after the signals are held

main(_held)
