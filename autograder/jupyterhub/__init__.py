"""The course hub's pieces that run inside JupyterHub and the Jupyter servers (spawner, login throttling,
the formgrader guard); the configuration files beside them are loaded by path."""
