"""Rate-paced streams (-streams on files, -memStreams on memory): schedule.py says what a label
does and when, pipeline.py runs it, frames.py is the data it moves, tracks.py where it lives
(and the one seam to the I/O engine), stream.py the test process the loop runs."""
