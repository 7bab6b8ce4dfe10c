"""Stage 1, load: when requests are due — arrival processes and sweep steps (`arrivals`), the run's global arrival
sequence and its assignment to processes (`sequence`), a process's load plan and the ticket a user takes per request
(`pacing`). Pure: the Locust/gevent side (the `Pacer` that blocks a user until its
ticket is due, the master's controller, the sweep shape) is wiring in `runtime/`.

Seam out: a `pacing.Ticket` per request (its scheduled time `t_sched`).
"""
