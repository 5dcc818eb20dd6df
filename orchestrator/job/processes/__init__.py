"""The processes a job starts, and what they send back: the job's child its `result.json`
(`JobResult.to_dict()`, rebuilt with `from_dict()`), a side `SideAnswer.to_dict()` (`from_dict()`), a
probe `asdict(Probe)` (`Probe(**d)`), an AOTInductor cold start `asdict(ColdStart)` (`ColdStart(**d)`).

`supervisor.py`     the submitit callable: runs the worker in a child, records how a silent death ended
`fresh.py`          every fresh process's one entry point, by the request's kind (job, side, probe, aoti-load)
`fork_server.py`    one process per local sweep that fresh processes fork from, or that starts them ahead
`apart.py`          more paired repetitions in fresh processes, each side alone, the sides one after the other
`side_process.py`   one of those fresh processes (kind `side`); its answer, `SideAnswer`
`compile_probe.py`  the warm and portable compiles, each in a fresh process (kind `probe`)
`device_lock.py`    `launcher.overlap`: a node-local lock per GPU, held until the job's process ends
"""
