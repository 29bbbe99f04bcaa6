"""sweeper's Hydra launcher on Ray's public API (see _core.py for why and how)."""
