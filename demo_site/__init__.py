"""The bundled demo site: a small social network the worker serves under /demo/."""
