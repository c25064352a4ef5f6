"""One router per resource; :func:`cronwheel.api.app.create_app` mounts them all."""
