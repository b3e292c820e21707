"""Sources: the folders the user chose, kept indexed and fresh by the backend (see service.py)."""
