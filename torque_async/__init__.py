"""torque-async: a system exerciser that starts bandwidth-hungry tests together and reports
what each achieved while all ran (cli.py is the command; README.md the map)."""
__version__ = "0.1.0"
