"""cronwheel's HTTP API (docs/api.md): ``create_app(store, auth=AuthConfig(...))``."""

from cronwheel.api.app import create_app
from cronwheel.web.auth import AuthConfig

__all__ = ["AuthConfig", "create_app"]
