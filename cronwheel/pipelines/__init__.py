"""Pipelines: tasks that run when the tasks they wait for have ended (decision 0025).

Built so far: the definition and its checks (:mod:`cronwheel.pipelines.definition`), and
stored definitions, versioned (:mod:`cronwheel.pipelines.model`,
:mod:`cronwheel.pipelines.service`). Next: pipeline runs.
"""
