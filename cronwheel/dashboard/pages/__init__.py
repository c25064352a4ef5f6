"""One module per page (or family of pages) of the dashboard, each with its ``router``."""
