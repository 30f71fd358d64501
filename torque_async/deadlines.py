"""How long a run's phases may take: the tests' set-up, the stop's grace, the watchdog."""
SETUP_TIMEOUT = 300.0              # seconds every test may take to set up before the start
STOP_GRACE = 0.8                   # seconds the tests get to end after the stop flag, then
                                   # the workers still running are killed
WATCHDOG_S = 10.0                  # seconds of no change in any results row while testing
                                   # (plus the longest -T or -cyclic pause) that end the run
WATCH_EVERY = 0.1                  # seconds between the watchdog's looks at the rows
