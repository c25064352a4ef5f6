-- cronwheel SQLite schema, step 21: a job's unfinished pipeline runs (decision 0044).
-- A job whose action starts a pipeline is busy, for its overlap policy, until the
-- pipeline run its trigger started has ended: the claim probes this for each due run of
-- an overlap job (skip, queue), as it probes runs_running_by_job. Only unfinished
-- pipeline runs are in it: it stays as small as the pipeline runs in flight.
CREATE INDEX pipeline_runs_running_by_job ON pipeline_runs (job_id) WHERE state = 'running';
