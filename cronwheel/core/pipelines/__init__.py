"""Pipelines: tasks that run when the tasks they wait for have ended (decision 0025).

Built so far: the definition and its checks (:mod:`cronwheel.core.pipelines.definition`), and
stored definitions, versioned (:mod:`cronwheel.core.pipelines.model`,
:mod:`cronwheel.control.pipelines`). Next: pipeline runs.
"""
