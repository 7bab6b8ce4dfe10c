"""Stage 1, load: when requests are due — arrival processes, sweep steps, per-user pacing, the master's controller and
shape.

Seam out: a `pacing.Ticket` per request (its scheduled time `t_sched`). `arrivals` is pure; `pacing` waits on a
gevent Event and `control`/`shape` drive Locust runners, so those three belong to the Locust side of the seam.
"""
