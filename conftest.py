"""Its presence puts the repository root on sys.path, so tests can import `fixtures`."""
