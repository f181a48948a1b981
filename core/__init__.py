"""The foundation every app stands on: the API envelope and its errors, the
bearer key, the database thread, background tasks and loops, the store lock,
the admin base and the daphne runner. It imports no other app of the project."""
